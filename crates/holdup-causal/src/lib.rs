//! The causal-profiling runtime, loaded into the target with `LD_PRELOAD` by
//! `holdup causal run`.
//!
//! It does what COZ's libcoz does — interposes the pthread and signal
//! functions, keeps COZ's delay accounting, runs experiments, writes a
//! COZ-format profile — but its samples come from the holdup recorder: the
//! parent loads the BPF recorder for this process and hands over its ring
//! buffer, so the runtime sees on-CPU samples *and* blocked samples (BCOZ)
//! without a kernel patch. See [`state`] for the accounting, [`runtime`] for
//! its lifecycle.
//!
//! Loaded without `holdup causal run` (no settings in the environment), it
//! only answers `_coz_get_counter` and forwards every call.

pub use holdup_symbolize::lines;

pub mod clock;
pub mod config;
pub mod counter;
pub mod domain;
pub mod fork;
pub mod late_credits;
pub mod lockword;
pub mod modules;
pub use holdup_coz::points;
pub mod processor;
pub mod profiler;
pub mod progress;
pub mod python;
pub mod real;
pub mod runtime;
pub mod sink;
pub mod source;
pub mod state;
pub mod threads;
pub mod unwind;

#[cfg(not(test))]
#[allow(non_snake_case)]
mod interpose;

/// The code of the wrappers that forward the program's calls to libc
/// (see `interpose::forwarding_ranges`); none in unit tests, which do not
/// build them.
fn forwarding_ranges() -> Vec<processor::Forwarding> {
    #[cfg(not(test))]
    return interpose::forwarding_ranges();
    #[cfg(test)]
    Vec::new()
}

/// Runs before `main` (and before the program's own constructors, since
/// preloaded libraries are initialised first).
#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = {
    extern "C" fn init() {
        runtime::init();
    }
    init
};
