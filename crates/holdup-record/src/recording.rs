//! The recording loop every recorder shares (`record`, `latency`, `causal`
//! with `-a`/`-p` and `--system`): the command launched held until the
//! recorder tracks it, the wait for its end, for `--duration` or for the
//! `-p` processes to exit, the periodic drain, the rules for Ctrl-C, and
//! the exit code passed on.
//!
//! The rules for a signal (SIGINT, SIGTERM, SIGHUP): with a command, Ctrl-C
//! reaches it too (same process group), so the first one leaves the
//! recording running until the command exits, and a second one stops it
//! now; without a command, the first one stops it.

use crate::launch::{self, ExitStatus, Launched};
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Signals received since [`catch_signals`].
static SIGNALS: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::SeqCst);
}

/// Count SIGINT, SIGTERM and SIGHUP instead of dying of them: the trace is
/// finished after any of them.
fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// How often the `-p` processes are checked for having exited.
const ALIVE_CHECK: Duration = Duration::from_millis(100);

/// What ends a recording, besides the command's exit and signals.
#[derive(Clone, Debug, Default)]
pub struct Until {
    /// Stop after this long (from the command's start).
    pub duration: Option<Duration>,
    /// Existing processes (`-p`): without a command, the recording stops
    /// once none of them runs.
    pub pids: Vec<u32>,
}

impl Until {
    /// For a recorder's target: with `-p`, its processes.
    pub fn of(target: &holdup_bpf::Target, duration: Option<Duration>) -> Until {
        Until {
            duration,
            pids: match target {
                holdup_bpf::Target::Pids(p) => p.clone(),
                holdup_bpf::Target::All => Vec::new(),
            },
        }
    }
}

/// What the drain callback tells the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// The recorder has what it wanted (DARC's decision point).
    Done,
}

/// Why a recording stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The command exited.
    Exited(ExitStatus),
    /// `--duration` was over.
    Duration,
    /// Signals, as the rules in this module say.
    Interrupted,
    /// Every `-p` process exited.
    Gone,
    /// The drain callback said [`Flow::Done`].
    Done,
}

/// One recording: the command (if any) and the wait for its end.
pub struct Recording {
    command: Option<Launched>,
    until: Until,
    began: Instant,
    signals: &'static AtomicU32,
}

impl Recording {
    /// Fork `command` (none if empty), held before `exec` until
    /// [`Recording::start`]: track [`Recording::pid`] in between, and
    /// nothing it does is missed.
    pub fn launch(command: &[String], until: Until) -> anyhow::Result<Recording> {
        let command = if command.is_empty() {
            None
        } else {
            Some(launch::spawn_held(command)?)
        };
        Ok(Recording {
            command,
            until,
            began: Instant::now(),
            signals: &SIGNALS,
        })
    }

    /// The launched command's pid.
    pub fn pid(&self) -> Option<u32> {
        self.command.as_ref().map(|c| c.pid as u32)
    }

    /// Let the command run (fails if it cannot be executed), and count
    /// signals from now on.
    pub fn start(&mut self) -> anyhow::Result<()> {
        catch_signals();
        if let Some(c) = &mut self.command {
            c.release()?;
        }
        self.began = Instant::now();
        Ok(())
    }

    /// When the command was let run (or the recording began).
    pub fn began(&self) -> Instant {
        self.began
    }

    /// Wait in steps of `tick`, calling `drain` after each, until the
    /// recording stops. A step ends early when the command exits, a signal
    /// arrives or one of `wake` is readable (the recorder's ring).
    pub fn run(
        &mut self,
        tick: Duration,
        wake: &[BorrowedFd<'_>],
        mut drain: impl FnMut() -> anyhow::Result<Flow>,
    ) -> anyhow::Result<Stop> {
        let mut next_alive_check = Instant::now() + ALIVE_CHECK;
        loop {
            let pidfd = self.command.as_ref().and_then(Launched::pidfd);
            let fds: Vec<BorrowedFd<'_>> = pidfd.into_iter().chain(wake.iter().copied()).collect();
            launch::sleep_until_readable(&fds, tick);
            if let Some(status) = self.command.as_ref().and_then(|c| c.wait(false)) {
                return Ok(Stop::Exited(status));
            }
            if drain()? == Flow::Done {
                return Ok(Stop::Done);
            }
            if self.interrupted() {
                return Ok(Stop::Interrupted);
            }
            if self
                .until
                .duration
                .is_some_and(|d| self.began.elapsed() >= d)
            {
                return Ok(Stop::Duration);
            }
            if self.command.is_none()
                && !self.until.pids.is_empty()
                && Instant::now() >= next_alive_check
            {
                next_alive_check = Instant::now() + ALIVE_CHECK;
                if !self.until.pids.iter().any(|&p| alive(p)) {
                    return Ok(Stop::Gone);
                }
            }
        }
    }

    /// Whether the signals so far stop the recording.
    fn interrupted(&self) -> bool {
        let signals = self.signals.load(Ordering::SeqCst);
        signals > 1 || (signals > 0 && self.command.is_none())
    }

    /// The command's status once it has exited: it runs on untraced after
    /// a recording that stopped before it. Ctrl-C reaches it too; a
    /// second one (in all) leaves it running and gives `None`.
    pub fn wait_untraced(&self) -> Option<ExitStatus> {
        let command = self.command.as_ref()?;
        loop {
            if let Some(status) = command.wait_for(Duration::from_millis(200)) {
                return Some(status);
            }
            if self.signals.load(Ordering::SeqCst) > 1 {
                return None;
            }
        }
    }
}

impl Stop {
    /// The command's status, if it exited.
    pub fn status(self) -> Option<ExitStatus> {
        match self {
            Stop::Exited(s) => Some(s),
            _ => None,
        }
    }
}

/// The exit code a recorder passes on: the command's, 128 + the signal
/// that killed it (as shells say), or 0 without one.
pub fn exit_code(status: Option<ExitStatus>) -> u8 {
    status.map_or(0, |s| s.as_shell_code().clamp(0, 255) as u8)
}

/// Running, not gone nor a zombie (whose parent has not waited for it).
pub fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: Duration = Duration::from_millis(5);

    fn sh(script: &str) -> Vec<String> {
        ["sh", "-c", script].map(String::from).to_vec()
    }

    /// A recording that counts signals in `signals`, its own (the tests
    /// run in parallel, and the real count is the process's).
    fn recording(command: &[String], until: Until, signals: &'static AtomicU32) -> Recording {
        let mut r = Recording::launch(command, until).unwrap();
        r.signals = signals;
        r.start().unwrap();
        r
    }

    /// Run `r`, a Ctrl-C arriving after each drain numbered in `at`: how it
    /// stopped, and after how many drains.
    fn run_interrupted(r: &mut Recording, at: &[usize]) -> (Stop, usize) {
        let mut ticks = 0;
        let signals = r.signals;
        let stop = r
            .run(TICK, &[], || {
                ticks += 1;
                if at.contains(&ticks) {
                    signals.fetch_add(1, Ordering::SeqCst);
                }
                Ok(Flow::Continue)
            })
            .unwrap();
        (stop, ticks)
    }

    fn kill(pid: u32, sig: i32) {
        assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
    }

    #[test]
    fn the_commands_exit_code_or_128_plus_the_signal_is_passed_on() {
        static S: AtomicU32 = AtomicU32::new(0);
        let mut r = recording(&sh("exit 3"), Until::default(), &S);
        let stop = r.run(TICK, &[], || Ok(Flow::Continue)).unwrap();
        assert_eq!(stop, Stop::Exited(ExitStatus::Code(3)));
        assert_eq!(exit_code(stop.status()), 3);

        let mut r = recording(&sh("kill -INT $$"), Until::default(), &S);
        let stop = r.run(TICK, &[], || Ok(Flow::Continue)).unwrap();
        assert_eq!(stop, Stop::Exited(ExitStatus::Signal(libc::SIGINT)));
        assert_eq!(exit_code(stop.status()), 130);
        assert_eq!(exit_code(None), 0);
    }

    #[test]
    fn with_a_command_the_first_ctrl_c_waits_for_it_to_exit() {
        static S: AtomicU32 = AtomicU32::new(0);
        // The command outlives the first Ctrl-C by 300 ms (it ignores it).
        let mut r = recording(&sh("trap '' INT; sleep 0.3; exit 4"), Until::default(), &S);
        let began = Instant::now();
        let (stop, ticks) = run_interrupted(&mut r, &[2]);
        assert_eq!(stop, Stop::Exited(ExitStatus::Code(4)));
        assert!(began.elapsed() >= Duration::from_millis(250));
        assert!(ticks > 10, "drained every tick: {ticks}");
    }

    #[test]
    fn with_a_command_the_second_ctrl_c_stops_now() {
        static S: AtomicU32 = AtomicU32::new(0);
        let mut r = recording(&sh("trap '' INT; sleep 5"), Until::default(), &S);
        let pid = r.pid().unwrap();
        let began = Instant::now();
        let (stop, ticks) = run_interrupted(&mut r, &[2, 4]);
        assert_eq!((stop, ticks), (Stop::Interrupted, 4));
        assert!(began.elapsed() < Duration::from_secs(2));
        // Stopped now, the untraced wait gives the command up at once.
        assert_eq!(r.wait_untraced(), None);
        kill(pid, libc::SIGKILL);
    }

    #[test]
    fn without_a_command_the_first_ctrl_c_stops() {
        static S: AtomicU32 = AtomicU32::new(0);
        let mut r = recording(&[], Until::default(), &S);
        let (stop, ticks) = run_interrupted(&mut r, &[3]);
        assert_eq!((stop, ticks), (Stop::Interrupted, 3));
        assert_eq!(r.wait_untraced(), None);
    }

    #[test]
    fn the_duration_stops_a_recording_and_the_command_runs_on_untraced() {
        static S: AtomicU32 = AtomicU32::new(0);
        let until = Until {
            duration: Some(Duration::from_millis(100)),
            pids: Vec::new(),
        };
        let mut r = recording(&sh("sleep 0.4; exit 7"), until, &S);
        let stop = r.run(TICK, &[], || Ok(Flow::Continue)).unwrap();
        let took = r.began().elapsed();
        assert_eq!(stop, Stop::Duration);
        assert!(took >= Duration::from_millis(100), "{took:?}");
        assert_eq!(r.wait_untraced(), Some(ExitStatus::Code(7)));
        assert!(r.began().elapsed() >= Duration::from_millis(350));
    }

    #[test]
    fn the_recording_stops_when_every_p_process_exited() {
        static S: AtomicU32 = AtomicU32::new(0);
        let mut a = std::process::Command::new("sleep")
            .arg("0.1")
            .spawn()
            .unwrap();
        let mut b = std::process::Command::new("sleep")
            .arg("0.3")
            .spawn()
            .unwrap();
        let until = Until {
            duration: Some(Duration::from_secs(5)),
            pids: vec![a.id(), b.id()],
        };
        let mut r = recording(&[], until, &S);
        let stop = r.run(TICK, &[], || Ok(Flow::Continue)).unwrap();
        // Exited but not waited for: zombies count as gone.
        let took = r.began().elapsed();
        assert_eq!(stop, Stop::Gone);
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_secs(4),
            "{took:?}"
        );
        a.wait().unwrap();
        b.wait().unwrap();
    }

    #[test]
    fn the_drain_can_end_the_recording_and_its_errors_stop_it() {
        static S: AtomicU32 = AtomicU32::new(0);
        let mut r = recording(&sh("sleep 5"), Until::default(), &S);
        let pid = r.pid().unwrap();
        let mut ticks = 0;
        let stop = r
            .run(TICK, &[], || {
                ticks += 1;
                Ok(if ticks == 3 {
                    Flow::Done
                } else {
                    Flow::Continue
                })
            })
            .unwrap();
        assert_eq!(stop, Stop::Done);
        let e = r.run(TICK, &[], || anyhow::bail!("disk full")).unwrap_err();
        assert_eq!(e.to_string(), "disk full");
        kill(pid, libc::SIGTERM);
        assert_eq!(r.wait_untraced(), Some(ExitStatus::Signal(libc::SIGTERM)));
    }

    #[test]
    fn a_readable_descriptor_ends_a_step_early() {
        use std::os::fd::AsFd;
        static S: AtomicU32 = AtomicU32::new(0);
        let (rd, wr) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut r = recording(&[], Until::default(), &S);
        let mut ticks = 0;
        let began = Instant::now();
        std::io::Write::write_all(&mut &wr, b"x").unwrap();
        let stop = r
            .run(Duration::from_secs(10), &[rd.as_fd()], || {
                ticks += 1;
                Ok(if ticks == 5 {
                    Flow::Done
                } else {
                    Flow::Continue
                })
            })
            .unwrap();
        assert_eq!(stop, Stop::Done);
        assert!(began.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn the_command_gets_the_default_sigpipe_rust_ignores() {
        static S: AtomicU32 = AtomicU32::new(0);
        let mut r = recording(&sh("kill -PIPE $$; exit 0"), Until::default(), &S);
        let stop = r.run(TICK, &[], || Ok(Flow::Continue)).unwrap();
        assert_eq!(stop, Stop::Exited(ExitStatus::Signal(libc::SIGPIPE)));
    }

    #[test]
    fn a_command_that_cannot_run_is_one_error() {
        let mut r =
            Recording::launch(&["/nonexistent/holdup-test".into()], Until::default()).unwrap();
        let e = r.start().unwrap_err().to_string();
        assert!(e.contains("cannot run '/nonexistent/holdup-test'"), "{e}");
    }
}
