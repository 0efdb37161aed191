//! Causal profiling runs (`holdup causal run`): COZ's virtual speedups,
//! with BCOZ's blocked samples and SCOZ's core-level delays.
//!
//! Every run loads the recorder and writes a COZ-format profile; how the
//! experiments run depends on the [`Mode`]:
//!
//! - [`Mode::Thread`]: the runtime library (`libholdup_causal.so`, found
//!   by [`preload`]) is preloaded into the command and gets the recorder's
//!   ring; it runs the experiments and writes the profile itself
//!   (`preloaded`).
//! - [`Mode::System`]: the runtime in every process of the command, one
//!   experiment and delay domain for all; this side forwards each process
//!   its samples and appends the records they send back (`system`,
//!   `peers`).
//! - [`Mode::Attach`] (`-a`, `-p`): nothing is loaded into the programs;
//!   this side resolves samples to targets (`targets`), runs the
//!   experiments and delays whole cores (`attach`, `handlers`).
//!
//! [`run`] takes a plain [`Config`] and gives back the profile as written
//! and how the command ended; reading the profile and saying what it holds
//! is the caller's.

mod attach;
mod callers;
mod handlers;
mod interpreters;
mod peers;
pub mod preload;
mod preloaded;
mod probes;
mod system;
mod tally;
mod targets;
mod visits;

pub use attach::parse_pids;

use crate::launch::ExitStatus;
use anyhow::Context;
use holdup_bpf::{Recorder, RecorderOptions, Target as Traced};
use holdup_coz::target::Subclass;
use std::fs::File;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// How the experiments run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The runtime in the command's process; with `end_to_end`, the
    /// command's completion is the progress point and it runs `runs` times.
    Thread { end_to_end: bool, runs: u32 },
    /// The runtime in every process the command starts.
    System,
    /// Core-level delays for these running processes and their children
    /// (`-p`), or every process (`-a`, `pids` empty), until the command (if
    /// any) ends, else until `duration` or Ctrl-C.
    Attach {
        pids: Vec<u32>,
        duration: Option<std::time::Duration>,
    },
}

/// A causal run, as the command line asks for it.
#[derive(Clone, Debug)]
pub struct Config {
    /// The profile (absolute, or relative to the current directory).
    pub output: PathBuf,
    /// Add to the profile instead of replacing it (COZ's behaviour).
    pub append: bool,
    /// The command to run (may be empty with [`Mode::Attach`]).
    pub command: Vec<String>,
    pub mode: Mode,
    /// Source files or objects whose lines may be targets (a glob).
    pub scope: Option<String>,
    /// Source lines where there are line tables, or whole functions.
    pub granularity: holdup_symbolize::lines::Granularity,
    /// The one target, if any: a line (`FILE:LINE`, or any target's name
    /// or its end with [`Mode::Attach`]), a subclass, or a process by name.
    pub line: Option<String>,
    pub subclass: Option<Subclass>,
    pub process: Option<String>,
    /// The one speedup, in percent.
    pub speedup: Option<u32>,
    pub period_ns: u64,
    /// The shortest experiment.
    pub experiment_ms: u64,
    pub verbose: bool,
    /// Progress points counted with uprobes: places (`[BINARY:]SYMBOL` or
    /// `[BINARY:]FILE:LINE`), and latency pairs `BEGIN,END`.
    pub progress: Vec<String>,
    pub latency: Vec<String>,
}

/// What a run left.
pub struct Outcome {
    /// The profile as written, open for reading too.
    pub output: File,
    /// How the command (the last of `--end-to-end` runs) ended; `None`
    /// without one, or when a second Ctrl-C left it running.
    pub status: Option<ExitStatus>,
}

/// Run the experiments `cfg` asks for.
pub fn run(cfg: &Config) -> anyhow::Result<Outcome> {
    match &cfg.mode {
        Mode::Attach { pids, duration } => attach::run(cfg, pids, *duration),
        Mode::Thread { .. } | Mode::System => preloaded::run(cfg),
    }
}

/// Open the profile for writing (see [`holdup_trace::open_private`]):
/// owner-only, never through a link, emptied unless `append`. Open for
/// reading too: the profile is read back from this file, not from its
/// path again.
pub fn create_output(path: &Path, append: bool) -> anyhow::Result<File> {
    holdup_trace::open_private(path, append)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A copy of `fd` that a child inherits through exec, numbered from 10
/// (clear of the numbers shells and programs use themselves).
fn inheritable(fd: BorrowedFd<'_>) -> anyhow::Result<OwnedFd> {
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD, 10) };
    if n < 0 {
        return Err(std::io::Error::last_os_error()).context("cannot pass an fd to the command");
    }
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// Ring buffer handed to the runtime: it drains every few ms, so a few MiB
/// absorb seconds of samples.
const RING_BYTES: u32 = 8 << 20;

/// The recorder as every causal mode wants it: samples with enough of the
/// user stack to unwind, no wait segments or block I/O.
/// `core_delays`: the delays are our handler threads preempting the
/// programs (-a/-p), whose time is then not the programs'.
fn start_recorder(
    target: Traced,
    period_ns: u64,
    follow_children: bool,
    core_delays: bool,
) -> anyhow::Result<Recorder> {
    Recorder::start(RecorderOptions {
        target,
        period_ns,
        follow_children,
        segments: false,
        block_io: false,
        stack_copy_bytes: 2048,
        ring_bytes: RING_BYTES,
        syscalls: None,
        own_preemption_is_delay: core_delays,
        cgroup: None,
        stack_budget: 0,
        goroutines: false,
        waker_stacks: true,
    })
    .context("starting the recorder")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    pub(crate) fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn the_profile_is_private_and_never_written_through_a_link() {
        let dir = holdup_testkit::scratch("causal-output");
        let out = dir.join("profile.coz");
        let f = create_output(&out, false).unwrap();
        assert_eq!(f.metadata().unwrap().mode() & 0o777, 0o600);
        drop(f);
        // An existing file of ours: emptied and made private, or kept with
        // --append.
        std::fs::write(&out, b"old\n").unwrap();
        chmod(&out, 0o644);
        let f = create_output(&out, true).unwrap();
        assert_eq!(f.metadata().unwrap().len(), 4);
        assert_eq!(f.metadata().unwrap().mode() & 0o777, 0o600);
        drop(f);
        assert_eq!(
            create_output(&out, false)
                .unwrap()
                .metadata()
                .unwrap()
                .len(),
            0
        );
        // A link put where the profile goes: refused, its target untouched.
        let target = dir.join("precious");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.join("link.coz");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for append in [false, true] {
            let e = format!("{:#}", create_output(&link, append).unwrap_err());
            assert!(e.contains("is a symbolic link"), "{e}");
        }
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        // Not a regular file.
        let e = format!("{:#}", create_output(&dir, false).unwrap_err());
        assert!(
            e.contains("not a regular file") || e.contains("cannot write"),
            "{e}"
        );
        // Another user's file, when root runs holdup: never written into;
        // appending to it is refused, a new profile replaces it.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&target, Some(65534), None).unwrap();
            let e = format!("{:#}", create_output(&target, true).unwrap_err());
            assert!(e.contains("belongs to uid 65534"), "{e}");
            assert_eq!(std::fs::read(&target).unwrap(), b"keep");
            let kept = dir.join("kept");
            std::fs::hard_link(&target, &kept).unwrap();
            let f = create_output(&target, false).unwrap();
            assert_eq!(f.metadata().unwrap().uid(), 0);
            assert_eq!(std::fs::read(&kept).unwrap(), b"keep");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
