//! Every thread's time line, indexed by time: its off-CPU intervals (wait
//! segments, each with the stack of its blocked sample if it had one) and
//! its on-CPU samples, in sorted vectors searched from where the last
//! search ended.
//!
//! The time lines sit in one vector, numbered densely; an interval a
//! recorded thread ended holds that thread's number, found once here, so
//! following a chain hashes no thread id.

use crate::fxhash::FxHashMap;
use holdup_trace::{Class, StackId, Trace, Waker};
use std::cell::Cell;

/// The number of a thread's time line in [`Index::lines`].
pub(crate) type Line = u32;

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
    /// The time line of the thread that ended the wait, when the recording
    /// holds it.
    pub waker_line: Option<Line>,
    /// The stack of the interval's blocked sample, if it covered a
    /// sampling point.
    pub stack: Option<StackId>,
    /// On-CPU samples taken at or before the start, and at or before the
    /// end: those between two intervals are found without a search of
    /// them all.
    cpu_before: u32,
    cpu_after: u32,
}

/// An on-CPU sample: the thread ran the `weight` periods before `time`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OnCpu {
    pub time: u64,
    pub weight: u32,
    pub stack: StackId,
}

/// Where the intervals that start in each stretch of a time line are:
/// entry `b` counts the intervals that start before `t0 + b << shift`.
/// Stretches are about as long as an interval and its gap, so a search
/// reads one entry and bisects the few intervals of one stretch, wherever
/// the last search ended.
#[derive(Debug, Default)]
struct Buckets {
    t0: u64,
    shift: u32,
    counts: Vec<u32>,
}

impl Buckets {
    fn new(off: &[Off]) -> Buckets {
        let (Some(first), Some(last)) = (off.first(), off.last()) else {
            return Buckets::default();
        };
        let span = last.start - first.start + 1;
        let shift = (span / off.len() as u64).max(1).ilog2();
        let n = (span >> shift) as usize + 2;
        let mut counts = Vec::with_capacity(n);
        let mut i = 0;
        for b in 0..n as u64 {
            let edge = first.start + (b << shift);
            while i < off.len() && off[i].start < edge {
                i += 1;
            }
            counts.push(i as u32);
        }
        Buckets {
            t0: first.start,
            shift,
            counts,
        }
    }

    /// The range of `off` where the intervals starting around `t` are.
    fn around(&self, t: u64, len: usize) -> (usize, usize) {
        if t <= self.t0 || self.counts.is_empty() {
            return (0, 0);
        }
        let b = ((t - self.t0) >> self.shift) as usize;
        match (self.counts.get(b), self.counts.get(b + 1)) {
            (Some(&lo), Some(&hi)) => (lo as usize, hi as usize),
            _ => (len, len),
        }
    }
}

/// The bisection of `v` under `before` (which holds for a prefix), with
/// the elements looked at added to `probes`.
fn bisected<T>(v: &[T], before: impl Fn(&T) -> bool, probes: &Cell<u64>) -> usize {
    let mut looks = 1;
    let n = v.partition_point(|x| {
        looks += 1;
        before(x)
    });
    probes.set(probes.get() + looks);
    n
}

#[derive(Debug, Default)]
pub(crate) struct Timeline {
    /// Sorted by start; a thread's intervals do not overlap.
    pub off: Vec<Off>,
    buckets: Buckets,
    /// Sorted by time.
    pub cpu: Vec<OnCpu>,
    /// From its creation (or the recording's start) to its exit (or the
    /// recording's end).
    pub alive: (u64, u64),
}

impl Timeline {
    /// Index of the first interval that may overlap `[t, …)`.
    pub fn first_off(&self, t: u64, probes: &Cell<u64>) -> usize {
        let (lo, hi) = self.buckets.around(t, self.off.len());
        let i = lo + bisected(&self.off[lo..hi], |o| o.start < t, probes);
        if i > 0 && self.off[i - 1].end > t {
            i - 1
        } else {
            i
        }
    }

    /// The on-CPU samples taken in `(a, b]` (a sample stands for the
    /// period that ends at its time), a stretch on the CPU that ends at
    /// or before interval `next` starts: the samples between the interval
    /// before and that one, bisected.
    pub fn cpu_in(&self, (a, b): (u64, u64), next: usize, probes: &Cell<u64>) -> &[OnCpu] {
        let after = |i: usize| {
            self.off
                .get(i)
                .map_or(self.cpu.len(), |o| o.cpu_before as usize)
        };
        let lo = if next == 0 {
            0
        } else {
            self.off[next - 1].cpu_after as usize
        };
        let gap = &self.cpu[lo..after(next).max(lo)];
        let from = bisected(gap, |s| s.time <= a, probes);
        let to = bisected(gap, |s| s.time <= b, probes);
        &gap[from..to.max(from)]
    }
}

/// The time lines of the recorded threads: those with a wait segment or a
/// sample. A thread seen only as a waker is not recorded.
#[derive(Debug, Default)]
pub(crate) struct Index {
    pub lines: Vec<Timeline>,
    numbers: FxHashMap<u32, Line>,
}

impl Index {
    pub fn new(trace: &Trace) -> Index {
        // Number the threads and count what each holds, so that every
        // vector is allocated once, at its size.
        let mut numbers: FxHashMap<u32, Line> = FxHashMap::default();
        let mut sizes: Vec<[usize; 3]> = Vec::new();
        let mut count = |tid: u32, what: usize| {
            let n = *numbers.entry(tid).or_insert_with(|| {
                sizes.push([0; 3]);
                (sizes.len() - 1) as Line
            });
            sizes[n as usize][what] += 1;
        };
        const OFF: usize = 0;
        const CPU: usize = 1;
        const BLOCKED: usize = 2;
        for s in &trace.segments {
            count(s.tid, OFF);
        }
        for s in &trace.samples {
            count(s.tid, if s.class == Class::Cpu { CPU } else { BLOCKED });
        }
        let mut off: Vec<Vec<Off>> = sizes.iter().map(|n| Vec::with_capacity(n[OFF])).collect();
        let mut cpu: Vec<Vec<OnCpu>> = sizes.iter().map(|n| Vec::with_capacity(n[CPU])).collect();
        // Blocked samples by start, to name the intervals they stand for.
        let mut blocked: Vec<Vec<(u64, StackId)>> = sizes
            .iter()
            .map(|n| Vec::with_capacity(n[BLOCKED]))
            .collect();
        for s in &trace.segments {
            let wake = match (s.wake, s.class) {
                (0, Class::Sched) => s.start,
                (0, _) => s.end,
                (w, _) => w.clamp(s.start, s.end),
            };
            let waker = if s.wake == 0 { Waker::None } else { s.waker };
            let waker_line = match waker {
                Waker::Thread(t) => numbers.get(&t).copied(),
                _ => None,
            };
            off[numbers[&s.tid] as usize].push(Off {
                start: s.start,
                wake,
                end: s.end.max(s.start),
                class: s.class,
                waker,
                waker_line,
                stack: None,
                cpu_before: 0,
                cpu_after: 0,
            });
        }
        for s in &trace.samples {
            let n = numbers[&s.tid] as usize;
            if s.class == Class::Cpu {
                cpu[n].push(OnCpu {
                    time: s.time,
                    weight: s.weight,
                    stack: s.stack,
                });
            } else {
                blocked[n].push((s.time, s.stack));
            }
        }
        let mut tids: Vec<u32> = vec![0; sizes.len()];
        for (&tid, &n) in &numbers {
            tids[n as usize] = tid;
        }
        let lines = tids
            .iter()
            .zip(off)
            .zip(cpu)
            .zip(blocked)
            .map(|(((tid, mut off), mut cpu), mut blocked)| {
                off.sort_unstable_by_key(|o| o.start);
                cpu.sort_unstable_by_key(|s| s.time);
                blocked.sort_unstable();
                let (mut j, mut c) = (0, 0);
                for o in off.iter_mut() {
                    while j < blocked.len() && blocked[j].0 < o.start {
                        j += 1;
                    }
                    if j < blocked.len() && blocked[j].0 == o.start {
                        o.stack = Some(blocked[j].1);
                    }
                    // Intervals do not overlap: both counts only grow.
                    while c < cpu.len() && cpu[c].time <= o.start {
                        c += 1;
                    }
                    o.cpu_before = c as u32;
                    let mut e = c;
                    while e < cpu.len() && cpu[e].time <= o.end {
                        e += 1;
                    }
                    o.cpu_after = e as u32;
                }
                Timeline {
                    buckets: Buckets::new(&off),
                    off,
                    cpu,
                    alive: match trace.threads.get(tid) {
                        Some(th) => (th.start, th.end.max(th.start)),
                        None => (trace.header.start_ns, trace.end_ns),
                    },
                }
            })
            .collect();
        Index { lines, numbers }
    }

    /// The time line of `tid`, if the recording holds it.
    pub fn line_of(&self, tid: u32) -> Option<Line> {
        self.numbers.get(&tid).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn off(start: u64, end: u64) -> Off {
        Off {
            start,
            wake: end,
            end,
            class: Class::Other,
            waker: Waker::None,
            waker_line: None,
            stack: None,
            cpu_before: 0,
            cpu_after: 0,
        }
    }

    /// The stretches find what a bisection of all the intervals finds,
    /// for times before, between, on and after them, spread evenly or in
    /// bursts; and a search looks at a few intervals, however many there are.
    #[test]
    fn the_search_by_stretches_agrees_with_bisection() {
        let even: Vec<Off> = (0..50).map(|i| off(100 + 20 * i, 110 + 20 * i)).collect();
        let bursts: Vec<Off> = (0..60)
            .map(|i| (i / 20) * 100_000 + (i % 20) * 3)
            .map(|s| off(s + 7, s + 9))
            .collect();
        for (what, v) in [("even", even), ("bursts", bursts), ("one", vec![off(5, 9)])] {
            let tl = Timeline {
                buckets: Buckets::new(&v),
                off: v,
                ..Timeline::default()
            };
            let probes = Cell::new(0);
            let last = tl.off.last().unwrap().end + 10;
            for t in (0..last).step_by(1).chain([0, 1, last * 2]) {
                let i = tl.off.partition_point(|o| o.start < t);
                let want = if i > 0 && tl.off[i - 1].end > t {
                    i - 1
                } else {
                    i
                };
                assert_eq!(tl.first_off(t, &probes), want, "{what}: t = {t}");
            }
        }
        assert_eq!(Timeline::default().first_off(5, &Cell::new(0)), 0);

        let long: Vec<Off> = (0..100_000).map(|i| off(10 * i, 10 * i + 4)).collect();
        let tl = Timeline {
            buckets: Buckets::new(&long),
            off: long,
            ..Timeline::default()
        };
        let probes = Cell::new(0);
        for t in (0..1_000_000).rev().step_by(97) {
            tl.first_off(t, &probes);
        }
        let per_search = probes.get() as f64 / (1_000_000.0 / 97.0);
        assert!(per_search < 5.0, "{per_search} probes per search");
    }
}
