//! Timed retries of a contended lock: a waiter that sleeps with a timeout,
//! wakes on it, finds the lock still held and sleeps again (HotSpot's
//! monitor enter re-checks every few milliseconds, as does a
//! `pthread_mutex_timedlock` loop) waited for the holder all along. Its
//! waits ended by the timer take the waker of the wait that ended the
//! chain: the holder that released the lock.
//!
//! One rule for every analysis that credits wakers: the profile's rows
//! and the wait-for graph's edges.

use holdup_trace::Waker;

/// One thread's timer-ended contended waits (any `T` that stands for a
/// wait) not yet given a waker. Each wait fed in is settled exactly once,
/// with the waker it is credited to.
pub(crate) struct Retries<T> {
    pending: Vec<T>,
}

impl<T> Default for Retries<T> {
    fn default() -> Self {
        Self {
            pending: Vec::new(),
        }
    }
}

impl<T> Retries<T> {
    /// A contended lock wait (a mutex or monitor) ended by `waker`: a timer
    /// wakeup waits for the end of its chain, a wakeup by anyone else ends
    /// the chain and is credited with it. A wait no wakeup ended (`None`)
    /// neither ends nor joins a chain.
    pub(crate) fn contended(&mut self, wait: T, waker: Waker, mut settle: impl FnMut(T, Waker)) {
        match waker {
            Waker::Timer => self.pending.push(wait),
            Waker::None => settle(wait, waker),
            w => {
                for p in self.pending.drain(..) {
                    settle(p, w);
                }
                settle(wait, w);
            }
        }
    }

    /// Any other wait ends a chain: its timed waits were ended by the timer
    /// after all (the waiter gave up, or took the lock on a re-check).
    pub(crate) fn end(&mut self, mut settle: impl FnMut(T, Waker)) {
        for p in self.pending.drain(..) {
            settle(p, Waker::Timer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_retries_take_the_waker_that_ends_the_chain() {
        let mut settled = Vec::new();
        let mut r = Retries::default();
        let mut feed = |wait: u32, waker| r.contended(wait, waker, |w, k| settled.push((w, k)));
        feed(1, Waker::Timer);
        feed(2, Waker::Timer);
        feed(3, Waker::None);
        feed(4, Waker::Thread(7));
        assert_eq!(
            settled,
            [
                (3, Waker::None),
                (1, Waker::Thread(7)),
                (2, Waker::Thread(7)),
                (4, Waker::Thread(7))
            ]
        );
        // A chain the timer ends stays the timer's.
        settled.clear();
        r.contended(5, Waker::Timer, |w, k| settled.push((w, k)));
        r.end(|w, k| settled.push((w, k)));
        r.contended(6, Waker::Thread(8), |w, k| settled.push((w, k)));
        assert_eq!(settled, [(5, Waker::Timer), (6, Waker::Thread(8))]);
    }
}
