//! Every thread's time line, indexed by time: its off-CPU intervals (wait
//! segments, each with the stack of its blocked sample if it had one) and
//! its on-CPU samples, in sorted vectors searched by bisection.

use crate::fxhash::FxHashMap;
use holdup_trace::{Class, StackId, Trace, Waker};
use std::cell::Cell;

/// One off-CPU interval: waiting over `[start, wake)`, runnable over
/// `[wake, end)`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Off {
    pub start: u64,
    /// Where waiting ends: the wakeup; the start for a preemption (runnable
    /// throughout); the end for a wait nobody ended.
    pub wake: u64,
    pub end: u64,
    pub class: Class,
    /// `Waker::None` when no wakeup was seen.
    pub waker: Waker,
    /// The stack of the interval's blocked sample, if it covered a
    /// sampling point.
    pub stack: Option<StackId>,
}

/// An on-CPU sample: the thread ran the `weight` periods before `time`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OnCpu {
    pub time: u64,
    pub weight: u32,
    pub stack: StackId,
}

#[derive(Debug, Default)]
pub(crate) struct Timeline {
    /// Sorted by start; a thread's intervals do not overlap.
    pub off: Vec<Off>,
    /// Sorted by time.
    pub cpu: Vec<OnCpu>,
    /// From its creation (or the recording's start) to its exit (or the
    /// recording's end).
    pub alive: (u64, u64),
    /// Where the last search ended: the waits are split in about the order
    /// of time, so the next one usually starts close by.
    last: Cell<usize>,
}

impl Timeline {
    /// Index of the first interval that may overlap `[t, …)`.
    pub fn first_off(&self, t: u64) -> usize {
        let i = self.intervals_before(t);
        self.last.set(i);
        if i > 0 && self.off[i - 1].end > t {
            i - 1
        } else {
            i
        }
    }

    /// How many intervals start before `t`: searched outwards from the
    /// last answer, in steps that double, then by bisection.
    fn intervals_before(&self, t: u64) -> usize {
        let off = &self.off;
        let before = |o: &Off| o.start < t;
        let last = self.last.get().min(off.len());
        if last < off.len() && before(&off[last]) {
            // Everything below `lo` starts before `t`.
            let (mut lo, mut step) = (last + 1, 1);
            loop {
                let hi = (lo + step).min(off.len());
                if hi == off.len() || !before(&off[hi]) {
                    return lo + off[lo..hi].partition_point(before);
                }
                (lo, step) = (hi + 1, step * 2);
            }
        }
        // Nothing from `hi` on starts before `t`.
        let (mut hi, mut step) = (last, 1);
        loop {
            let lo = hi.saturating_sub(step);
            if lo == 0 || before(&off[lo]) {
                return lo + off[lo..hi].partition_point(before);
            }
            (hi, step) = (lo, step * 2);
        }
    }

    /// The on-CPU samples taken in `(a, b]`: a sample stands for the
    /// period that ends at its time.
    pub fn cpu_in(&self, a: u64, b: u64) -> &[OnCpu] {
        let lo = self.cpu.partition_point(|s| s.time <= a);
        let hi = self.cpu.partition_point(|s| s.time <= b);
        &self.cpu[lo..hi.max(lo)]
    }
}

/// The time lines of the recorded threads: those with a wait segment or a
/// sample. A thread seen only as a waker is not recorded.
#[derive(Debug, Default)]
pub(crate) struct Index {
    pub threads: FxHashMap<u32, Timeline>,
}

impl Index {
    pub fn new(trace: &Trace) -> Index {
        let mut threads: FxHashMap<u32, Timeline> = FxHashMap::default();
        for s in &trace.segments {
            let wake = match (s.wake, s.class) {
                (0, Class::Sched) => s.start,
                (0, _) => s.end,
                (w, _) => w.clamp(s.start, s.end),
            };
            threads.entry(s.tid).or_default().off.push(Off {
                start: s.start,
                wake,
                end: s.end.max(s.start),
                class: s.class,
                waker: if s.wake == 0 { Waker::None } else { s.waker },
                stack: None,
            });
        }
        // Blocked samples by (tid, start), to name the intervals they stand for.
        let mut blocked: Vec<(u32, u64, StackId)> = Vec::new();
        for s in &trace.samples {
            let t = threads.entry(s.tid).or_default();
            if s.class == Class::Cpu {
                t.cpu.push(OnCpu {
                    time: s.time,
                    weight: s.weight,
                    stack: s.stack,
                });
            } else {
                blocked.push((s.tid, s.time, s.stack));
            }
        }
        blocked.sort_unstable();
        for (&tid, t) in threads.iter_mut() {
            t.off.sort_unstable_by_key(|o| o.start);
            t.cpu.sort_unstable_by_key(|s| s.time);
            let lo = blocked.partition_point(|b| b.0 < tid);
            let hi = blocked.partition_point(|b| b.0 <= tid);
            let mine = &blocked[lo..hi];
            let mut j = 0;
            for o in t.off.iter_mut() {
                while j < mine.len() && mine[j].1 < o.start {
                    j += 1;
                }
                if j < mine.len() && mine[j].1 == o.start {
                    o.stack = Some(mine[j].2);
                }
            }
            t.alive = match trace.threads.get(&tid) {
                Some(th) => (th.start, th.end.max(th.start)),
                None => (trace.header.start_ns, trace.end_ns),
            };
        }
        Index { threads }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The search from the last answer finds what a bisection finds, for
    /// times in any order: before, between, on and after the intervals.
    #[test]
    fn the_search_from_the_last_answer_agrees_with_bisection() {
        let off = |start| Off {
            start,
            wake: start + 5,
            end: start + 10,
            class: Class::Other,
            waker: Waker::None,
            stack: None,
        };
        let tl = Timeline {
            off: (0..50).map(|i| off(100 + 20 * i)).collect(),
            ..Timeline::default()
        };
        let times = (0..1200u64).map(|i| (i * 7919) % 1200);
        for t in times.chain([0, 1199, 100, 1080, 0]) {
            let want = tl.off.partition_point(|o| o.start < t);
            assert_eq!(tl.intervals_before(t), want, "t = {t}");
            tl.first_off(t);
        }
        assert_eq!(Timeline::default().intervals_before(5), 0);
    }
}
