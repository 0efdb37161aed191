//! `holdup latency`'s recorder: log2 latency histograms of system calls,
//! kernel and user functions, block requests and lock waits, aggregated
//! in the kernel (OSprof), with DARC's call paths below user functions.

pub mod spec;
