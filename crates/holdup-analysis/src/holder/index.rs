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
///
/// Kept in 32 bytes, two to a cache line: the walks and searches read
/// millions of them in no order the prefetcher follows, so their size is
/// most of the cost. The wakeup and end are lengths from the start (the
/// rare interval too long for them keeps its times in [`Timeline::long`]),
/// and the waker is a kind and a number instead of a `Waker` and a line.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Off {
    pub start: u64,
    /// `wake - start` and `end - wake`, or [`LONG`] both.
    wait_len: u32,
    run_len: u32,
    /// By `who`: the waker's time line, its tid, or its irq or vector.
    who_n: u32,
    /// The stack of the interval's blocked sample, if `has_stack` (it
    /// covered a sampling point).
    stack: StackId,
    /// On-CPU samples taken at or before the start: those between two
    /// intervals are found without a search of them all.
    cpu_before: u32,
    pub class: Class,
    who: Who,
    has_stack: bool,
}

/// Lengths too long for an [`Off`]: its times are in [`Timeline::long`].
const LONG: u32 = u32::MAX;

/// Who ended a wait, with what [`Off::who_n`] holds for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    /// No wakeup seen.
    Nobody,
    /// A recorded thread: its time line.
    Line,
    /// A thread the recording does not hold: its tid.
    Thread,
    Irq,
    Softirq,
    Timer,
}

impl Off {
    fn new(start: u64, wake: u64, end: u64, class: Class, waker: Waker, line: Option<Line>) -> Off {
        let (who, who_n) = match (waker, line) {
            (Waker::None, _) => (Who::Nobody, 0),
            (Waker::Thread(_), Some(l)) => (Who::Line, l),
            (Waker::Thread(t), None) => (Who::Thread, t),
            (Waker::Irq(n), _) => (Who::Irq, n),
            (Waker::Softirq(n), _) => (Who::Softirq, n),
            (Waker::Timer, _) => (Who::Timer, 0),
        };
        // Out of order only in a damaged trace: kept as it is, at length.
        let fits = |a: u64, b: u64| {
            let n = b.checked_sub(a)?;
            u32::try_from(n).ok().filter(|&n| n != LONG)
        };
        let (wait_len, run_len) = match (fits(start, wake), fits(wake, end)) {
            (Some(w), Some(r)) => (w, r),
            _ => (LONG, LONG),
        };
        Off {
            start,
            wait_len,
            run_len,
            who_n,
            stack: 0,
            cpu_before: 0,
            class,
            who,
            has_stack: false,
        }
    }

    pub fn stack(&self) -> Option<StackId> {
        self.has_stack.then_some(self.stack)
    }
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
    /// The wakeup and end of the intervals too long for their record, by
    /// their place in `off`.
    long: Vec<(u32, u64, u64)>,
    buckets: Buckets,
    /// Sorted by time.
    pub cpu: Vec<OnCpu>,
    /// From its creation (or the recording's start) to its exit (or the
    /// recording's end).
    pub alive: (u64, u64),
}

impl Timeline {
    /// The wakeup and end of interval `i`.
    pub fn wake_end(&self, i: usize) -> (u64, u64) {
        let o = &self.off[i];
        if o.wait_len != LONG {
            let wake = o.start + u64::from(o.wait_len);
            return (wake, wake + u64::from(o.run_len));
        }
        let at = self.long.partition_point(|l| (l.0 as usize) < i);
        let l = self.long[at];
        (l.1, l.2)
    }

    /// Index of the first interval that may overlap `[t, …)`.
    pub fn first_off(&self, t: u64, probes: &Cell<u64>) -> usize {
        let (lo, hi) = self.buckets.around(t, self.off.len());
        let i = lo + bisected(&self.off[lo..hi], |o| o.start < t, probes);
        if i > 0 && self.wake_end(i - 1).1 > t {
            i - 1
        } else {
            i
        }
    }

    /// The on-CPU samples taken in `(a, b]` (a sample stands for the
    /// period that ends at its time), a stretch on the CPU that begins at
    /// or after interval `next - 1` ends and ends at or before interval
    /// `next` starts: the samples between the starts of those two,
    /// bisected.
    pub fn cpu_in(&self, (a, b): (u64, u64), next: usize, probes: &Cell<u64>) -> &[OnCpu] {
        let before = |i: usize| {
            self.off
                .get(i)
                .map_or(self.cpu.len(), |o| o.cpu_before as usize)
        };
        let lo = if next == 0 { 0 } else { before(next - 1) };
        let gap = &self.cpu[lo..before(next).max(lo)];
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
    /// The tid of each time line.
    tids: Vec<u32>,
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
        // The times of intervals too long for their record, until sorted:
        // the record holds its place here in `stack`.
        let mut long: Vec<Vec<(u64, u64)>> = vec![Vec::new(); sizes.len()];
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
            let n = numbers[&s.tid] as usize;
            let end = s.end.max(s.start);
            let mut o = Off::new(s.start, wake, end, s.class, waker, waker_line);
            if o.wait_len == LONG {
                o.stack = long[n].len() as StackId;
                long[n].push((wake, end));
            }
            off[n].push(o);
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
            .zip(long)
            .map(|((((tid, mut off), mut cpu), mut blocked), pending)| {
                off.sort_unstable_by_key(|o| o.start);
                cpu.sort_unstable_by_key(|s| s.time);
                blocked.sort_unstable();
                let mut long = Vec::with_capacity(pending.len());
                let (mut j, mut c) = (0, 0);
                for (i, o) in off.iter_mut().enumerate() {
                    if o.wait_len == LONG {
                        let (wake, end) = pending[o.stack as usize];
                        long.push((i as u32, wake, end));
                    }
                    while j < blocked.len() && blocked[j].0 < o.start {
                        j += 1;
                    }
                    if j < blocked.len() && blocked[j].0 == o.start {
                        o.stack = blocked[j].1;
                        o.has_stack = true;
                    }
                    // Intervals do not overlap: the count only grows.
                    while c < cpu.len() && cpu[c].time <= o.start {
                        c += 1;
                    }
                    o.cpu_before = c as u32;
                }
                Timeline {
                    buckets: Buckets::new(&off),
                    off,
                    long,
                    cpu,
                    alive: match trace.threads.get(tid) {
                        Some(th) => (th.start, th.end.max(th.start)),
                        None => (trace.header.start_ns, trace.end_ns),
                    },
                }
            })
            .collect();
        Index {
            lines,
            numbers,
            tids,
        }
    }

    /// The time line of `tid`, if the recording holds it.
    pub fn line_of(&self, tid: u32) -> Option<Line> {
        self.numbers.get(&tid).copied()
    }

    /// Who ended interval `o`'s wait, and that thread's time line when the
    /// recording holds it.
    pub fn waker(&self, o: &Off) -> (Waker, Option<Line>) {
        match o.who {
            Who::Nobody => (Waker::None, None),
            Who::Line => (Waker::Thread(self.tids[o.who_n as usize]), Some(o.who_n)),
            Who::Thread => (Waker::Thread(o.who_n), None),
            Who::Irq => (Waker::Irq(o.who_n), None),
            Who::Softirq => (Waker::Softirq(o.who_n), None),
            Who::Timer => (Waker::Timer, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn off(start: u64, end: u64) -> Off {
        Off::new(start, end, end, Class::Other, Waker::None, None)
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
            let last = tl.wake_end(tl.off.len() - 1).1 + 10;
            for t in (0..last).step_by(1).chain([0, 1, last * 2]) {
                let i = tl.off.partition_point(|o| o.start < t);
                let want = if i > 0 && tl.wake_end(i - 1).1 > t {
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

    /// Intervals too long for their record's lengths (a thread asleep for
    /// minutes), or out of order (a damaged trace), keep their times
    /// exactly, beside the short ones; and every kind of waker comes back
    /// as it went in.
    #[test]
    fn long_intervals_and_wakers_are_kept_exactly() {
        let s = 1_000_000_000u64;
        let ivs = [
            (10, 20, 30, Waker::Thread(7)),
            (100, 100 + 5 * s, 100 + 5 * s + 3, Waker::Thread(8)),
            (6 * s, 6 * s + 2, 6 * s + 2 + 300 * s, Waker::Irq(14)),
            (
                700 * s,
                700 * s + u64::from(u32::MAX),
                710 * s,
                Waker::Softirq(4),
            ),
            (702 * s, 702 * s - 5, 702 * s + 1, Waker::Timer),
            (703 * s, 703 * s + 1, 703 * s + 2, Waker::None),
        ];
        let mut trace = Trace::default();
        for &(start, wake, end, waker) in &ivs {
            trace.segments.push(holdup_trace::Segment {
                pid: 1,
                tid: 1,
                start,
                wake,
                end,
                class: Class::Other,
                waker,
                cpu: Some(0),
            });
        }
        trace.segments.push(holdup_trace::Segment {
            pid: 8,
            tid: 8,
            start: 1,
            wake: 2,
            end: 3,
            class: Class::Lock,
            waker: Waker::None,
            cpu: Some(0),
        });
        let index = Index::new(&trace);
        let tl = &index.lines[index.line_of(1).unwrap() as usize];
        assert_eq!(std::mem::size_of::<Off>(), 32);
        assert_eq!(tl.long.len(), 3);
        for (i, &(start, wake, end, waker)) in ivs.iter().enumerate() {
            assert_eq!(tl.off[i].start, start);
            // As the index reads a segment: the wakeup within the interval.
            let wake = wake.clamp(start, end);
            assert_eq!(tl.wake_end(i), (wake, end), "interval {i}");
            let line = match waker {
                Waker::Thread(8) => index.line_of(8),
                _ => None,
            };
            assert_eq!(index.waker(&tl.off[i]), (waker, line), "interval {i}");
        }
    }
}
