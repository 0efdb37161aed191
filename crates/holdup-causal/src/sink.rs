//! Where the profile goes: the file `holdup causal run` opened and handed
//! over (one process), or, with `--system`, this process's socket to it,
//! which appends each frame to the profile. The runtime never opens a path.

use crate::runtime::Runtime;
use holdup_coz::frames::{send_frame, MAX_FRAME};
use std::fs::File;
use std::io::Write as _;
use std::os::fd::{BorrowedFd, FromRawFd};

pub enum Sink {
    File(File),
    Channel(BorrowedFd<'static>),
}

impl Sink {
    /// The runtime's sink, if `holdup causal run` handed one over.
    pub fn open(rt: &Runtime) -> Option<Sink> {
        if let Some(fd) = rt.channel {
            // SAFETY: the runtime keeps its socket open for good.
            return Some(Sink::Channel(unsafe { BorrowedFd::borrow_raw(fd) }));
        }
        if rt.cfg.output_fd < 0 {
            return None;
        }
        // A copy of our own: the program may close the number it inherited.
        let fd = unsafe { libc::fcntl(rt.cfg.output_fd, libc::F_DUPFD_CLOEXEC, 0) };
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
                for part in frame_parts(text) {
                    let _ = send_frame(*fd, part.as_bytes());
                }
            }
        }
    }
}

/// `text` in parts of at most [`MAX_FRAME`] bytes, cut at line ends (only
/// a long list of sample counts comes near); a longer line is left out.
fn frame_parts(mut text: &str) -> Vec<&str> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_group_is_cut_at_line_ends_and_an_overlong_line_left_out() {
        assert_eq!(frame_parts("a\nb\n"), ["a\nb\n"]);
        assert!(frame_parts("").is_empty());
        let line = format!("samples\tlocation={}\tcount=1\n", "x".repeat(100));
        let group = line.repeat(3 * MAX_FRAME / line.len());
        let parts = frame_parts(&group);
        assert!(parts.len() >= 3);
        assert!(parts
            .iter()
            .all(|p| p.len() <= MAX_FRAME && p.ends_with('\n')));
        assert_eq!(parts.concat(), group);
        let long = format!("a\n{}\nb\n", "y".repeat(MAX_FRAME + 1));
        assert_eq!(frame_parts(&long).concat(), "a\nb\n");
    }
}
