//! The set of recorded processes as the BPF side keeps it (`tracked.h`): a
//! bit per process id in a shared array map.

use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ringbuf::map_shared;

/// PID_MAX_LIMIT: the bits the map has.
const PID_LIMIT: u32 = 4 * 1024 * 1024;

/// Set the bit of process `pid` in the `tracked_tgids` map `map`. The
/// kernel side sets and clears bits of other processes in the same word
/// at any time, hence an atomic OR through a mapping of the map.
pub(crate) fn track(map: &impl AsFd, pid: u32) -> io::Result<()> {
    if pid >= PID_LIMIT {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("process id {pid} is above the kernel's limit"),
        ));
    }
    let len = (PID_LIMIT / 8) as usize;
    let base = map_shared(map.as_fd(), 0, len, libc::PROT_READ | libc::PROT_WRITE)?;
    let words = base as *const AtomicU64;
    unsafe { (*words.add((pid / 64) as usize)).fetch_or(1 << (pid % 64), Ordering::SeqCst) };
    unsafe { libc::munmap(base.cast(), len) };
    Ok(())
}
