//! One definition of the names that the causal runtime and its readers
//! share: the environment through which `holdup causal run` hands its
//! settings to the runtime, and the records and keys of COZ's profile
//! format, which the runtime writes and `holdup causal report` reads; where
//! `holdup causal run` puts progress points (the source lines and
//! functions of machine code are `holdup_symbolize`'s).

pub mod experiment;
pub mod frames;
pub mod handoff;
pub mod names;
#[cfg(feature = "samples")]
pub mod points;
pub mod probe;
pub mod probe_list;
pub mod profile;
#[cfg(feature = "samples")]
pub mod python;
pub mod scope;
pub mod selection;
pub mod target;
pub mod usdt;

/// Environment variables set by `holdup causal run`, read by the runtime.
pub mod env {
    pub const RING_FD: &str = "HOLDUP_CAUSAL_RING_FD";
    pub const RING_BYTES: &str = "HOLDUP_CAUSAL_RING_BYTES";
    /// Pid of `holdup causal run`: only its direct child profiles itself.
    pub const PARENT: &str = "HOLDUP_CAUSAL_PARENT";
    pub const PERIOD_NS: &str = "HOLDUP_CAUSAL_PERIOD_NS";
    /// The profile, opened by `holdup causal run` (one process; `--system`
    /// processes send theirs over their socket).
    pub const OUTPUT_FD: &str = "HOLDUP_CAUSAL_OUTPUT_FD";
    pub const SCOPE: &str = "HOLDUP_CAUSAL_SCOPE";
    /// `function`: whole functions are the targets, line tables or not.
    pub const GRANULARITY: &str = "HOLDUP_CAUSAL_GRANULARITY";
    pub const LINE: &str = "HOLDUP_CAUSAL_LINE";
    pub const SPEEDUP: &str = "HOLDUP_CAUSAL_SPEEDUP";
    pub const SUBCLASS: &str = "HOLDUP_CAUSAL_SUBCLASS";
    /// `--process NAME`: experiments on that whole process only.
    pub const PROCESS: &str = "HOLDUP_CAUSAL_PROCESS";
    pub const END_TO_END: &str = "HOLDUP_CAUSAL_END_TO_END";
    /// Minimum experiment length in ms (tuning and tests).
    pub const EXPERIMENT_MS: &str = "HOLDUP_CAUSAL_EXPERIMENT_MS";
    pub const VERBOSE: &str = "HOLDUP_CAUSAL_VERBOSE";
    /// `--system`: the shared domain's memfd and the channel's socket
    /// (see [`crate::handoff`]), inherited by every process.
    pub const DOMAIN_FD: &str = "HOLDUP_CAUSAL_DOMAIN_FD";
    pub const CHANNEL_FD: &str = "HOLDUP_CAUSAL_CHANNEL_FD";
    /// `--system`: CLOCK_MONOTONIC ns when the domain was made. The global
    /// delay grows no faster than time passes, so a larger one is damage.
    pub const EPOCH_NS: &str = "HOLDUP_CAUSAL_EPOCH_NS";
    /// Progress points counted by uprobes (see [`crate::probe_list`]).
    pub const PROBES: &str = "HOLDUP_CAUSAL_PROBES";
    pub const ALL: &[&str] = &[
        RING_FD,
        RING_BYTES,
        PARENT,
        PERIOD_NS,
        OUTPUT_FD,
        SCOPE,
        GRANULARITY,
        LINE,
        SPEEDUP,
        SUBCLASS,
        PROCESS,
        END_TO_END,
        EXPERIMENT_MS,
        VERBOSE,
        PROBES,
        DOMAIN_FD,
        CHANNEL_FD,
        EPOCH_NS,
    ];
}

/// Size of the memory file that holds the experiment and delay domain
/// shared by the processes of a `--system` run.
pub const DOMAIN_BYTES: usize = 16384;

/// What the tests of reading traced processes' files share.
#[cfg(test)]
pub(crate) mod test_fifo {
    use std::path::PathBuf;
    use std::time::Duration;

    /// A fresh directory for test `name` with a FIFO named `server` in it.
    pub fn fifo(name: &str) -> (PathBuf, PathBuf) {
        let dir = holdup_testkit::scratch(name);
        let fifo = dir.join("server");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        (dir, fifo)
    }

    /// The error `f` ends with, in a thread: an open that blocks fails the
    /// test instead of hanging it.
    pub fn error_at_once<T>(f: impl FnOnce() -> Result<T, String> + Send + 'static) -> String {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f().err());
        });
        rx.recv_timeout(Duration::from_secs(2))
            .expect("blocked on the FIFO")
            .expect("no error")
    }
}
