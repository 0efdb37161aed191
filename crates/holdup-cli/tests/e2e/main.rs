//! holdup's end-to-end tests, in one test binary: the `holdup` command on
//! hand-made traces and, as root, on programs recorded by the real eBPF
//! recorder on this kernel, one module per area. Tests that need root and
//! BPF are `#[ignore = "needs root and BPF"]`: `scripts/test` runs them as
//! root with `--include-ignored`, and one runs alone with
//! `cargo test --release -p holdup-cli --test e2e -- --include-ignored NAME`.

#[path = "../support/mod.rs"]
mod support;

mod causal;
mod causal_functions;
mod causal_progress;
mod debuginfo;
mod export;
mod goroutines;
mod holder;
mod holder_cli;
mod html_critical;
mod jit;
mod jvm_locks;
mod latency;
mod names;
mod outputs;
mod python;
mod record;
mod robustness;
mod runtimes;
mod sites;
mod stripped_latency;
mod syscalls;
mod traced_files;
mod waitgraph;
mod waitgraph_held;
mod waker_stack;
