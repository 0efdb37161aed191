//! Analyses: pure functions over a loaded trace. No root, no BPF needed to test them.

pub mod causal;
pub mod folded;
pub mod holder;
pub use holdup_trace::fxhash;
pub mod goroutines;
pub mod latency;
pub mod lock_rules;
pub mod profile;
pub mod stacks;
pub mod syscalls;
pub mod waitgraph;

/// Running or runnable more than 90% of its life: the thread waits for
/// nobody, its CPU is the bottleneck (wPerf's sink). One rule for the
/// wait-for graph's CPU-bound sinks and the report's per-thread advice.
pub fn is_cpu_bound(busy: u64, life: u64) -> bool {
    life > 0 && busy as u128 * 10 > life as u128 * 9
}
