//! Analyses: pure functions over a loaded trace. No root, no BPF needed to test them.

pub mod folded;
pub mod profile;
pub mod symbols;
pub mod waitgraph;
