//! End-to-end tests that run without root: the `holdup` command on hand-made
//! traces, on programs built here but not recorded, and on bad input. None of
//! them is ignored (the layout test in `main.rs` checks that).

mod agent;
mod causal;
mod cgroup;
mod debuginfo;
mod export;
mod flight;
mod holder;
mod html_critical;
mod latency;
mod names;
mod outputs;
mod robustness;
mod syscalls;
mod waitgraph;
