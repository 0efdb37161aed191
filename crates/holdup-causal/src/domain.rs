//! One experiment and delay domain for all the processes of a program
//! (`holdup causal run --system`).
//!
//! COZ keeps its global delay, the running experiment and the progress
//! counters in the memory of one process. Here they live in a memory file
//! that `holdup causal run` hands every process of the program (see
//! `holdup_coz::handoff`) and each maps shared: a sample of a thread of one
//! process in the target line raises the global delay that the threads of
//! every other process then pay. One process at a time leads (runs the
//! experiments and writes the profile); the others follow: they process
//! their own samples, resolve the experiment's target in their own line
//! tables, and offer targets from their samples.
//!
//! Every process of the program can write here, and one may run as another
//! user: nothing read back is trusted. Flags count only as 0 or 1, names
//! are cut to their buffer, pids and kinds are checked, a delay is at most
//! a sampling period, and the global delay is checked against the clock by
//! the runtime (`Runtime::global`).

use crate::clock::{now_ns, retry_until};
use crate::counter::{Counter, BEGIN, THROUGHPUT};
use crate::late_credits::LateCredits;
use holdup_coz::DOMAIN_BYTES;
use std::cell::UnsafeCell;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

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
    /// 0: free; else counter::THROUGHPUT or counter::BEGIN (latency).
    pub kind: AtomicI32,
    pub name: Name,
    pub a: Counter,
    pub b: Counter,
}

/// The state that delays threads: in the domain with `--system`, private
/// to the process otherwise.
#[repr(C)]
#[derive(Default)]
pub struct Delays {
    /// 1 while an experiment runs (anything else is read as 0).
    active: AtomicU32,
    /// Its delay per sampling point (0 for a 0% experiment).
    delay: AtomicU64,
    /// COZ's global delay, ns.
    pub global: AtomicU64,
    /// The credits that raised it, for waiters that woke before them.
    pub late: LateCredits,
}

impl Delays {
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Acquire) == 1
    }

    pub fn set_active(&self, on: bool) {
        self.active.store(on as u32, Ordering::Release);
    }

    /// The delay per sampling point of `period_ns`: at most the period (a
    /// 100% speedup).
    pub fn delay(&self, period_ns: u64) -> u64 {
        self.delay.load(Ordering::Acquire).min(period_ns)
    }

    pub fn set_delay(&self, ns: u64) {
        self.delay.store(ns, Ordering::Release);
    }
}

#[repr(C)]
pub struct Domain {
    pub delays: Delays,
    /// Pid of the leading process, 0 if none.
    leader: AtomicI32,
    /// Number of the running (or last) experiment; its target and start.
    pub experiment: AtomicU64,
    start_ns: AtomicU64,
    target: Name,
    /// Sample points of the target seen by all processes.
    pub selected: AtomicU64,
    /// A target offered by some process: 0 empty, 1 being written, 2 ready;
    /// the sample points of all offers since the last take (a weighted
    /// reservoir across processes, like COZ's choice of the next sample).
    pick_state: AtomicU32,
    pick_total: AtomicU64,
    pick: Name,
    /// 0 free, anything else taken.
    points_lock: AtomicU32,
    points: [SharedPoint; MAX_POINTS],
}

/// Why [`Domain::point`] has no shared counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoPoint {
    Full,
    /// The table's lock stayed taken (a process died holding it).
    Stuck,
}

const _: () = assert!(std::mem::size_of::<Domain>() <= DOMAIN_BYTES);

// SAFETY: all fields are atomics or guarded names.
unsafe impl Sync for Domain {}

impl Domain {
    /// Map the domain that `holdup causal run --system` handed over as `fd`
    /// (checked to be sealed at its size: no other process can make the
    /// mapping fault).
    pub fn map(fd: BorrowedFd<'_>) -> Result<&'static Domain, String> {
        holdup_coz::handoff::check_domain(fd).map_err(|e| e.to_string())?;
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                DOMAIN_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!(
                "cannot map it: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: every bit pattern is a valid Domain (atomics and bytes).
        Ok(unsafe { &*(p as *const Domain) })
    }

    /// Lead if nobody does, or if the leader is gone; true if we lead.
    pub fn lead(&self, pid: i32) -> bool {
        let cur = self.leader.load(Ordering::Acquire);
        if cur == pid {
            return true;
        }
        // A leader that is no pid (damage) is none.
        let gone = cur <= 0
            || unsafe { libc::kill(cur, 0) } != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        gone && self
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

    /// When the running experiment began: not later than `now`.
    pub fn start_ns(&self, now: u64) -> u64 {
        self.start_ns.load(Ordering::Acquire).min(now)
    }

    /// Any process: offer a target chosen among `weight` sample points;
    /// it replaces the offer on hold with probability weight / total.
    /// `random` is a uniform random number.
    pub fn offer(&self, target: &str, weight: u64, random: u64) {
        if weight == 0 {
            return;
        }
        let total = self
            .pick_total
            .fetch_add(weight, Ordering::AcqRel)
            .wrapping_add(weight)
            .max(weight);
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
        if let Err(state) =
            self.pick_state
                .compare_exchange(2, 1, Ordering::AcqRel, Ordering::Acquire)
        {
            if state > 2 {
                // Damage: start over, or no offer could ever be made.
                self.pick_total.store(0, Ordering::Release);
                self.pick_state.store(0, Ordering::Release);
            }
            return None;
        }
        let name = self.pick.load();
        self.pick_total.store(0, Ordering::Release);
        self.pick_state.store(0, Ordering::Release);
        Some(name)
    }

    /// The shared counter(s) of progress point `name` (kind THROUGHPUT or
    /// BEGIN), created on first use. Not if the table is full, or if its
    /// lock stays taken (a process killed while holding it must not hang
    /// the others).
    pub fn point(&self, kind: i32, name: &str) -> Result<&SharedPoint, NoPoint> {
        retry_until(now_ns() + POINTS_LOCK_NS, || {
            self.points_lock
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
                .ok()
        })
        .ok_or(NoPoint::Stuck)?;
        let mut found = Err(NoPoint::Full);
        for p in &self.points {
            let k = p.kind.load(Ordering::Acquire);
            if k == 0 {
                p.name.store(name);
                p.kind.store(kind, Ordering::Release);
                found = Ok(p);
                break;
            }
            if k == kind && p.name.load() == name {
                found = Ok(p);
                break;
            }
        }
        self.points_lock.store(0, Ordering::Release);
        found
    }

    /// Every shared progress point so far: (kind, name, point); slots of
    /// an unknown kind are skipped.
    pub fn points(&self) -> impl Iterator<Item = (i32, String, &SharedPoint)> {
        self.points
            .iter()
            .map(|p| (p.kind.load(Ordering::Acquire), p))
            .take_while(|&(k, _)| k != 0)
            .filter(|&(k, _)| k == THROUGHPUT || k == BEGIN)
            .map(|(k, p)| (k, p.name.load(), p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn mapped() -> &'static Domain {
        let fd = holdup_coz::handoff::create_domain().unwrap();
        // The mapping outlives the fd.
        Domain::map(fd.as_fd()).unwrap()
    }

    #[test]
    fn a_point_is_shared_by_name_and_a_stuck_lock_does_not_hang() {
        let d = mapped();
        let a = d.point(THROUGHPUT, "item").unwrap() as *const SharedPoint;
        assert_eq!(
            d.point(THROUGHPUT, "item").unwrap() as *const SharedPoint,
            a
        );
        assert_ne!(
            d.point(THROUGHPUT, "other").unwrap() as *const SharedPoint,
            a
        );
        // A process died holding the lock: the others go on without it.
        d.points_lock.store(1, Ordering::Release);
        let t0 = std::time::Instant::now();
        assert_eq!(d.point(THROUGHPUT, "item").err(), Some(NoPoint::Stuck));
        assert!(t0.elapsed() < std::time::Duration::from_secs(5));
    }

    /// A process of the program wrote garbage over the whole domain: every
    /// value read back is one the runtime can live with.
    #[test]
    fn a_domain_full_of_garbage_reads_as_harmless_values() {
        let d = mapped();
        let period = 1_000_000;
        d.delays.set_active(true);
        d.delays.set_delay(period / 2);
        assert!(d.delays.active());
        assert_eq!(d.delays.delay(period), period / 2);
        let bytes = d as *const Domain as *mut u8;
        unsafe { std::ptr::write_bytes(bytes, 0xff, DOMAIN_BYTES) };
        // A flag that is neither 0 nor 1 is off; a delay is at most a period.
        assert!(!d.delays.active());
        assert_eq!(d.delays.delay(period), period);
        // A leader that is no pid is none: this process leads.
        let me = std::process::id() as i32;
        assert!(d.lead(me));
        assert_eq!(d.leader.load(Ordering::Acquire), me);
        // Names are cut to their buffer.
        assert_eq!(d.target().chars().count(), NAME_BYTES);
        // An experiment cannot have begun in the future.
        assert_eq!(d.start_ns(12345), 12345);
        // No point of an unknown kind is seen.
        assert_eq!(d.points().count(), 0);
        // The state of the offers is set right, and offers work again.
        assert_eq!(d.take_pick(), None);
        d.offer("work.c:3", 5, 0);
        assert_eq!(d.take_pick().as_deref(), Some("work.c:3"));
    }
}
