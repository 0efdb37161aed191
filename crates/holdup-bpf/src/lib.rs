//! holdup's recorder: the eBPF programs, their loader and the ring-buffer drainer.
//!
//! Without the default `loader` feature only [`records`], [`ringbuf`] and the
//! reading half of [`progress`] are built: the record layouts, a libc-only
//! ring consumer and the mapped visit counts of progress points.

mod bindings;
pub mod progress;
pub mod records;
pub mod ringbuf;

#[cfg(feature = "loader")]
pub mod cores;
#[cfg(feature = "loader")]
pub mod latency;
#[cfg(feature = "loader")]
mod load_cost;
#[cfg(feature = "loader")]
pub mod perf;
#[cfg(feature = "loader")]
mod recorder;
#[cfg(feature = "loader")]
mod skel;
#[cfg(feature = "loader")]
mod tracked;

/// CLOCK_MONOTONIC in ns: the clock of `bpf_ktime_get_ns`, so record
/// times and times taken in user space compare directly.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The total of counting perf events (one per CPU, as uprobe counters
/// are opened); an unreadable one counts 0.
pub fn counter_total(fds: impl IntoIterator<Item = std::os::fd::RawFd>) -> usize {
    fds.into_iter()
        .map(|fd| {
            let mut v = 0u64;
            let n = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
            if n == 8 {
                v as usize
            } else {
                0
            }
        })
        .sum()
}

#[cfg(feature = "loader")]
pub use load_cost::LoadCost;
#[cfg(feature = "loader")]
pub use recorder::{
    CgroupFilter, DrainStats, Error, GoProbes, KstackCounts, Lost, Recorder, RecorderOptions,
    Result, StackBudgetCounts, SyscallOptions, Target, WakerStacks,
};
