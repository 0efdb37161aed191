//! One experiment and delay domain for all the processes of a program
//! (`holdup causal run --system`).
//!
//! COZ keeps its global delay, the running experiment and the progress
//! counters in the memory of one process. Here they live in a file that
//! `holdup causal run` creates in a private directory and every process of
//! the program maps shared: a sample of a thread of one process in the
//! target line raises the global delay that the threads of every other
//! process then pay. One process at a time leads (runs the experiments and
//! writes the profile); the others follow: they process their own samples,
//! resolve the experiment's target in their own line tables, and offer
//! targets from their samples.

use crate::clock::{now_ns, retry_until};
use crate::progress::Counter;
use holdup_coz::DOMAIN_BYTES;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

const NAME_BYTES: usize = 240;
const MAX_POINTS: usize = 32;
/// The longest wait for the table of progress points.
const POINTS_LOCK_NS: u64 = 1_000_000_000;

/// A name written by one process and read by others; `state` orders them.
#[repr(C)]
pub struct Name {
    len: AtomicU32,
    bytes: UnsafeCell<[u8; NAME_BYTES]>,
}

impl Name {
    /// Store `s` (truncated to the buffer). The caller owns the slot.
    fn store(&self, s: &str) {
        let n = s.len().min(NAME_BYTES);
        // SAFETY: the owner writes while no reader looks (see callers).
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), self.bytes.get().cast::<u8>(), n) };
        self.len.store(n as u32, Ordering::Release);
    }

    fn load(&self) -> String {
        let n = (self.len.load(Ordering::Acquire) as usize).min(NAME_BYTES);
        // SAFETY: bytes below `len` were written before `len` was released.
        let b = unsafe { std::slice::from_raw_parts(self.bytes.get().cast::<u8>(), n) };
        String::from_utf8_lossy(b).into_owned()
    }
}

/// A progress point of coz.h / holdup.h shared by all processes.
#[repr(C)]
pub struct SharedPoint {
    /// 0: free; else progress::THROUGHPUT or progress::BEGIN (latency).
    pub kind: AtomicI32,
    pub name: Name,
    pub a: Counter,
    pub b: Counter,
}

#[repr(C)]
pub struct Domain {
    pub active: AtomicBool,
    pub delay: AtomicU64,
    pub global: AtomicU64,
    /// Pid of the leading process, 0 if none.
    pub leader: AtomicI32,
    /// Number of the running (or last) experiment; its target and start.
    pub experiment: AtomicU64,
    pub start_ns: AtomicU64,
    target: Name,
    /// Sample points of the target seen by all processes.
    pub selected: AtomicU64,
    /// A target offered by some process: 0 empty, 1 being written, 2 ready;
    /// the sample points of all offers since the last take (a weighted
    /// reservoir across processes, like COZ's choice of the next sample).
    pick_state: AtomicU32,
    pick_total: AtomicU64,
    pick: Name,
    points_lock: AtomicBool,
    points: [SharedPoint; MAX_POINTS],
}

const _: () = assert!(std::mem::size_of::<Domain>() <= DOMAIN_BYTES);

// SAFETY: all fields are atomics or guarded names.
unsafe impl Sync for Domain {}

impl Domain {
    /// Map the domain file that `holdup causal run --system` created.
    pub fn map(path: &std::path::Path) -> Option<&'static Domain> {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .ok()?;
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                DOMAIN_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        // SAFETY: a zero-filled file is a valid Domain (all atomics 0).
        (p != libc::MAP_FAILED).then(|| unsafe { &*(p as *const Domain) })
    }

    /// Lead if nobody does, or if the leader is gone; true if we lead.
    pub fn lead(&self, pid: i32) -> bool {
        let cur = self.leader.load(Ordering::Acquire);
        if cur == pid {
            return true;
        }
        let gone = cur != 0
            && unsafe { libc::kill(cur, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        (cur == 0 || gone)
            && self
                .leader
                .compare_exchange(cur, pid, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
    }

    pub fn resign(&self, pid: i32) {
        let _ = self
            .leader
            .compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Leader: a new experiment on `target` begins (not yet active).
    pub fn begin(&self, target: &str, start_ns: u64) {
        self.target.store(target);
        self.start_ns.store(start_ns, Ordering::Release);
        self.selected.store(0, Ordering::Release);
        self.experiment.fetch_add(1, Ordering::AcqRel);
    }

    pub fn target(&self) -> String {
        self.target.load()
    }

    /// Any process: offer a target chosen among `weight` sample points;
    /// it replaces the offer on hold with probability weight / total.
    /// `random` is a uniform random number.
    pub fn offer(&self, target: &str, weight: u64, random: u64) {
        if weight == 0 {
            return;
        }
        let total = self.pick_total.fetch_add(weight, Ordering::AcqRel) + weight;
        if random % total >= weight {
            return;
        }
        for from in [0, 2] {
            if self
                .pick_state
                .compare_exchange(from, 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                self.pick.store(target);
                self.pick_state.store(2, Ordering::Release);
                return;
            }
        }
    }

    /// Leader: take the offered target, if any.
    pub fn take_pick(&self) -> Option<String> {
        self.pick_state
            .compare_exchange(2, 1, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        let name = self.pick.load();
        self.pick_total.store(0, Ordering::Release);
        self.pick_state.store(0, Ordering::Release);
        Some(name)
    }

    /// The shared counter(s) of progress point `name`, created on first use.
    /// None if the table is full, or if its lock stays taken (a process
    /// killed while holding it must not hang the others).
    pub fn point(&self, kind: i32, name: &str) -> Option<&SharedPoint> {
        retry_until(now_ns() + POINTS_LOCK_NS, || {
            self.points_lock
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .ok()
        })?;
        let mut found = None;
        for p in &self.points {
            let k = p.kind.load(Ordering::Acquire);
            if k == 0 {
                p.name.store(name);
                p.kind.store(kind, Ordering::Release);
                found = Some(p);
                break;
            }
            if k == kind && p.name.load() == name {
                found = Some(p);
                break;
            }
        }
        self.points_lock.store(false, Ordering::Release);
        found
    }

    /// Every shared progress point so far: (kind, name, point).
    pub fn points(&self) -> impl Iterator<Item = (i32, String, &SharedPoint)> {
        self.points.iter().map_while(|p| {
            let k = p.kind.load(Ordering::Acquire);
            (k != 0).then(|| (k, p.name.load(), p))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped() -> &'static Domain {
        let path = std::env::temp_dir().join(format!("holdup-domain-test-{}", std::process::id()));
        std::fs::File::create(&path)
            .and_then(|f| f.set_len(DOMAIN_BYTES as u64))
            .unwrap();
        let d = Domain::map(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        d
    }

    #[test]
    fn a_point_is_shared_by_name_and_a_stuck_lock_does_not_hang() {
        let d = mapped();
        let a = d.point(1, "item").unwrap() as *const SharedPoint;
        assert_eq!(d.point(1, "item").unwrap() as *const SharedPoint, a);
        assert_ne!(d.point(1, "other").unwrap() as *const SharedPoint, a);
        // A process died holding the lock: the others go on without it.
        d.points_lock.store(true, Ordering::Release);
        let t0 = std::time::Instant::now();
        assert!(d.point(1, "item").is_none());
        assert!(t0.elapsed() < std::time::Duration::from_secs(5));
    }
}
