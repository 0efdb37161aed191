//! Where the runtime's samples come from: the recorder's ring buffer,
//! handed over by `holdup causal run` (one process), or the socket through
//! which `holdup causal run --system` forwards each process its own
//! records (one ring, many processes) as frames: a native-endian u32
//! length, then the record.

use holdup_bpf::ringbuf::RingReader;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

pub enum Source {
    Ring(RingReader),
    Socket {
        fd: OwnedFd,
        /// Bytes received, of which the first `filled` are valid.
        buf: Vec<u8>,
        filled: usize,
    },
}

/// Read at once: many records.
const BUF_BYTES: usize = 1 << 16;

impl Source {
    /// Connect to the `--system` samples socket; `holdup causal run` knows
    /// us by our pid (SO_PEERCRED).
    pub fn connect(socket: &Path) -> Option<Source> {
        use std::os::unix::ffi::OsStrExt;
        let path = socket.as_os_str().as_bytes();
        let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        if path.len() >= addr.sun_path.len() {
            return None;
        }
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (d, &s) in addr.sun_path.iter_mut().zip(path) {
            *d = s as libc::c_char;
        }
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return None;
        }
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let rc = unsafe {
            libc::connect(
                fd.as_raw_fd(),
                &addr as *const libc::sockaddr_un as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        (rc == 0).then(|| Source::Socket {
            fd,
            buf: vec![0; BUF_BYTES],
            filled: 0,
        })
    }

    /// Hand every waiting record to `f`; the number of records.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        match self {
            Source::Ring(r) => r.drain(f),
            Source::Socket { fd, buf, filled } => {
                let mut n = 0;
                loop {
                    let got = unsafe {
                        libc::recv(
                            fd.as_raw_fd(),
                            buf[*filled..].as_mut_ptr().cast(),
                            buf.len() - *filled,
                            libc::MSG_DONTWAIT,
                        )
                    };
                    if got <= 0 {
                        return n;
                    }
                    *filled += got as usize;
                    let mut at = 0;
                    while *filled - at >= 4 {
                        let len = u32::from_ne_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
                        if *filled - at - 4 < len {
                            break;
                        }
                        f(&buf[at + 4..at + 4 + len]);
                        n += 1;
                        at += 4 + len;
                    }
                    buf.copy_within(at..*filled, 0);
                    *filled -= at;
                    if *filled == buf.len() {
                        // A frame larger than the buffer: grow it.
                        buf.resize(buf.len() * 2, 0);
                    }
                }
            }
        }
    }
}
