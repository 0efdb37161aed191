//! The causal-profiling runtime.
