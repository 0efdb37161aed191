//! Frames on a `--system` process's socket ([`handoff`](crate::handoff)):
//! a native-endian u32 length, then that many bytes. Down the socket go the
//! process's sample records, up it its profile records. Neither side trusts
//! the other's lengths: a frame longer than [`MAX_FRAME`] ends the exchange.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The longest frame: a record group of the profile, or one sample record
/// (a few KiB), is far below.
pub const MAX_FRAME: usize = 1 << 20;

/// Bytes read at once when no frame asks for more.
const START_BYTES: usize = 1 << 16;

/// Append `bytes` as one frame.
pub fn push_frame(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_ne_bytes());
    out.extend_from_slice(bytes);
}

/// Send `bytes` as one frame, waiting for room (the runtime's profile
/// records; never raises SIGPIPE in the program).
pub fn send_frame(fd: BorrowedFd<'_>, bytes: &[u8]) -> io::Result<()> {
    if bytes.len() > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "frame too long",
        ));
    }
    let mut frame = Vec::with_capacity(4 + bytes.len());
    push_frame(&mut frame, bytes);
    let mut at = 0;
    while at < frame.len() {
        let n = unsafe {
            libc::send(
                fd.as_raw_fd(),
                frame[at..].as_ptr().cast(),
                frame.len() - at,
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        at += n as usize;
    }
    Ok(())
}

/// The runtime: profile records `text` (whole lines) in frames of at most
/// [`MAX_FRAME`] bytes, cut at line ends (only a long list of sample counts
/// comes near); a longer line is left out.
pub fn record_frames(mut text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    while text.len() > MAX_FRAME {
        match text.as_bytes()[..MAX_FRAME]
            .iter()
            .rposition(|&b| b == b'\n')
        {
            Some(end) => {
                parts.push(&text[..=end]);
                text = &text[end + 1..];
            }
            None => match text.find('\n') {
                Some(end) => text = &text[end + 1..],
                None => text = "",
            },
        }
    }
    if !text.is_empty() {
        parts.push(text);
    }
    parts
}

/// `holdup causal run`: whether a frame that came up a socket is profile
/// records (whole lines), which it appends as they are.
pub fn is_records(frame: &[u8]) -> bool {
    frame.ends_with(b"\n")
}

/// What the other side's socket is after a [`Inbox::receive`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// More may come.
    Open,
    /// Closed by the other side (or failed).
    Closed,
    /// It announced a frame longer than [`MAX_FRAME`]: nothing more is read.
    Oversized,
}

/// Bytes received and not yet handed out as frames.
#[derive(Debug, Default)]
pub struct Inbox {
    buf: Vec<u8>,
    filled: usize,
}

impl Inbox {
    /// Receive, without waiting, all that `fd` holds, and hand every whole
    /// frame to `f`; the number of frames, and the socket's state.
    pub fn receive(&mut self, fd: BorrowedFd<'_>, mut f: impl FnMut(&[u8])) -> (usize, State) {
        let mut frames = 0;
        loop {
            if self.filled == self.buf.len() {
                // Full of a frame's start: room for all of it (its length is
                // known to be within the bound once 4 bytes are in).
                let want = match self.announced() {
                    Some(len) => 4 + len,
                    None => START_BYTES,
                };
                self.buf
                    .resize(want.max(self.buf.len() * 2).min(4 + MAX_FRAME), 0);
            }
            let got = unsafe {
                libc::recv(
                    fd.as_raw_fd(),
                    self.buf[self.filled..].as_mut_ptr().cast(),
                    self.buf.len() - self.filled,
                    libc::MSG_DONTWAIT,
                )
            };
            if got == 0 {
                return (frames, State::Closed);
            }
            if got < 0 {
                return match io::Error::last_os_error().kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => (frames, State::Open),
                    _ => (frames, State::Closed),
                };
            }
            self.filled += got as usize;
            let mut at = 0;
            while self.filled - at >= 4 {
                let len = u32::from_ne_bytes(self.buf[at..at + 4].try_into().unwrap()) as usize;
                if len > MAX_FRAME {
                    self.filled = 0;
                    return (frames, State::Oversized);
                }
                if self.filled - at - 4 < len {
                    break;
                }
                f(&self.buf[at + 4..at + 4 + len]);
                frames += 1;
                at += 4 + len;
            }
            self.buf.copy_within(at..self.filled, 0);
            self.filled -= at;
        }
    }

    /// The length of the frame at the start of the buffer, if known.
    fn announced(&self) -> Option<usize> {
        (self.filled >= 4).then(|| u32::from_ne_bytes(self.buf[..4].try_into().unwrap()) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};

    fn pair() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        let rc = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) };
        assert_eq!(rc, 0);
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    fn collect(inbox: &mut Inbox, fd: BorrowedFd<'_>) -> (Vec<Vec<u8>>, State) {
        let mut got = Vec::new();
        let (n, state) = inbox.receive(fd, |f| got.push(f.to_vec()));
        assert_eq!(n, got.len());
        (got, state)
    }

    #[test]
    fn frames_of_any_size_up_to_the_bound_arrive_whole() {
        let (a, b) = pair();
        let big = vec![7u8; 300_000];
        let writer = std::thread::spawn(move || {
            send_frame(a.as_fd(), b"one").unwrap();
            send_frame(a.as_fd(), &big).unwrap();
            send_frame(a.as_fd(), b"").unwrap();
        });
        let mut inbox = Inbox::default();
        let mut frames = Vec::new();
        loop {
            let (mut got, state) = collect(&mut inbox, b.as_fd());
            frames.append(&mut got);
            if state == State::Closed {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        writer.join().unwrap();
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[0], b"one");
        assert!(frames[1].len() == 300_000 && frames[1].iter().all(|&x| x == 7));
        assert!(frames[2].is_empty());
        assert!(send_frame(b.as_fd(), &vec![0; MAX_FRAME + 1]).is_err());
    }

    #[test]
    fn an_announced_length_over_the_bound_is_refused_without_allocating_it() {
        let (a, b) = pair();
        let mut bytes = Vec::new();
        push_frame(&mut bytes, b"fine");
        bytes.extend_from_slice(&u32::MAX.to_ne_bytes());
        bytes.extend_from_slice(b"rest");
        let n = unsafe { libc::send(a.as_raw_fd(), bytes.as_ptr().cast(), bytes.len(), 0) };
        assert_eq!(n as usize, bytes.len());
        let mut inbox = Inbox::default();
        let (got, state) = collect(&mut inbox, b.as_fd());
        assert_eq!(got, vec![b"fine".to_vec()]);
        assert_eq!(state, State::Oversized);
        assert!(inbox.buf.len() <= START_BYTES);
    }

    #[test]
    fn a_large_group_is_cut_at_line_ends_and_an_overlong_line_left_out() {
        assert_eq!(record_frames("a\nb\n"), ["a\nb\n"]);
        assert!(record_frames("").is_empty());
        let line = format!("samples\tlocation={}\tcount=1\n", "x".repeat(100));
        let group = line.repeat(3 * MAX_FRAME / line.len());
        let parts = record_frames(&group);
        assert!(parts.len() >= 3);
        assert!(parts
            .iter()
            .all(|p| p.len() <= MAX_FRAME && p.ends_with('\n')));
        assert_eq!(parts.concat(), group);
        let long = format!("a\n{}\nb\n", "y".repeat(MAX_FRAME + 1));
        assert_eq!(record_frames(&long).concat(), "a\nb\n");
        assert!(parts.iter().all(|p| is_records(p.as_bytes())));
        assert!(!is_records(b"a\nb") && !is_records(b""));
    }
}
