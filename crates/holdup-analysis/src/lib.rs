//! Analyses: pure functions over a loaded trace. No root, no BPF needed to test them.

pub mod advice;
pub mod causal;
pub mod folded;
pub use holdup_trace::fxhash;
pub mod latency;
pub mod lock_rules;
pub mod profile;
pub mod symbols;
pub mod syscalls;
pub mod waitgraph;
