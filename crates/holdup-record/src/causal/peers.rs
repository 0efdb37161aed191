//! The processes of a `--system` run that announced themselves, each known
//! by a pidfd and its start time, so that samples go only to the process
//! they belong to. A pid is a name that the kernel hands out again once its
//! process is gone: a peer whose process ended loses what was queued for it
//! (it may be the samples of a new process with that pid) and is dropped,
//! and a sample taken before a process started is not its own.

use holdup_coz::frames::{push_frame, Inbox, State};
use holdup_coz::handoff::{self, Registration};
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

/// Samples waiting for a slow process beyond this are dropped.
const MAX_OUTBOX: usize = 8 << 20;

pub struct Peer {
    pid: u32,
    pidfd: OwnedFd,
    /// When the process started: CLOCK_MONOTONIC ns, rounded down to a
    /// clock tick.
    started_ns: u64,
    socket: OwnedFd,
    outbox: Vec<u8>,
    /// Samples in the outbox (some may be partly sent).
    queued: u64,
    inbox: Inbox,
}

fn last_error<T>() -> io::Result<T> {
    Err(io::Error::last_os_error())
}

/// A pidfd of the process that made `socket`: the socket's own where the
/// kernel keeps it (Linux 6.5), which cannot name another process; else
/// opened by pid.
fn pidfd_of(pid: i32, socket: &OwnedFd) -> io::Result<OwnedFd> {
    match handoff::socket_option::<libc::c_int>(socket.as_raw_fd(), libc::SO_PEERPIDFD) {
        // SAFETY: a new fd, ours to own.
        Some(fd) if fd >= 0 => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
        _ => pidfd_open(pid),
    }
}

fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return last_error();
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Whether the process of `pidfd` has ended (a pidfd is readable then).
fn ended(pidfd: &OwnedFd) -> bool {
    let mut p = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    unsafe { libc::poll(&mut p, 1, 0) != 0 }
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// When process `pid` started, CLOCK_MONOTONIC ns: field 22 of its
/// `/proc/PID/stat` (clock ticks since boot).
pub fn start_time(pid: i32) -> io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // After "(comm) ", fields count from 3 (the state).
    let ticks: u64 = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.split(' ').nth(22 - 3))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no start time"))?;
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let since_boot = ticks.saturating_mul(1_000_000_000 / hz);
    // Boot time runs ahead of the monotonic clock by the time suspended.
    let suspended = clock_ns(libc::CLOCK_BOOTTIME).saturating_sub(clock_ns(libc::CLOCK_MONOTONIC));
    Ok(since_boot.saturating_sub(suspended))
}

impl Peer {
    /// The process that announced itself with `reg`, known by a pidfd and
    /// its start time. Refused if it has already ended: then its pid may
    /// already name another process.
    pub fn identify(reg: Registration) -> io::Result<Peer> {
        let pidfd = pidfd_of(reg.pid, &reg.socket)?;
        Peer::new(reg.pid, pidfd, reg.socket)
    }

    fn new(pid: i32, pidfd: OwnedFd, socket: OwnedFd) -> io::Result<Peer> {
        let started_ns = start_time(pid)?;
        // Still running after its start was read: the start was its own.
        if ended(&pidfd) {
            return Err(io::Error::new(io::ErrorKind::NotFound, "the process ended"));
        }
        Ok(Peer {
            pid: pid as u32,
            pidfd,
            started_ns,
            socket,
            outbox: Vec::new(),
            queued: 0,
            inbox: Inbox::default(),
        })
    }

    /// Hand every whole frame the process sent to `out`; false once its
    /// socket is closed or it broke the framing.
    fn take_frames(&mut self, out: &mut impl FnMut(&[u8])) -> bool {
        let (_, state) = self.inbox.receive(self.socket.as_fd(), out);
        state == State::Open
    }

    /// Send what the socket takes now; false when the process is gone.
    fn flush(&mut self) -> bool {
        while !self.outbox.is_empty() {
            let n = unsafe {
                libc::send(
                    self.socket.as_raw_fd(),
                    self.outbox.as_ptr().cast(),
                    self.outbox.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            if n < 0 {
                return io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock;
            }
            self.outbox.drain(..n as usize);
        }
        self.queued = 0;
        true
    }
}

#[derive(Default)]
pub struct Peers {
    map: HashMap<u32, Peer>,
    /// Samples queued for a process that had ended when they were to be
    /// sent (they may have been another process's).
    pub withheld: u64,
}

impl Peers {
    /// Add a process (one that exec'd announces itself again: its earlier
    /// image's frames are taken first).
    pub fn add(&mut self, peer: Peer, out: &mut impl FnMut(&[u8])) {
        if let Some(mut old) = self.map.insert(peer.pid, peer) {
            old.take_frames(out);
        }
    }

    /// Queue a sample record of process `pid` taken at `time_ns`
    /// (CLOCK_MONOTONIC); false if it is no known process's (or its
    /// process fell too far behind).
    pub fn route(&mut self, pid: u32, time_ns: u64, record: &[u8]) -> bool {
        match self.map.get_mut(&pid) {
            Some(p) if time_ns >= p.started_ns && p.outbox.len() < MAX_OUTBOX => {
                push_frame(&mut p.outbox, record);
                p.queued += 1;
                true
            }
            _ => false,
        }
    }

    /// After routing: a process that has ended gets nothing of what was
    /// queued since the last settle (its pid may be another's by now),
    /// hands over its last frames and is dropped; the others get their
    /// samples, and what they sent goes to `out`.
    pub fn settle(&mut self, out: &mut impl FnMut(&[u8])) {
        let mut withheld = 0;
        self.map.retain(|_, p| {
            if ended(&p.pidfd) {
                withheld += p.queued;
                p.take_frames(out);
                return false;
            }
            let open = p.take_frames(out);
            p.flush() && open
        });
        self.withheld += withheld;
    }

    /// The end of the run: every process's frames so far; then nothing
    /// more is read.
    pub fn finish(&mut self, out: &mut impl FnMut(&[u8])) {
        for (_, mut p) in self.map.drain() {
            p.take_frames(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn socket_pair() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        let kind = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
        assert_eq!(
            unsafe { libc::socketpair(libc::AF_UNIX, kind, 0, fds.as_mut_ptr()) },
            0
        );
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    /// What reached the process's end of the socket.
    fn received(theirs: &OwnedFd) -> usize {
        let mut buf = [0u8; 4096];
        let n = unsafe {
            libc::recv(
                theirs.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        n.max(0) as usize
    }

    fn ignore(_: &[u8]) {}

    #[test]
    fn the_start_time_is_when_the_process_began() {
        let before = clock_ns(libc::CLOCK_MONOTONIC);
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        let started = start_time(child.id() as i32).unwrap();
        let after = clock_ns(libc::CLOCK_MONOTONIC);
        child.kill().unwrap();
        child.wait().unwrap();
        // Rounded down to a clock tick (10 ms at 100 Hz).
        assert!(
            started + 20_000_000 >= before && started <= after,
            "started {started}, spawned between {before} and {after}"
        );
        let me = start_time(std::process::id() as i32).unwrap();
        assert!(me <= started);
    }

    /// A process that ended gets nothing queued for it, and its pid then
    /// reaches nobody; a sample older than a process is not its own.
    #[test]
    fn samples_reach_only_a_live_process_that_began_before_them() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let (ours, theirs) = socket_pair();
        let peer = Peer::new(pid as i32, pidfd_open(pid as i32).unwrap(), ours).unwrap();
        let started = peer.started_ns;
        let mut peers = Peers::default();
        peers.add(peer, &mut ignore);
        let now = clock_ns(libc::CLOCK_MONOTONIC);

        // Its own sample reaches it.
        assert!(peers.route(pid, now, b"own"));
        peers.settle(&mut ignore);
        assert_eq!(received(&theirs), 4 + 3);
        // One taken before it started was another process's with its pid.
        assert!(!peers.route(pid, started - 1, b"old"));

        // It ends while a sample with its pid is queued: that sample is
        // withheld, and the pid no longer routes anywhere.
        assert!(peers.route(pid, now, b"late"));
        child.kill().unwrap();
        child.wait().unwrap();
        peers.settle(&mut ignore);
        assert_eq!(received(&theirs), 0, "a sample reached an ended process");
        assert_eq!(peers.withheld, 1);
        assert!(peers.map.is_empty());
        assert!(!peers.route(pid, clock_ns(libc::CLOCK_MONOTONIC), b"new"));
    }

    #[test]
    fn a_process_that_has_ended_is_refused() {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        // Exited but not yet reaped: its pid is still its own.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (ours, _theirs) = socket_pair();
        let refused = Peer::new(pid, pidfd_open(pid).unwrap(), ours);
        child.wait().unwrap();
        assert!(refused.is_err());
    }

    #[test]
    fn frames_of_a_process_reach_the_output_until_it_is_gone() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let (ours, theirs) = socket_pair();
        let mut peers = Peers::default();
        peers.add(
            Peer::new(pid as i32, pidfd_open(pid as i32).unwrap(), ours).unwrap(),
            &mut ignore,
        );
        let mut frame = Vec::new();
        push_frame(&mut frame, b"experiment\tselected=a.c:1\n");
        let sent = unsafe { libc::send(theirs.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(sent as usize, frame.len());
        let mut got = Vec::new();
        peers.settle(&mut |f: &[u8]| got.push(f.to_vec()));
        assert_eq!(got, [b"experiment\tselected=a.c:1\n".to_vec()]);
        // Its last frames are taken when it ends.
        let sent = unsafe { libc::send(theirs.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(sent as usize, frame.len());
        child.kill().unwrap();
        child.wait().unwrap();
        peers.settle(&mut |f: &[u8]| got.push(f.to_vec()));
        assert_eq!(got.len(), 2);
    }
}
