//! Where the runtime's samples come from: the recorder's ring buffer,
//! handed over by `holdup causal run` (one process), or the socket through
//! which `holdup causal run --system` forwards each process its own
//! records (one ring, many processes), one frame each.

use holdup_bpf::ringbuf::RingReader;
use holdup_coz::frames::{Inbox, State};
use holdup_coz::handoff;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

pub enum Source {
    Ring(RingReader),
    Socket { fd: OwnedFd, inbox: Inbox },
}

impl Source {
    /// `--system`: make this process's socket to `holdup causal run` and
    /// announce it on the inherited channel (the kernel tells it our pid).
    pub fn register(channel: BorrowedFd<'_>) -> Result<Source, String> {
        // A number the program closed, or reused, fails the check.
        handoff::check_channel(channel).map_err(|e| e.to_string())?;
        let fd = handoff::register(channel).map_err(|e| format!("cannot register: {e}"))?;
        Ok(Source::Socket {
            fd,
            inbox: Inbox::default(),
        })
    }

    /// The socket to `holdup causal run`, if the samples come through one.
    pub fn socket(&self) -> Option<RawFd> {
        match self {
            Source::Ring(_) => None,
            Source::Socket { fd, .. } => Some(fd.as_raw_fd()),
        }
    }

    /// Hand every waiting record to `f`; the number of records.
    pub fn drain(&mut self, f: impl FnMut(&[u8])) -> usize {
        match self {
            Source::Ring(r) => r.drain(f),
            Source::Socket { fd, inbox } => {
                let (n, state) = inbox.receive(fd.as_fd(), f);
                if state == State::Oversized {
                    // Not a frame of `holdup causal run`: read no more.
                    unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RD) };
                }
                n
            }
        }
    }
}
