//! Starting the command to record: it is forked first and held before
//! `exec` until the recorder tracks its pid, so nothing it does is missed.

use anyhow::{bail, Context};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

pub struct Launched {
    pub pid: i32,
    /// A descriptor that becomes readable when the child exits (pidfd), so
    /// that waiting for it needs no polling; None on kernels without pidfds.
    pidfd: Option<OwnedFd>,
    go: Option<OwnedFd>,
    exec_err: OwnedFd,
    program: String,
}

fn pipe() -> anyhow::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("pipe");
    }
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Fork a child that will exec `argv` once [`Launched::release`] is called.
pub fn spawn_held(argv: &[String]) -> anyhow::Result<Launched> {
    let program = argv.first().context("no command given")?.clone();
    // Everything the child needs is allocated before fork.
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .context("command contains a NUL byte")?;
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let (go_r, go_w) = pipe()?;
    let (err_r, err_w) = pipe()?;

    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("fork");
    }
    if pid == 0 {
        // Child: only async-signal-safe calls from here on.
        unsafe {
            libc::close(go_w.as_raw_fd());
            libc::close(err_r.as_raw_fd());
            let mut b = 0u8;
            if libc::read(go_r.as_raw_fd(), &mut b as *mut u8 as *mut libc::c_void, 1) != 1 {
                libc::_exit(127); // the recorder went away
            }
            // Rust ignores SIGPIPE in this process; the command gets the
            // default, as std::process::Command gives it (a writer to a
            // closed pipe dies of it rather than seeing EPIPE).
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::execvp(ptrs[0], ptrs.as_ptr());
            let errno = *libc::__errno_location();
            libc::write(
                err_w.as_raw_fd(),
                &errno as *const i32 as *const libc::c_void,
                4,
            );
            libc::_exit(127);
        }
    }
    drop(go_r);
    drop(err_w);
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    Ok(Launched {
        pid,
        pidfd: (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd as i32) }),
        go: Some(go_w),
        exec_err: err_r,
        program,
    })
}

impl Launched {
    /// Let the child exec; fails with the reason if exec fails.
    pub fn release(&mut self) -> anyhow::Result<()> {
        if let Some(go) = self.go.take() {
            unsafe { libc::write(go.as_raw_fd(), b"g".as_ptr() as *const libc::c_void, 1) };
        }
        let mut errno = 0i32;
        // EOF (close-on-exec) means exec succeeded.
        let n = unsafe {
            libc::read(
                self.exec_err.as_raw_fd(),
                &mut errno as *mut i32 as *mut libc::c_void,
                4,
            )
        };
        if n == 4 {
            let _ = self.wait(true);
            bail!(
                "cannot run '{}': {}",
                self.program,
                std::io::Error::from_raw_os_error(errno)
            );
        }
        Ok(())
    }

    /// Wait up to `timeout` for the child to exit; a signal cuts the wait
    /// short. Its exit status if it has exited.
    pub fn wait_for(&self, timeout: std::time::Duration) -> Option<ExitStatus> {
        sleep_until_readable(self.pidfd().as_slice(), timeout);
        self.wait(false)
    }

    /// The descriptor that becomes readable when the child exits.
    pub fn pidfd(&self) -> Option<BorrowedFd<'_>> {
        self.pidfd.as_ref().map(|f| f.as_fd())
    }

    /// The child's exit status if it has exited (`block`: wait for it).
    pub fn wait(&self, block: bool) -> Option<ExitStatus> {
        let mut status = 0;
        let flags = if block { 0 } else { libc::WNOHANG };
        let r = unsafe { libc::waitpid(self.pid, &mut status, flags) };
        if r != self.pid {
            return None;
        }
        if libc::WIFEXITED(status) {
            Some(ExitStatus::Code(libc::WEXITSTATUS(status)))
        } else if libc::WIFSIGNALED(status) {
            Some(ExitStatus::Signal(libc::WTERMSIG(status)))
        } else {
            None
        }
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        // Never leave a held child behind: closing `go` makes it exit.
        self.go.take();
    }
}

/// Sleep up to `timeout`, until one of `fds` is readable or a signal
/// arrives (poll is not restarted after a signal handler, unlike
/// `std::thread::sleep`).
pub fn sleep_until_readable(fds: &[BorrowedFd<'_>], timeout: std::time::Duration) {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|f| libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
}

impl ExitStatus {
    /// The shell convention: the code, or 128 + signal.
    pub fn as_shell_code(self) -> i32 {
        match self {
            ExitStatus::Code(c) => c,
            ExitStatus::Signal(s) => 128 + s,
        }
    }
}

pub fn signal_name(sig: i32) -> String {
    let p = unsafe { libc::strsignal(sig) };
    if p.is_null() {
        return format!("signal {sig}");
    }
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

/// The executable `argv0` runs (PATH searched as execvp does).
pub fn resolve_program(argv0: &str) -> Option<PathBuf> {
    if argv0.contains('/') {
        return Some(PathBuf::from(argv0));
    }
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(argv0))
        .find(|p| p.is_file())
}
