//! Timed retries of a contended lock: a waiter that sleeps with a timeout,
//! wakes on it, finds the lock still held and sleeps again (HotSpot's
//! monitor enter re-checks every few milliseconds, as does a
//! `pthread_mutex_timedlock` loop) waited for the holder all along. Its
//! waits ended by the timer take the waker of the wait that ended the
//! chain: the holder that released the lock.

use holdup_trace::{Class, Waker};

/// One thread's timer-ended contended waits not yet given a waker:
/// (stack, weight).
#[derive(Default)]
pub(super) struct Retries {
    pending: Vec<(u32, u64)>,
}

/// Where wakers go: (class, stack, waker) → weight.
pub(super) type Wakers = holdup_trace::fxhash::FxHashMap<(Class, u32, Waker), u64>;

impl Retries {
    /// A contended lock wait (a mutex or monitor) of `n` points with `stack`,
    /// ended by `waker`.
    pub(super) fn contended(&mut self, wakers: &mut Wakers, stack: u32, waker: Waker, n: u64) {
        match waker {
            Waker::Timer => self.pending.push((stack, n)),
            Waker::None => {}
            w => {
                for (s, m) in self.pending.drain(..) {
                    *wakers.entry((Class::Lock, s, w)).or_default() += m;
                }
                *wakers.entry((Class::Lock, stack, w)).or_default() += n;
            }
        }
    }

    /// Any other wait ends a chain: its timed waits were ended by the timer
    /// after all (the waiter gave up, or took the lock on a re-check).
    pub(super) fn end(&mut self, wakers: &mut Wakers) {
        for (s, m) in self.pending.drain(..) {
            *wakers.entry((Class::Lock, s, Waker::Timer)).or_default() += m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_retries_take_the_waker_that_ends_the_chain() {
        let mut w = Wakers::default();
        let mut r = Retries::default();
        r.contended(&mut w, 1, Waker::Timer, 1);
        r.contended(&mut w, 2, Waker::Timer, 8);
        r.contended(&mut w, 1, Waker::Thread(7), 11);
        assert_eq!(w[&(Class::Lock, 1, Waker::Thread(7))], 12);
        assert_eq!(w[&(Class::Lock, 2, Waker::Thread(7))], 8);
        assert_eq!(w.len(), 2);
        // A chain the timer ends stays the timer's.
        r.contended(&mut w, 1, Waker::Timer, 3);
        r.end(&mut w);
        r.contended(&mut w, 1, Waker::Thread(8), 5);
        assert_eq!(w[&(Class::Lock, 1, Waker::Timer)], 3);
        assert_eq!(w[&(Class::Lock, 1, Waker::Thread(8))], 5);
    }
}
