//! A file in memory for targets whose parser takes a path (the symbolizer
//! and the unwinder open ELF files by name): one memfd per process, its
//! contents replaced for each input, named through `/proc/self/fd`.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::OnceLock;

fn memfd() -> Option<&'static OwnedFd> {
    static FD: OnceLock<Option<OwnedFd>> = OnceLock::new();
    FD.get_or_init(|| {
        let fd = unsafe { libc::memfd_create(c"holdup-fuzz".as_ptr(), libc::MFD_CLOEXEC) };
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
    })
    .as_ref()
}

/// The path of a file that holds `bytes` (and nothing else) until the next
/// call; None if the memory file cannot be made.
pub fn holding(bytes: &[u8]) -> Option<PathBuf> {
    let fd = memfd()?.as_raw_fd();
    if unsafe { libc::ftruncate(fd, 0) } != 0 {
        return None;
    }
    let mut done = 0;
    while done < bytes.len() {
        let rest = &bytes[done..];
        let n = unsafe {
            libc::pwrite(
                fd,
                rest.as_ptr() as *const libc::c_void,
                rest.len(),
                done as libc::off_t,
            )
        };
        if n <= 0 {
            return None;
        }
        done += n as usize;
    }
    Some(PathBuf::from(format!("/proc/self/fd/{fd}")))
}
