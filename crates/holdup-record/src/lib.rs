//! Recording: one session of `holdup record` as a library, so that other
//! recorders (`causal run`, `latency`) and tests can use its parts.
//!
//! - [`launch`]: start the command held before `exec` until it is tracked.
//! - [`convert`]: turn what the BPF recorder captured into trace records
//!   (unwinding user stacks, interning stacks and files, naming threads).
//! - [`jit`]: frames in generated code, named from the processes' perf
//!   maps and jitdump files.
//! - [`python`]: CPython processes recognised by the interpreter they map,
//!   their interpreter frames named from the code objects the recorder sent.
//! - [`goroutines`]: Go processes whose goroutines' waits are followed
//!   (`--goroutines`), recognised by their executable.
//! - [`embed_symbols`]: at the end, symbols for every frame seen, with
//!   [`symcache`] keeping them across runs.
//! - [`causal`]: `holdup causal run`'s experiments, from a plain
//!   [`causal::Config`] to a written profile.
//! - [`latency`]: `holdup latency`'s recorder, from a plain
//!   [`latency::Config`] to a written latency file.
//! - [`cgroup`]: `--cgroup`, the cgroup a recording is limited to.
//! - [`flight`]: `--flight`, the trace kept in memory for its last seconds.
//! - [`lost`]: what the recording lost, by name in the trace.
//! - [`recording`]: the loop every recorder shares: the command, the wait
//!   for its end, the duration, Ctrl-C, the drain and the exit code.
//! - [`session`]: the whole recording, from the command line's [`session::Config`]
//!   to a finished trace and a [`session::Summary`].
//! - [`windows`]: the same recording kept in memory and handed over one
//!   window of time after another (`holdup agent`).

pub mod causal;
pub mod cgroup;
pub mod convert;
pub mod embed_symbols;
pub mod flight;
pub mod goroutines;
pub mod jit;
pub mod latency;
pub mod launch;
pub mod lost;
pub mod python;
pub mod recording;
pub mod session;
pub mod symcache;
pub mod windows;
