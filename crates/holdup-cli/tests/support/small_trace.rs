//! The small synthetic trace (holdup_trace::synth::small), written where
//! a command can read it.

use holdup_trace::features;
pub use holdup_trace::synth::small::*;
#[allow(unused_imports)] // not every test binary uses it
pub use holdup_trace::synth::MS;
use std::path::Path;

/// The small trace with thread 10 named `a`.
pub fn small_trace(path: &Path) {
    small_trace_named(path, "a");
}

/// The small trace with thread 10 named `a_name`.
pub fn small_trace_named(path: &Path, a_name: &str) {
    trace(a_name)
        .write(path, &header(), features::SEGMENTS)
        .unwrap();
}
