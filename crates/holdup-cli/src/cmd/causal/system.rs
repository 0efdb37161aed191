//! `holdup causal run --system`: one experiment and delay domain for every
//! process the command starts.
//!
//! The recorder follows the command's children into one ring buffer; each
//! process's runtime needs its own records, since only it can map its
//! addresses to lines. So this side drains the ring and forwards each
//! sample to the process it belongs to, over a Unix socket the runtime
//! connects to when it starts (the socket's peer credentials tell whose it
//! is). The directory also holds the shared domain file (see the runtime's
//! `domain` module) and the profile the runtimes write, which is moved to
//! the output at the end, when the directory is removed.
//!
//! A program may start processes under another user (a server dropping
//! root, `runuser`): those must reach the directory too. So it can be
//! entered but not listed (0711), its name is random and handed only to
//! the command through its environment, and its three files are open to
//! every user (0666).

use anyhow::Context;
use holdup_bpf::records::{self, RawRecord};
use holdup_bpf::ringbuf::RingReader;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The profile's name in the directory.
const PROFILE_FILE: &str = "profile.coz";

/// Frames waiting for a slow process beyond this are dropped.
const MAX_OUTBOX: usize = 8 << 20;

struct Peer {
    fd: OwnedFd,
    outbox: Vec<u8>,
}

pub struct Forwarder {
    dir: PathBuf,
    listener: OwnedFd,
    ring: RingReader,
    ring_fd: i32,
    peers: HashMap<u32, Peer>,
    pub forwarded: u64,
    pub dropped: u64,
}

fn run_dir() -> anyhow::Result<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let template = std::env::temp_dir().join("holdup-causal-XXXXXX");
    let mut bytes = template.as_os_str().as_bytes().to_vec();
    bytes.push(0);
    // mkdtemp creates the directory with mode 0700.
    let p = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
    if p.is_null() {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("cannot create {}", template.display()));
    }
    bytes.pop();
    let dir = PathBuf::from(std::ffi::OsStr::from_bytes(&bytes));
    open_to_all(&dir, 0o711)?;
    Ok(dir)
}

/// Let processes of any user use `path` (see the module's note).
fn open_to_all(path: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot open {} to the program's users", path.display()))
}

fn listen(path: &Path) -> anyhow::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let bytes = path.as_os_str().as_bytes();
    anyhow::ensure!(
        bytes.len() < addr.sun_path.len(),
        "socket path too long: {}",
        path.display()
    );
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, &s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = s as libc::c_char;
    }
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("socket");
    }
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let ok = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &addr as *const libc::sockaddr_un as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        ) == 0
            && libc::listen(fd.as_raw_fd(), 128) == 0
    };
    if !ok {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("cannot listen on {}", path.display()));
    }
    Ok(fd)
}

impl Forwarder {
    /// The run's directory with the domain file, the samples socket and
    /// the profile.
    pub fn new(ring_fd: BorrowedFd<'_>, ring_bytes: u64) -> anyhow::Result<Forwarder> {
        let dir = run_dir()?;
        let domain = dir.join(holdup_coz::DOMAIN_FILE);
        std::fs::File::create(&domain)
            .and_then(|f| f.set_len(holdup_coz::DOMAIN_BYTES as u64))
            .with_context(|| format!("cannot create {}", domain.display()))?;
        open_to_all(&domain, 0o666)?;
        let profile = dir.join(PROFILE_FILE);
        std::fs::File::create(&profile)
            .with_context(|| format!("cannot create {}", profile.display()))?;
        open_to_all(&profile, 0o666)?;
        let socket = dir.join(holdup_coz::SAMPLES_SOCKET);
        let listener = listen(&socket)?;
        open_to_all(&socket, 0o666)?;
        let ring = RingReader::new(ring_fd, ring_bytes).context("cannot map the ring buffer")?;
        Ok(Forwarder {
            dir,
            listener,
            ring,
            ring_fd: ring_fd.as_raw_fd(),
            peers: HashMap::new(),
            forwarded: 0,
            dropped: 0,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the runtimes write the profile.
    pub fn profile(&self) -> PathBuf {
        self.dir.join(PROFILE_FILE)
    }

    /// Wait up to `timeout_ms` for records, then hand them out.
    pub fn pump(&mut self, timeout_ms: i32) {
        let mut pfd = [
            libc::pollfd {
                fd: self.ring_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        unsafe { libc::poll(pfd.as_mut_ptr(), 2, timeout_ms) };
        self.accept();
        let peers = &mut self.peers;
        let (mut sent, mut lost) = (0, 0);
        self.ring.drain(|bytes| {
            let Ok(RawRecord::Sample(s)) = records::parse(bytes) else {
                return;
            };
            match peers.get_mut(&s.rec.pid) {
                Some(p) if p.outbox.len() < MAX_OUTBOX => {
                    p.outbox
                        .extend_from_slice(&(bytes.len() as u32).to_ne_bytes());
                    p.outbox.extend_from_slice(bytes);
                    sent += 1;
                }
                _ => lost += 1,
            }
        });
        self.forwarded += sent;
        self.dropped += lost;
        self.peers.retain(|_, p| flush(p));
    }

    fn ring_fd(&self) -> i32 {
        self.ring_fd
    }

    /// New processes (or new images of one after exec) say hello.
    fn accept(&mut self) {
        loop {
            let fd = unsafe {
                libc::accept4(
                    self.listener.as_raw_fd(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                )
            };
            if fd < 0 {
                return;
            }
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
            let ok = unsafe {
                libc::getsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_PEERCRED,
                    (&mut cred as *mut libc::ucred).cast(),
                    &mut len,
                )
            } == 0;
            if ok {
                self.peers.insert(
                    cred.pid as u32,
                    Peer {
                        fd,
                        outbox: Vec::new(),
                    },
                );
            }
        }
    }
}

/// Write what the socket takes; false when the process is gone.
fn flush(p: &mut Peer) -> bool {
    while !p.outbox.is_empty() {
        let n = unsafe {
            libc::send(
                p.fd.as_raw_fd(),
                p.outbox.as_ptr().cast(),
                p.outbox.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return e.kind() == std::io::ErrorKind::WouldBlock;
        }
        p.outbox.drain(..n as usize);
    }
    true
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
