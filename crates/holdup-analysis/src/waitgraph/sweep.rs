//! Cascaded re-distribution (wPerf §4.2, Fig. 4) as one sweep over time.
//!
//! wPerf adds the length of each waiting segment `w` of A woken by B to edge
//! A → B, then clips every waiting segment of B that overlaps `w` to `w`'s
//! window and does the same for it, recursively. Summed over all segments
//! this is: at each instant t, a waiting thread X adds dt to its edge
//! X → waker once for itself and once for every thread whose chain of waits
//! at t (A waits on B, B waits on C, …) passes through X.
//!
//! At one instant the "waits on" relation is a forest: each waiting thread has
//! one waker, and a waker runs before the thread it wakes, so its own wait
//! ended earlier and chains cannot close into cycles. The sweep keeps that
//! forest with subtree sizes, so an edge accrues `size × dt`: every event
//! walks up its chain once, and no history is kept. wPerf's recursion needs
//! the waker's whole past instead (memory proportional to events).
//!
//! Events must be applied in time order, but segments are written when the
//! thread is switched back in, i.e. in order of their *end*. A segment is
//! therefore known at most `end - start` after its start: short segments
//! are held in a ring of time buckets `horizon` wide and sorted bucket by
//! bucket; segments longer than that are found by a first pass over the
//! trace and handed in up front (`prelinks`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// No node / no edge.
pub const NONE: u32 = u32::MAX;

/// Buckets are at least 2^20 ns (~1 ms) wide, wider when the horizon
/// needs it.
const MIN_SHIFT: u32 = 20;
/// A ring of 1024 buckets: it must span the horizon plus the reordering
/// between CPUs.
const NBUCKETS: u64 = 1024;
/// Emptied bucket vectors kept for reuse.
const SPARE: usize = 64;
/// A chain deeper than this is treated as a cycle (corrupt input).
const MAX_DEPTH: u32 = 1 << 16;

/// One wait: `node` waits on `parent` over `[start, wake)`; its weight goes
/// to edge `edge`. `parent` may be a node that never waits (a device).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitSeg {
    pub node: u32,
    pub parent: u32,
    pub edge: u32,
    pub start: u64,
    pub wake: u64,
}

/// `edge == CUT` marks the end of a wait.
const CUT: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Ev {
    t: u64,
    node: u32,
    edge: u32,
    parent: u32,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    parent: u32,
    /// 1 + the sizes of the nodes waiting on this one.
    size: u32,
    /// The edge the current wait accrues to; NONE while not waiting.
    edge: u32,
    last: u64,
    acc: u64,
}

const FREE: Node = Node {
    parent: NONE,
    size: 1,
    edge: NONE,
    last: 0,
    acc: 0,
};

pub struct Sweep {
    nodes: Vec<Node>,
    /// Re-distributed weight per edge, in ns.
    pub weights: Vec<u64>,
    buckets: Vec<Vec<Ev>>,
    /// Absolute number of the next bucket to process.
    cur: u64,
    pending: usize,
    /// The long segments, sorted by start; `pre_at` is the next. The ends
    /// of those under way wait in `ends`: at most one per waiting thread.
    pre: Vec<WaitSeg>,
    pre_at: usize,
    ends: BinaryHeap<Reverse<(u64, u32)>>,
    shift: u32,
    horizon: u64,
    /// Time of the last event applied.
    clock: u64,
    /// Emptied bucket vectors, for reuse.
    spare: Vec<Vec<Ev>>,
    /// Events that arrived after their time was swept (clamped to it).
    pub late: u64,
    /// Waits that would have closed a cycle (not cascaded).
    pub cycles: u64,
}

/// Time order; at equal times ends of waits first: a thread wakes the
/// threads waiting on it before it blocks itself, and the other order
/// would make a chain look like a cycle.
fn order(e: &Ev) -> (u64, bool) {
    (e.t, e.edge != CUT)
}

fn events(s: &WaitSeg) -> [Ev; 2] {
    [
        Ev {
            t: s.start,
            node: s.node,
            edge: s.edge,
            parent: s.parent,
        },
        Ev {
            t: s.wake,
            node: s.node,
            edge: CUT,
            parent: NONE,
        },
    ]
}

impl Sweep {
    /// `start`: beginning of the recording. `horizon`: how long after its
    /// start a segment handed to [`Sweep::add`] may arrive. `prelinks`: the
    /// segments that may arrive later than that.
    pub fn new(start: u64, horizon: u64, prelinks: impl IntoIterator<Item = WaitSeg>) -> Self {
        let mut shift = MIN_SHIFT;
        while horizon >= (NBUCKETS - 2) << shift {
            shift += 1;
        }
        let mut pre: Vec<WaitSeg> = prelinks.into_iter().filter(|s| s.wake > s.start).collect();
        pre.sort_unstable_by_key(|s| s.start);
        let mut sw = Sweep {
            nodes: Vec::new(),
            weights: Vec::new(),
            buckets: (0..NBUCKETS).map(|_| Vec::new()).collect(),
            cur: start >> shift,
            pending: 0,
            pre,
            pre_at: 0,
            ends: BinaryHeap::new(),
            shift,
            horizon,
            clock: start,
            spare: Vec::new(),
            late: 0,
            cycles: 0,
        };
        for i in 0..sw.pre.len() {
            let s = sw.pre[i];
            sw.grow(s.node, s.parent, s.edge);
        }
        sw
    }

    fn grow(&mut self, node: u32, parent: u32, edge: u32) {
        let n = node.max(if parent == NONE { 0 } else { parent }) as usize + 1;
        if self.nodes.len() < n {
            self.nodes.resize(n, FREE);
        }
        if edge != CUT && edge != NONE && self.weights.len() <= edge as usize {
            self.weights.resize(edge as usize + 1, 0);
        }
    }

    /// A segment that arrived now (in order of its end).
    pub fn add(&mut self, s: WaitSeg) {
        if s.wake <= s.start {
            return;
        }
        self.grow(s.node, s.parent, s.edge);
        let [mut link, mut cut] = events(&s);
        let first = self.cur << self.shift;
        if link.t < first {
            // Its start was swept already: clamp the wait to what is left
            // (both ends, so that a link never follows its own cut).
            self.late += 1;
            link.t = first;
            cut.t = cut.t.max(first);
            if cut.t == link.t {
                return;
            }
        }
        self.push(link);
        self.push(cut);
    }

    fn push(&mut self, e: Ev) {
        let b = e.t >> self.shift;
        if b >= self.cur + NBUCKETS {
            // Far ahead of everything pending (a jump in time): sweep up
            // to it so that the ring does not wrap.
            self.run_until(b + 1 - NBUCKETS);
        }
        let b = b.max(self.cur);
        let v = &mut self.buckets[(b % NBUCKETS) as usize];
        if v.capacity() == 0 {
            if let Some(spare) = self.spare.pop() {
                *v = spare;
            }
        }
        v.push(e);
        self.pending += 1;
    }

    /// Everything that ended by `now` has arrived: apply the events that
    /// can no longer be preceded by a late one.
    pub fn advance(&mut self, now: u64) {
        let w = now.saturating_sub(self.horizon) >> self.shift;
        if w > self.cur {
            self.run_until(w);
        }
    }

    /// Apply all buckets before bucket number `end`.
    fn run_until(&mut self, end: u64) {
        while self.cur < end {
            if self.pending == 0 {
                // Nothing buffered: jump to the next long segment or `end`.
                match self.next_unbuffered() {
                    Some(next) if next < end => self.cur = self.cur.max(next),
                    _ => {
                        self.cur = end;
                        return;
                    }
                }
            }
            self.run_bucket();
        }
    }

    /// Bucket of the earliest event not in a bucket (a long segment's link
    /// or a cut in the heap), if any is left.
    fn next_unbuffered(&self) -> Option<u64> {
        let next_link = self.pre.get(self.pre_at).map(|s| s.start);
        let next_end = self.ends.peek().map(|e| e.0 .0);
        let next = match (next_link, next_end) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some(next >> self.shift)
    }

    fn run_bucket(&mut self) {
        let slot = (self.cur % NBUCKETS) as usize;
        let mut batch = std::mem::take(&mut self.buckets[slot]);
        self.pending -= batch.len();
        // Compare bucket numbers, not times: `(cur + 1) << shift` wraps
        // for times near the end of the clock's range.
        let in_bucket = |t: u64| t >> self.shift <= self.cur;
        while let Some(s) = self.pre.get(self.pre_at) {
            if !in_bucket(s.start) {
                break;
            }
            let [link, cut] = events(s);
            batch.push(link);
            self.ends.push(Reverse((cut.t, cut.node)));
            self.pre_at += 1;
        }
        while let Some(&Reverse((t, node))) = self.ends.peek() {
            if !in_bucket(t) {
                break;
            }
            self.ends.pop();
            batch.push(Ev {
                t,
                node,
                edge: CUT,
                parent: NONE,
            });
        }
        batch.sort_unstable_by_key(order);
        for e in &batch {
            self.clock = self.clock.max(e.t);
            let t = self.clock;
            if e.edge == CUT {
                self.cut(e.node, t);
            } else {
                self.link(e.node, e.parent, e.edge, t);
            }
        }
        // Reuse allocations through a small pool: slots waiting for events
        // hold none, so memory follows the events in the window, not every
        // slot's largest burst.
        batch.clear();
        if self.spare.len() < SPARE {
            self.spare.push(batch);
        }
        self.cur += 1;
    }

    fn link(&mut self, x: u32, p: u32, edge: u32, t: u64) {
        if self.nodes[x as usize].edge != NONE {
            // Overlapping waits of one thread: end the older one.
            self.cut(x, t);
        }
        let mut cycle = p == x;
        let mut a = p;
        let mut depth = 0;
        while a != NONE && !cycle {
            a = self.nodes[a as usize].parent;
            depth += 1;
            cycle = a == x || depth > MAX_DEPTH;
        }
        let n = &mut self.nodes[x as usize];
        n.edge = edge;
        n.last = t;
        n.acc = 0;
        n.parent = NONE;
        if cycle {
            // Inconsistent input: keep the direct weight, do not cascade.
            self.cycles += 1;
            return;
        }
        n.parent = p;
        let s = n.size;
        self.adjust(p, t, |size| size + s);
    }

    fn cut(&mut self, x: u32, t: u64) {
        let n = &mut self.nodes[x as usize];
        if n.edge == NONE {
            return;
        }
        n.acc += n.size as u64 * t.saturating_sub(n.last);
        let w = &mut self.weights[n.edge as usize];
        *w = w.saturating_add(n.acc);
        let (p, s) = (n.parent, n.size);
        n.parent = NONE;
        n.edge = NONE;
        n.acc = 0;
        self.adjust(p, t, |size| size - s);
    }

    /// Settle the accrued weight of every waiting node on the chain from
    /// `a` up, then change its size.
    fn adjust(&mut self, mut a: u32, t: u64, f: impl Fn(u32) -> u32) {
        while a != NONE {
            let n = &mut self.nodes[a as usize];
            if n.edge != NONE {
                n.acc += n.size as u64 * t.saturating_sub(n.last);
                n.last = t;
            }
            n.size = f(n.size);
            a = n.parent;
        }
    }

    /// Apply every remaining event; returns the weights by edge.
    pub fn into_edge_weights(mut self) -> Vec<u64> {
        // Bucket by bucket while any is filled, then from one remaining
        // event to the next: a gap of years in a corrupt trace costs one
        // step, not one per bucket.
        loop {
            if self.pending == 0 {
                match self.next_unbuffered() {
                    Some(next) => self.cur = self.cur.max(next),
                    None => break,
                }
            }
            self.run_bucket();
        }
        // A wait without its end (cannot happen with complete segments).
        for x in 0..self.nodes.len() as u32 {
            let t = self.clock;
            self.cut(x, t);
        }
        self.weights
    }
}

#[cfg(test)]
pub(crate) mod reference {
    //! wPerf's Fig. 4, literally, for checking the sweep.
    use std::collections::HashMap;

    /// `(who, waker, start, end)`.
    pub type Seg = (u32, u32, u64, u64);

    pub fn cascade(segs: &[Seg]) -> HashMap<(u32, u32), u64> {
        let mut out = HashMap::new();
        for &w in segs {
            go(segs, w, &mut out, 0);
        }
        out
    }

    fn go(segs: &[Seg], w: Seg, out: &mut HashMap<(u32, u32), u64>, depth: u32) {
        let (id, waker, start, end) = w;
        if end <= start {
            return;
        }
        *out.entry((id, waker)).or_default() += end - start;
        assert!(depth < 1000, "cycle in the reference input");
        for &s in segs
            .iter()
            .filter(|s| s.0 == waker && s.2 < end && s.3 > start)
        {
            go(
                segs,
                (s.0, s.1, s.2.max(start), s.3.min(end)),
                out,
                depth + 1,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Run the sweep on `(who, waker, start, wake)` segments arriving in order
    /// of their wake time; those longer than `long` go in as prelinks.
    fn sweep(segs: &[reference::Seg], horizon: u64, long: u64) -> HashMap<(u32, u32), u64> {
        let mut edges: HashMap<(u32, u32), u32> = HashMap::new();
        let mut ids = Vec::new();
        let mut wait = |s: &reference::Seg| {
            let n = edges.len() as u32;
            let e = *edges.entry((s.0, s.1)).or_insert(n);
            if e == n {
                ids.push((s.0, s.1));
            }
            WaitSeg {
                node: s.0,
                parent: s.1,
                edge: e,
                start: s.2,
                wake: s.3,
            }
        };
        let all: Vec<(WaitSeg, bool)> = segs.iter().map(|s| (wait(s), s.3 - s.2 > long)).collect();
        let pre: Vec<WaitSeg> = all.iter().filter(|(_, l)| *l).map(|(s, _)| *s).collect();
        let mut sw = Sweep::new(0, horizon, pre);
        let mut order: Vec<&(WaitSeg, bool)> = all.iter().collect();
        order.sort_by_key(|(s, _)| s.wake);
        for (s, l) in order {
            if !l {
                sw.add(*s);
            }
            sw.advance(s.wake);
        }
        assert_eq!(sw.late, 0);
        let w = sw.into_edge_weights();
        ids.iter()
            .enumerate()
            .map(|(i, k)| (*k, w[i]))
            .filter(|(_, w)| *w > 0)
            .collect()
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn figure_3_nested_wait() {
        // C wakes B at t1, B wakes A at t2; both began waiting at t0.
        // wPerf: A→B keeps t2-t0, B→C gets its own t1-t0 plus A's overlap.
        let (a, b, c) = (0, 1, 2);
        let (t0, t1, t2) = (10 * MS, 30 * MS, 70 * MS);
        let segs = [(a, b, t0, t2), (b, c, t0, t1)];
        let w = sweep(&segs, 150 * MS, 100 * MS);
        assert_eq!(w[&(a, b)], 60 * MS);
        assert_eq!(w[&(b, c)], 40 * MS);
        assert_eq!(w, reference::cascade(&segs));
    }

    #[test]
    fn three_level_chain_hand_worked() {
        // A waits on B over [0,100); B waits on C over [20,60) and [70,90);
        // C waits on D over [30,50) and [55,80).
        // A→B = 100.
        // B→C = own 40 + 20 = 60, plus A's overlap (40 + 20) = 120.
        // C→D: own 20 + 25 = 45; through B (clipped to B's waits):
        //   [30,50) ⊂ [20,60) → 20; [55,80) ∩ [20,60) = [55,60) → 5;
        //   [55,80) ∩ [70,90) = [70,80) → 10; that is 35 via B, and the
        //   same 35 again via A (A's window covers all of B's waits).
        //   Total 45 + 35 + 35 = 115.
        let (a, b, c, d) = (0, 1, 2, 3);
        let segs = [
            (c, d, 30, 50),
            (c, d, 55, 80),
            (b, c, 20, 60),
            (b, c, 70, 90),
            (a, b, 0, 100),
        ]
        .map(|(x, y, s, e)| (x, y, s * MS, e * MS));
        let w = sweep(&segs, 150 * MS, 100 * MS);
        assert_eq!(w[&(a, b)], 100 * MS);
        assert_eq!(w[&(b, c)], 120 * MS);
        assert_eq!(w[&(c, d)], 115 * MS);
        assert_eq!(w.len(), 3);
        assert_eq!(w, reference::cascade(&segs));
    }

    #[test]
    fn two_waiters_on_one_thread_both_cascade() {
        // A and E both wait on B over [0,10); B waits on C over [0,10).
        // B→C = 10 (own) + 10 (A) + 10 (E) = 30.
        let segs = [(1, 2, 0, 10 * MS), (0, 1, 0, 10 * MS), (4, 1, 0, 10 * MS)];
        let w = sweep(&segs, 150 * MS, 100 * MS);
        assert_eq!(w[&(1, 2)], 30 * MS);
        assert_eq!(w[&(0, 1)], 10 * MS);
        assert_eq!(w[&(4, 1)], 10 * MS);
    }

    #[test]
    fn waiting_on_a_running_thread_does_not_cascade() {
        // B runs during A's wait: nothing beyond A→B.
        let segs = [(0, 1, 0, 10 * MS), (1, 2, 20 * MS, 30 * MS)];
        let w = sweep(&segs, 150 * MS, 100 * MS);
        assert_eq!(w[&(0, 1)], 10 * MS);
        assert_eq!(w[&(1, 2)], 10 * MS);
    }

    #[test]
    fn a_device_target_is_a_root() {
        // A waits on the disk (node 9, never waits itself).
        let segs = [(0, 9, 0, 5 * MS), (1, 0, 0, 5 * MS)];
        let w = sweep(&segs, 150 * MS, 100 * MS);
        assert_eq!(w[&(0, 9)], 10 * MS);
        assert_eq!(w[&(1, 0)], 5 * MS);
    }

    #[test]
    fn a_cycle_keeps_direct_weight_only() {
        // Impossible in real data (each would have to run to wake the
        // other): no panic, no runaway weight.
        let segs = [(0, 1, 0, 10 * MS), (1, 0, 0, 10 * MS)];
        let mut sw = Sweep::new(0, 150 * MS, []);
        sw.add(WaitSeg {
            node: 0,
            parent: 1,
            edge: 0,
            start: segs[0].2,
            wake: segs[0].3,
        });
        sw.add(WaitSeg {
            node: 1,
            parent: 0,
            edge: 1,
            start: segs[1].2,
            wake: segs[1].3,
        });
        let w = sw.into_edge_weights();
        assert_eq!(w[0] + w[1], 30 * MS, "one direct, one cascaded once");
        assert!(w[0] >= 10 * MS && w[1] >= 10 * MS);
    }

    /// A random but physically consistent schedule: each thread alternates
    /// running and waiting, and is woken by a thread that is running at
    /// that moment (or by a device).
    fn random_schedule(seed: u64, threads: u32, steps: u32) -> Vec<reference::Seg> {
        let mut x = seed | 1;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        // waiting[i] = Some(start) while thread i is blocked.
        let mut waiting: Vec<Option<u64>> = vec![None; threads as usize];
        let mut segs = Vec::new();
        let device = threads + 5;
        let mut t = 0u64;
        for _ in 0..steps {
            t += 1 + rnd(3 * MS);
            let i = rnd(threads as u64) as usize;
            match waiting[i] {
                None => {
                    // Keep at least one thread running.
                    if waiting.iter().filter(|w| w.is_none()).count() > 1 {
                        waiting[i] = Some(t);
                    }
                }
                Some(start) => {
                    // Woken by a running thread, or by the device.
                    let running: Vec<u32> = (0..threads)
                        .filter(|&j| waiting[j as usize].is_none())
                        .collect();
                    let waker = if rnd(4) == 0 {
                        device
                    } else {
                        running[rnd(running.len() as u64) as usize]
                    };
                    segs.push((i as u32, waker, start, t));
                    waiting[i] = None;
                }
            }
        }
        segs
    }

    #[test]
    fn sweep_equals_figure_4_on_random_schedules() {
        for seed in 1..40 {
            let segs = random_schedule(seed * 7919, 2 + (seed % 7) as u32, 400);
            let want = reference::cascade(&segs);
            // Everything through the bucket ring, then the long ones as prelinks.
            assert_eq!(sweep(&segs, 900 * MS, u64::MAX), want, "seed {seed}");
            assert_eq!(
                sweep(&segs, 5 * MS, 3 * MS),
                want,
                "seed {seed} with prelinks"
            );
            assert_eq!(sweep(&segs, 0, 0), want, "seed {seed} all prelinks");
        }
    }

    #[test]
    fn a_long_horizon_widens_the_buckets() {
        let segs = random_schedule(77, 5, 600);
        let want = reference::cascade(&segs);
        assert_eq!(sweep(&segs, 5_000 * MS, u64::MAX), want);
        assert_eq!(sweep(&segs, 5_000 * MS, 2 * MS), want);
    }

    #[test]
    fn late_arrivals_are_clamped_and_counted() {
        let mut sw = Sweep::new(0, 0, []);
        sw.add(WaitSeg {
            node: 0,
            parent: 1,
            edge: 0,
            start: 100 * MS,
            wake: 110 * MS,
        });
        sw.advance(500 * MS);
        // Arrives after its time was swept: nothing of it is left.
        sw.add(WaitSeg {
            node: 2,
            parent: 0,
            edge: 1,
            start: 10 * MS,
            wake: 20 * MS,
        });
        // Partly swept: the rest counts.
        sw.add(WaitSeg {
            node: 3,
            parent: 0,
            edge: 2,
            start: 10 * MS,
            wake: 1000 * MS,
        });
        assert_eq!(sw.late, 2);
        let w = sw.into_edge_weights();
        assert_eq!(w[0], 10 * MS);
        assert_eq!(w[1], 0);
        let swept = (500 * MS) >> MIN_SHIFT << MIN_SHIFT;
        assert_eq!(w[2], 1000 * MS - swept);
    }

    #[test]
    fn a_jump_in_time_does_not_wrap_the_ring() {
        let mut sw = Sweep::new(0, 100 * MS, []);
        sw.add(WaitSeg {
            node: 0,
            parent: 1,
            edge: 0,
            start: MS,
            wake: 2 * MS,
        });
        sw.add(WaitSeg {
            node: 0,
            parent: 1,
            edge: 0,
            start: 3_600_000 * MS,
            wake: 3_600_001 * MS,
        });
        // Arrives an hour late: dropped and counted, no wrapped ring.
        sw.add(WaitSeg {
            node: 2,
            parent: 0,
            edge: 1,
            start: 5 * MS,
            wake: 6 * MS,
        });
        assert_eq!(sw.late, 1);
        let w = sw.into_edge_weights();
        assert_eq!(w[0], 2 * MS);
        assert_eq!(w[1], 0);
    }
}
