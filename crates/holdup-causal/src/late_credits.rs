//! Credits that reach a thread's waker too late for COZ's skip.
//!
//! A thread woken by another skips the delays added while it waited
//! (`State::post_block`): its waker was in the target meanwhile, and that
//! time is what the virtual speedup removes. But a sample is credited when
//! it is processed, a millisecond or more after it was taken (the ring, and
//! with `--system` the recorder and a socket between), so the credit of a
//! holder's last samples before it let go of a lock often raises the global
//! delay after the waiter woke. The waiter then pays it with a sleep, often
//! inside its own critical section: the lock's real time grows by what the
//! experiment counts as delay, and the line looks less worth speeding up
//! than it is (a lock line predicted 30% for a measured 48%).
//!
//! So every credit that raised the global delay is logged with the time of
//! its sample, and a thread that runs again after a wait takes the ones
//! logged after its wakeup whose sample fell inside that wait, as if they
//! had been there when it woke; and those whose sample came before the
//! wait, as part of what it owed when it blocked (see
//! `ThreadState::settle_wait`). The log is a small ring in the `Delays`
//! (shared by all processes with `--system`, so a waiter in one process
//! skips a holder's credit in another): an entry overwritten before a
//! thread read it is a skip missed, never a wrong one.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

const SLOTS: usize = 32;
/// At most this much is skipped for one entry: anything larger is damage
/// (with `--system` other processes write here).
const MAX_RISE_NS: u64 = 100_000_000;

#[repr(C)]
#[derive(Default)]
struct Entry {
    /// Its number + 1 once written (0: empty or being rewritten).
    seq: AtomicU64,
    tid: AtomicI32,
    time_ns: AtomicU64,
    rise_ns: AtomicU64,
}

#[repr(C)]
#[derive(Default)]
pub struct LateCredits {
    next: AtomicU64,
    slots: [Entry; SLOTS],
}

impl LateCredits {
    /// Number of the next entry: a thread that woke now has seen all below.
    pub fn head(&self) -> u64 {
        self.next.load(Ordering::Acquire)
    }

    /// Thread `tid`'s sample at `time_ns` raised the global delay by `rise_ns`.
    pub fn log(&self, tid: i32, time_ns: u64, rise_ns: u64) {
        let n = self.next.fetch_add(1, Ordering::AcqRel);
        let e = &self.slots[n as usize % SLOTS];
        e.seq.store(0, Ordering::Release);
        e.tid.store(tid, Ordering::Relaxed);
        e.time_ns.store(time_ns, Ordering::Relaxed);
        e.rise_ns.store(rise_ns, Ordering::Relaxed);
        e.seq.store(n + 1, Ordering::Release);
    }

    /// The others' entries from number `from` on whose sample came before
    /// the end of thread `tid`'s wait `[wait_from, wait_to)`, in it or
    /// before it, and the number from which to read next time.
    pub fn skipped(&self, tid: i32, from: u64, wait_from: u64, wait_to: u64) -> Skipped {
        let head = self.head();
        let mut skip = Skipped {
            next: head,
            ..Skipped::default()
        };
        for n in from.max(head.saturating_sub(SLOTS as u64))..head {
            let e = &self.slots[n as usize % SLOTS];
            if e.seq.load(Ordering::Acquire) != n + 1 {
                continue;
            }
            let (who, time, rise) = (
                e.tid.load(Ordering::Relaxed),
                e.time_ns.load(Ordering::Relaxed),
                e.rise_ns.load(Ordering::Relaxed),
            );
            // Rewritten while read: its fields may mix two entries.
            if e.seq.load(Ordering::Acquire) != n + 1 {
                continue;
            }
            let rise = rise.min(MAX_RISE_NS);
            if who == tid || time >= wait_to {
                continue;
            }
            if time >= wait_from {
                skip.during = skip.during.saturating_add(rise);
            } else {
                skip.before = skip.before.saturating_add(rise);
            }
        }
        skip
    }
}

/// Late credits of the others, read after a wait (`LateCredits::skipped`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Of samples taken during the wait.
    pub during: u64,
    /// Of samples taken before it.
    pub before: u64,
    /// The number of the next entry to read.
    pub next: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_skips_the_others_credits_from_inside_its_wait_only() {
        let log = LateCredits::default();
        let from = log.head();
        log.log(7, 150, 1_000); // the holder, inside the wait
        log.log(7, 50, 2_000); // the holder, before the wait
        log.log(8, 160, 4_000); // the waiter's own
        log.log(9, 199, 8_000); // another, inside
        log.log(9, 200, 16_000); // at its wakeup: after the wait
        let skip = |from| log.skipped(8, from, 100, 200);
        let want = |during, before, next| Skipped {
            during,
            before,
            next,
        };
        assert_eq!(skip(from), want(9_000, 2_000, from + 5));
        // Read once: the next look starts after them.
        assert_eq!(skip(from + 5), want(0, 0, from + 5));
    }

    #[test]
    fn entries_overwritten_before_they_were_read_are_missed_not_misread() {
        let log = LateCredits::default();
        for i in 0..(SLOTS as u64 + 3) {
            log.log(1, 100 + i, 1);
        }
        // The first three are gone; the rest count once each.
        let skip = log.skipped(2, 0, 0, u64::MAX);
        assert_eq!((skip.during, skip.next), (SLOTS as u64, SLOTS as u64 + 3));
    }

    #[test]
    fn a_damaged_entry_is_bounded() {
        let log = LateCredits::default();
        log.log(1, 10, u64::MAX);
        log.log(1, 10, u64::MAX);
        assert_eq!(log.skipped(2, 0, 0, 20).during, 2 * MAX_RISE_NS);
    }
}
