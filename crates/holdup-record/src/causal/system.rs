//! `holdup causal run --system`: one experiment and delay domain for every
//! process the command starts.
//!
//! The recorder follows the command's children into one ring buffer; each
//! process's runtime needs its own records, since only it can map its
//! addresses to lines. So this side drains the ring and forwards each
//! sample to the process it belongs to (see `peers`), and appends to the
//! output the profile records that the processes send back: only this side
//! opens the output.
//!
//! What the program's processes share, with us and with each other, they
//! inherit as file descriptors (`holdup_coz::handoff`): the domain's memfd
//! and the channel on which each announces a socket of its own. Nothing
//! has a path, so another user finds nothing to open or connect to, while
//! processes of the program that run as another user (a server dropping
//! root, a launcher using `runuser`) take part like the others.

use super::peers::{Peer, Peers};
use anyhow::Context;
use holdup_bpf::records::{self, ForkRec, RawRecord};
use holdup_bpf::ringbuf::RingReader;
use holdup_coz::handoff;
use std::fs::File;
use std::io::Write as _;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

pub struct Forwarder {
    channel: OwnedFd,
    ring: RingReader,
    peers: Peers,
    profile: Profile,
    forwarded: u64,
    dropped: u64,
    /// Announcements that were no process's own socket.
    refused: u64,
}

/// What the command inherits: the fds (kept open until it has started) and
/// the environment that names them.
pub struct Handed {
    _fds: Vec<OwnedFd>,
    pub env: Vec<(&'static str, String)>,
}

impl Forwarder {
    /// The shared domain and the channel, and the forwarder of the ring's
    /// samples; the profile records go to `output`.
    pub fn new(
        ring_fd: BorrowedFd<'_>,
        ring_bytes: u64,
        output: File,
    ) -> anyhow::Result<(Forwarder, Handed)> {
        let domain = handoff::create_domain().context("cannot create the shared domain")?;
        let (channel, program_end) = handoff::channel().context("cannot create the channel")?;
        let fds = vec![
            super::inheritable(domain.as_fd())?,
            super::inheritable(program_end.as_fd())?,
        ];
        let env = handoff::Inherited {
            domain_fd: fds[0].as_raw_fd(),
            channel_fd: fds[1].as_raw_fd(),
            epoch_ns: holdup_bpf::monotonic_ns(),
        }
        .env();
        let ring = RingReader::new(ring_fd, ring_bytes).context("cannot map the ring buffer")?;
        let fwd = Forwarder {
            channel,
            ring,
            peers: Peers::default(),
            profile: Profile {
                file: output,
                bad_frames: 0,
                error: None,
            },
            forwarded: 0,
            dropped: 0,
            refused: 0,
        };
        Ok((fwd, Handed { _fds: fds, env }))
    }

    /// Where processes announce themselves: worth a [`Forwarder::pump`]
    /// when readable, as the recorder's ring is.
    pub fn channel(&self) -> BorrowedFd<'_> {
        self.channel.as_fd()
    }

    /// Hand out the ring's records and take in the announcements; the
    /// forks the ring tells of go to `on_fork`.
    pub fn pump(&mut self, on_fork: &mut dyn FnMut(&ForkRec)) {
        self.accept();
        let peers = &mut self.peers;
        let (mut sent, mut lost) = (0, 0);
        self.ring.drain(|bytes| {
            match records::parse(bytes) {
                Ok(RawRecord::Sample(s)) => {
                    // Any time of a sample is after its process began.
                    let time = s.rec.start.max(s.rec.end);
                    if peers.route(s.rec.pid, time, bytes) {
                        sent += 1;
                    } else {
                        lost += 1;
                    }
                }
                // A Python code object, sent once, before the first sample
                // that has it: its process names its frames with it.
                Ok(RawRecord::PyCode(c)) => {
                    peers.route(c.pid, holdup_bpf::monotonic_ns(), bytes);
                }
                Ok(RawRecord::Fork(f)) => on_fork(&f),
                _ => {}
            }
        });
        self.forwarded += sent;
        self.dropped += lost;
        self.peers.settle(&mut |frame| self.profile.append(frame));
    }

    /// New processes (or new images of one after exec) announce themselves.
    fn accept(&mut self) {
        while let Some(reg) = handoff::receive(self.channel.as_fd()) {
            let Ok(reg) = reg else {
                self.refused += 1;
                continue;
            };
            // One that has ended already has nothing to get.
            if let Ok(peer) = Peer::identify(reg) {
                self.peers
                    .add(peer, &mut |frame| self.profile.append(frame));
            }
        }
    }

    /// The command ended: take what every process sent so far, and give
    /// the output back. Processes still running reach nobody from now on.
    pub fn finish(mut self) -> (File, Summary) {
        self.pump(&mut |_| {});
        self.peers.finish(&mut |frame| self.profile.append(frame));
        let summary = Summary {
            forwarded: self.forwarded,
            dropped: self.dropped,
            withheld: self.peers.withheld,
            refused: self.refused,
            bad_frames: self.profile.bad_frames,
            write_error: self.profile.error,
        };
        (self.profile.file, summary)
    }
}

/// What became of the samples and of the processes' records.
pub struct Summary {
    pub forwarded: u64,
    pub dropped: u64,
    pub withheld: u64,
    pub refused: u64,
    pub bad_frames: u64,
    pub write_error: Option<std::io::Error>,
}

/// The output, to which the processes' frames are appended: each a group of
/// whole lines, written at once (so groups of several processes never mix).
struct Profile {
    file: File,
    /// Frames that were not whole lines.
    bad_frames: u64,
    /// The first failure to write.
    error: Option<std::io::Error>,
}

impl Profile {
    fn append(&mut self, frame: &[u8]) {
        if frame.is_empty() {
            return;
        }
        if !holdup_coz::frames::is_records(frame) {
            self.bad_frames += 1;
            return;
        }
        if let Err(e) = self.file.write_all(frame) {
            self.error.get_or_insert(e);
        }
    }
}
