//! End-to-end tests that need root and BPF: programs recorded by the real
//! eBPF recorder on this kernel. Every one is `#[ignore = "needs root and BPF"]`
//! (the layout test in `main.rs` checks that).

mod agent;
mod causal;
mod causal_functions;
mod causal_progress;
mod causal_python;
mod causal_usdt;
mod cgroup;
mod debuginfo;
mod export;
mod flight;
mod goroutines;
mod holder;
mod jit;
mod jvm_locks;
mod latency;
mod names;
mod outputs;
mod python;
mod python_waits;
mod record;
mod robustness;
mod runtimes;
mod sites;
mod stack_budget;
mod stripped_latency;
mod syscalls;
mod traced_files;
mod waitgraph;
mod waitgraph_held;
mod waker_stack;
