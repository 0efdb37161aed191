//! Where the profile goes: the file `holdup causal run` opened and handed
//! over (one process), or, with `--system`, this process's socket to it,
//! which appends each frame to the profile. The runtime never opens a path.

use holdup_coz::frames::{record_frames, send_frame};
use std::fs::File;
use std::io::Write as _;
use std::os::fd::{BorrowedFd, FromRawFd, RawFd};

pub enum Sink {
    File(File),
    Channel(BorrowedFd<'static>),
}

impl Sink {
    /// The runtime's sink, if `holdup causal run` handed one over: the
    /// runtime's socket (`--system`), else the profile's fd.
    pub fn open(channel: Option<RawFd>, output_fd: RawFd) -> Option<Sink> {
        if let Some(fd) = channel {
            // SAFETY: the runtime keeps its socket open for good.
            return Some(Sink::Channel(unsafe { BorrowedFd::borrow_raw(fd) }));
        }
        if output_fd < 0 {
            return None;
        }
        // A copy of our own: the program may close the number it inherited.
        let fd = unsafe { libc::fcntl(output_fd, libc::F_DUPFD_CLOEXEC, 0) };
        // SAFETY: a new fd, owned by the File.
        (fd >= 0).then(|| Sink::File(unsafe { File::from_raw_fd(fd) }))
    }

    /// Write a group of records whole (one write, one frame), so that a
    /// crash leaves whole experiments.
    pub fn write(&mut self, text: &str) {
        match self {
            Sink::File(f) => {
                let _ = f.write_all(text.as_bytes());
            }
            Sink::Channel(fd) => {
                for part in record_frames(text) {
                    let _ = send_frame(*fd, part.as_bytes());
                }
            }
        }
    }
}
