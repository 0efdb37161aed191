//! The set of recorded processes as the BPF side keeps it (`tracked.h`): a
//! bit per process id in a shared array map.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use libbpf_rs::MapCore;

use crate::ringbuf::map_shared;

/// Whether the bit of process `pid` is set in the `tracked_tgids` map `map`.
pub(crate) fn is_tracked(map: &impl MapCore, pid: u32) -> bool {
    let word = pid / 64;
    match map.lookup(&word.to_ne_bytes(), libbpf_rs::MapFlags::ANY) {
        Ok(Some(v)) if v.len() >= 8 => {
            u64::from_ne_bytes(v[..8].try_into().unwrap()) & (1 << (pid % 64)) != 0
        }
        _ => false,
    }
}

/// Set the bit of process `pid` in the `tracked_tgids` map `map`. The
/// kernel side sets and clears bits of other processes in the same word
/// at any time, hence an atomic OR through a mapping of the map.
pub(crate) fn track(map: &impl MapCore, pid: u32) -> io::Result<()> {
    // One u64 word per 64 process ids, as many as the kernel allows.
    let words = map.max_entries() as usize;
    if pid as usize >= words * 64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("process id {pid} is above the kernel's limit"),
        ));
    }
    let len = words * 8;
    let base = map_shared(map.as_fd(), 0, len, libc::PROT_READ | libc::PROT_WRITE)?;
    let words = base as *const AtomicU64;
    unsafe { (*words.add((pid / 64) as usize)).fetch_or(1 << (pid % 64), Ordering::SeqCst) };
    unsafe { libc::munmap(base.cast(), len) };
    Ok(())
}
