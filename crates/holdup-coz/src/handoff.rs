//! The `--system` hand-off: how `holdup causal run` reaches every process of
//! the program, and how they share one domain, through inherited file
//! descriptors only: nothing has a name that another user could find, open
//! or connect to.
//!
//! - The domain (the runtime's `domain` module) is a memfd of
//!   [`DOMAIN_BYTES`] whose size is sealed: a process that truncated it under
//!   the others' mappings would kill them with SIGBUS.
//! - The channel is one end of a datagram socket pair that every process of
//!   the program inherits. Each runtime makes a stream socket pair of its
//!   own and sends one end over the channel; the kernel stamps the message
//!   with the sender's pid. `holdup causal run` forwards that process its
//!   samples on the socket and reads its profile records from it, both as
//!   frames ([`frames`](crate::frames)).
//!
//! The fd numbers travel in the environment, so a program that execs keeps
//! them (they are not close-on-exec in the program).

use crate::{env, DOMAIN_BYTES};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// What every process of a `--system` program inherits, named by the
/// environment (the `env` module's `DOMAIN_FD`, `CHANNEL_FD`, `EPOCH_NS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inherited {
    /// The shared domain's memfd.
    pub domain_fd: RawFd,
    /// The channel on which each process announces itself.
    pub channel_fd: RawFd,
    /// When the domain was made (CLOCK_MONOTONIC ns). The global delay
    /// grows no faster than time passes, so a larger one is damage.
    pub epoch_ns: u64,
}

impl Inherited {
    /// `holdup causal run`: the variables that name them.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            (env::DOMAIN_FD, self.domain_fd.to_string()),
            (env::CHANNEL_FD, self.channel_fd.to_string()),
            (env::EPOCH_NS, self.epoch_ns.to_string()),
        ]
    }

    /// The runtime: from the variables `var` reads; None unless all are
    /// numbers.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Option<Inherited> {
        let number = |name: &str| var(name)?.parse().ok();
        Some(Inherited {
            domain_fd: number(env::DOMAIN_FD)?,
            channel_fd: number(env::CHANNEL_FD)?,
            epoch_ns: var(env::EPOCH_NS)?.parse().ok()?,
        })
    }
}

/// The domain's size can neither shrink nor grow, and no seal can be added
/// (one forbidding writes would lock the others out).
const DOMAIN_SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refused {
    #[error("fd {0} is not a sealed memory file of {DOMAIN_BYTES} bytes")]
    Domain(RawFd),
    #[error("fd {0} is not a datagram socket pair")]
    Channel(RawFd),
}

/// A message received on the channel that is not a registration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum BadRegistration {
    #[error("no sender credentials")]
    NoCredentials,
    #[error("not exactly one socket attached")]
    Sockets,
    #[error("the socket attached is not a stream socket made by its sender")]
    NotTheSenders,
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `holdup causal run`: the domain, zero-filled (a valid empty domain).
pub fn create_domain() -> io::Result<OwnedFd> {
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    let fd = check(unsafe { libc::memfd_create(c"holdup-causal-domain".as_ptr(), flags) })?;
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    check(unsafe { libc::ftruncate(fd.as_raw_fd(), DOMAIN_BYTES as libc::off_t) })?;
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, DOMAIN_SEALS) })?;
    Ok(fd)
}

/// The runtime, before it maps `fd`: a memfd that cannot shrink, at least
/// [`DOMAIN_BYTES`] long (so no access to the mapping can fault).
pub fn check_domain(fd: BorrowedFd<'_>) -> Result<(), Refused> {
    let refused = Refused::Domain(fd.as_raw_fd());
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    if seals < 0 || seals & libc::F_SEAL_SHRINK == 0 {
        return Err(refused);
    }
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0
        || (st.st_size as u64) < DOMAIN_BYTES as u64
    {
        return Err(refused);
    }
    Ok(())
}

/// A socket-level option of `fd` whose value is a `T` (an int, a ucred).
pub fn socket_option<T: Copy>(fd: RawFd, option: libc::c_int) -> Option<T> {
    let mut v = std::mem::MaybeUninit::<T>::zeroed();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            v.as_mut_ptr().cast(),
            &mut len,
        )
    };
    // SAFETY: zeroed, then filled by the kernel; the callers' T are plain data.
    (rc == 0 && len as usize == std::mem::size_of::<T>()).then(|| unsafe { v.assume_init() })
}

fn is_unix_socket(fd: RawFd, kind: libc::c_int) -> bool {
    socket_option::<libc::c_int>(fd, libc::SO_DOMAIN) == Some(libc::AF_UNIX)
        && socket_option::<libc::c_int>(fd, libc::SO_TYPE) == Some(kind)
}

fn socket_pair(kind: libc::c_int) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            kind | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `holdup causal run`: the channel, as (its own end, which receives every
/// sender's credentials; the end the program inherits).
pub fn channel() -> io::Result<(OwnedFd, OwnedFd)> {
    let (ours, theirs) = socket_pair(libc::SOCK_DGRAM)?;
    let on: libc::c_int = 1;
    check(unsafe {
        libc::setsockopt(
            ours.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok((ours, theirs))
}

/// The runtime: `fd` is (still) a channel, not whatever the program put
/// at that number.
pub fn check_channel(fd: BorrowedFd<'_>) -> Result<(), Refused> {
    if is_unix_socket(fd.as_raw_fd(), libc::SOCK_DGRAM) {
        Ok(())
    } else {
        Err(Refused::Channel(fd.as_raw_fd()))
    }
}

/// Room for one fd and the sender's credentials.
const CONTROL_BYTES: usize = 128;

/// A one-byte message with room for control data (`control_bytes` of it
/// in use), handed to `f`.
fn with_message<T>(control_bytes: usize, f: impl FnOnce(&mut libc::msghdr) -> T) -> T {
    let mut byte = [b'R'];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u64; CONTROL_BYTES / 8];
    // SAFETY: a msghdr of zeros is empty; the pointers set below live
    // through `f`.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control_bytes.min(CONTROL_BYTES);
    f(&mut msg)
}

/// Call `f` again while a signal interrupts it; its result otherwise.
fn retry(mut f: impl FnMut() -> isize) -> io::Result<isize> {
    loop {
        let n = f();
        if n >= 0 {
            return Ok(n);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The runtime: a socket of this process's own to `holdup causal run`,
/// announced on the channel (the kernel adds who sends it).
pub fn register(channel: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let (mine, theirs) = socket_pair(libc::SOCK_STREAM)?;
    let fd_bytes = std::mem::size_of::<libc::c_int>() as u32;
    let space = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
    with_message(space, |msg| {
        // SAFETY: the control buffer has room for one fd.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(fd_bytes) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), theirs.as_raw_fd());
        }
        retry(|| unsafe { libc::sendmsg(channel.as_raw_fd(), msg, libc::MSG_NOSIGNAL) })
    })?;
    Ok(mine)
}

/// A process that announced itself.
#[derive(Debug)]
pub struct Registration {
    /// Its pid, as the kernel saw it send.
    pub pid: i32,
    pub uid: u32,
    /// The stream socket it made, our end.
    pub socket: OwnedFd,
}

/// `holdup causal run`: the next message waiting on its end of the channel,
/// None when there is none.
pub fn receive(channel: BorrowedFd<'_>) -> Option<Result<Registration, BadRegistration>> {
    with_message(CONTROL_BYTES, |msg| {
        let flags = libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC;
        retry(|| unsafe { libc::recvmsg(channel.as_raw_fd(), msg, flags) }).ok()?;
        // Every fd that came is owned here, so that extra ones are closed.
        let mut fds: Vec<OwnedFd> = Vec::new();
        let mut cred: Option<libc::ucred> = None;
        // SAFETY: the kernel wrote the control messages within the buffer.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(msg);
            while !c.is_null() {
                let data = libc::CMSG_DATA(c);
                let len = (*c).cmsg_len - (data as usize - c as usize);
                match ((*c).cmsg_level, (*c).cmsg_type) {
                    (libc::SOL_SOCKET, libc::SCM_RIGHTS) => {
                        for i in 0..len / std::mem::size_of::<libc::c_int>() {
                            let fd = std::ptr::read_unaligned(data.cast::<libc::c_int>().add(i));
                            fds.push(OwnedFd::from_raw_fd(fd));
                        }
                    }
                    (libc::SOL_SOCKET, libc::SCM_CREDENTIALS)
                        if len >= std::mem::size_of::<libc::ucred>() =>
                    {
                        cred = Some(std::ptr::read_unaligned(data.cast::<libc::ucred>()));
                    }
                    _ => {}
                }
                c = libc::CMSG_NXTHDR(msg, c);
            }
        }
        Some(check_registration(cred, fds))
    })
}

fn check_registration(
    cred: Option<libc::ucred>,
    mut fds: Vec<OwnedFd>,
) -> Result<Registration, BadRegistration> {
    let cred = cred.ok_or(BadRegistration::NoCredentials)?;
    if fds.len() != 1 {
        return Err(BadRegistration::Sockets);
    }
    let socket = fds.remove(0);
    // The pair's creator is its peer: a process hands over only a socket
    // it made itself, not one it got from another.
    if !is_unix_socket(socket.as_raw_fd(), libc::SOCK_STREAM)
        || peer_pid(socket.as_fd()) != Some(cred.pid)
    {
        return Err(BadRegistration::NotTheSenders);
    }
    Ok(Registration {
        pid: cred.pid,
        uid: cred.uid,
        socket,
    })
}

/// The pid of the process at the other end of a Unix socket (of the one
/// that made a socket pair).
pub fn peer_pid(socket: BorrowedFd<'_>) -> Option<i32> {
    socket_option::<libc::ucred>(socket.as_raw_fd(), libc::SO_PEERCRED).map(|c| c.pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inherited_fds_read_back_from_the_environment() {
        let handed = Inherited {
            domain_fd: 10,
            channel_fd: 11,
            epoch_ns: 123_456_789,
        };
        let vars: std::collections::HashMap<&str, String> = handed.env().into_iter().collect();
        let get = |name: &str| vars.get(name).cloned();
        assert_eq!(Inherited::from_env(get), Some(handed));
        // One missing, or not a number: not a --system process.
        let partial = |name: &str| (name != env::EPOCH_NS).then(|| "3".to_string());
        assert_eq!(Inherited::from_env(partial), None);
        assert_eq!(Inherited::from_env(|_| Some("x".into())), None);
    }

    #[test]
    fn the_domain_cannot_be_resized_and_is_checked_before_use() {
        let fd = create_domain().unwrap();
        assert_eq!(check_domain(fd.as_fd()), Ok(()));
        // Truncating it would fault the other processes' mappings: sealed.
        for size in [0, 4096, 1 << 30] {
            let rc = unsafe { libc::ftruncate(fd.as_raw_fd(), size) };
            assert_eq!(rc, -1, "resizing to {size} was allowed");
            assert_eq!(io::Error::last_os_error().raw_os_error(), Some(libc::EPERM));
        }
        // No seal can be added (one forbidding writes would lock others out).
        let rc = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_WRITE) };
        assert_eq!(rc, -1);
        // A memory file that may shrink, or is short, is refused.
        let plain = unsafe { libc::memfd_create(c"plain".as_ptr(), libc::MFD_CLOEXEC) };
        let plain = unsafe { OwnedFd::from_raw_fd(plain) };
        unsafe { libc::ftruncate(plain.as_raw_fd(), DOMAIN_BYTES as libc::off_t) };
        assert!(check_domain(plain.as_fd()).is_err());
        let short = unsafe {
            libc::memfd_create(
                c"short".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        let short = unsafe { OwnedFd::from_raw_fd(short) };
        unsafe {
            libc::ftruncate(short.as_raw_fd(), 4096);
            libc::fcntl(short.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK);
        }
        assert!(check_domain(short.as_fd()).is_err());
        // Nor is the channel taken for a domain, or the domain for a channel.
        let (ours, theirs) = channel().unwrap();
        assert!(check_domain(theirs.as_fd()).is_err());
        assert_eq!(check_channel(theirs.as_fd()), Ok(()));
        assert!(check_channel(fd.as_fd()).is_err());
        drop(ours);
    }

    #[test]
    fn a_registration_carries_the_senders_pid_and_a_working_socket() {
        let (ours, theirs) = channel().unwrap();
        assert!(receive(ours.as_fd()).is_none(), "nothing sent yet");
        let mine = register(theirs.as_fd()).unwrap();
        let reg = receive(ours.as_fd()).unwrap().unwrap();
        assert_eq!(reg.pid, std::process::id() as i32);
        assert_eq!(reg.uid, unsafe { libc::getuid() });
        let sent = unsafe { libc::send(reg.socket.as_raw_fd(), b"hi".as_ptr().cast(), 2, 0) };
        assert_eq!(sent, 2);
        let mut got = [0u8; 2];
        let n = unsafe { libc::recv(mine.as_raw_fd(), got.as_mut_ptr().cast(), 2, 0) };
        assert_eq!((n, &got), (2, b"hi"));
    }

    #[test]
    fn a_message_without_a_socket_of_the_sender_is_no_registration() {
        let (ours, theirs) = channel().unwrap();
        // A bare datagram.
        let n = unsafe { libc::send(theirs.as_raw_fd(), b"x".as_ptr().cast(), 1, 0) };
        assert_eq!(n, 1);
        assert_eq!(
            receive(ours.as_fd()).unwrap().unwrap_err(),
            BadRegistration::Sockets
        );
        // A socket that is not a stream socket pair end.
        let (a, _b) = socket_pair(libc::SOCK_DGRAM).unwrap();
        assert_eq!(
            check_registration(
                Some(libc::ucred {
                    pid: std::process::id() as i32,
                    uid: 0,
                    gid: 0
                }),
                vec![a]
            )
            .unwrap_err(),
            BadRegistration::NotTheSenders
        );
        // A stream socket made by another process than the sender's pid says.
        let (c, _d) = socket_pair(libc::SOCK_STREAM).unwrap();
        assert_eq!(
            check_registration(
                Some(libc::ucred {
                    pid: 1,
                    uid: 0,
                    gid: 0
                }),
                vec![c]
            )
            .unwrap_err(),
            BadRegistration::NotTheSenders
        );
    }
}
