//! Latency histograms (OSprof): per-operation log2 histograms, their peaks,
//! time-lapse series and the difference between two recordings.

pub mod explain;
pub mod peaks;
pub mod sampled_calls;

pub use explain::{explain, PathStep, PeakCauses};
pub use peaks::{emd, find_peaks, peaks_decided, Peak, START_OPS};

use holdup_trace::latency::LatencyData;
use std::collections::BTreeMap;

/// A log2 histogram: bucket `s` holds latencies in `[2^s, 2^(s+1))` ns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    pub count: Vec<u64>,
    /// Time spent in the calls of each bucket.
    pub ns: Vec<u64>,
    /// Of `ns`, off-CPU time by cause (`holdup_trace::latency::CAUSES`),
    /// per bucket; empty when the recording has none.
    pub cause_ns: Vec<Vec<u64>>,
}

impl Histogram {
    pub fn add(&mut self, count: &[u64], ns: &[u64]) {
        let n = count.len().max(self.count.len());
        self.count.resize(n, 0);
        self.ns.resize(n, 0);
        for (s, (&c, &t)) in count.iter().zip(ns).enumerate() {
            self.count[s] += c;
            self.ns[s] += t;
        }
    }

    pub fn merge(&mut self, other: &Histogram) {
        self.add(&other.count, &other.ns);
        self.add_causes(&other.cause_ns);
    }

    pub fn add_causes(&mut self, cause_ns: &[Vec<u64>]) {
        if self.cause_ns.len() < cause_ns.len() {
            self.cause_ns.resize(cause_ns.len(), Vec::new());
        }
        for (mine, theirs) in self.cause_ns.iter_mut().zip(cause_ns) {
            if mine.len() < theirs.len() {
                mine.resize(theirs.len(), 0);
            }
            for (m, t) in mine.iter_mut().zip(theirs) {
                *m += t;
            }
        }
    }

    pub fn total_count(&self) -> u64 {
        self.count.iter().sum()
    }

    pub fn total_ns(&self) -> u64 {
        self.ns.iter().sum()
    }
}

/// The lower bound of bucket `s`, ns (bucket 0 starts at 0).
pub fn bucket_lo(s: usize) -> u64 {
    if s == 0 {
        0
    } else {
        1u64 << s
    }
}

/// The upper bound (exclusive) of bucket `s`, ns.
pub fn bucket_hi(s: usize) -> u64 {
    1u64 << (s + 1)
}

/// One operation of one process over a time span.
#[derive(Clone, Debug)]
pub struct Operation {
    pub op: String,
    pub pid: u32,
    pub comm: String,
    pub hist: Histogram,
    pub peaks: Vec<Peak>,
    /// With a time lapse: (first interval index, histogram) per step.
    pub steps: Vec<(u64, Histogram)>,
}

/// Histograms per operation and process over the whole recording, most
/// time first; with `lapse` (a multiple of the recorded interval, in
/// recorded intervals), also one histogram per step of `lapse` intervals.
pub fn operations(data: &LatencyData, lapse: Option<u64>) -> Vec<Operation> {
    type Steps = BTreeMap<u64, Histogram>;
    let mut by_op: BTreeMap<(String, u32), (String, Histogram, Steps)> = BTreeMap::new();
    for h in &data.histograms {
        let e = by_op
            .entry((h.op.clone(), h.pid))
            .or_insert_with(|| (h.comm.clone(), Histogram::default(), Steps::new()));
        if e.0.is_empty() {
            e.0 = h.comm.clone();
        }
        e.1.add(&h.count, &h.ns);
        e.1.add_causes(&h.cause_ns);
        if let Some(k) = lapse {
            let step = h.interval as u64 / k.max(1) * k.max(1);
            e.2.entry(step).or_default().add(&h.count, &h.ns);
        }
    }
    let mut ops: Vec<Operation> = by_op
        .into_iter()
        .map(|((op, pid), (comm, hist, steps))| Operation {
            peaks: find_peaks(&hist),
            op,
            pid,
            comm,
            hist,
            steps: steps.into_iter().collect(),
        })
        .collect();
    ops.sort_by(|a, b| {
        b.hist
            .total_ns()
            .cmp(&a.hist.total_ns())
            .then_with(|| a.op.cmp(&b.op))
            .then_with(|| a.pid.cmp(&b.pid))
    });
    ops
}

/// How a peak changed between two recordings.
#[derive(Clone, Debug, PartialEq)]
pub enum PeakChange {
    Appeared(Peak),
    Vanished(Peak),
    Moved { from: Peak, to: Peak },
}

/// The difference of one operation (of processes with one name) between
/// recordings A and B.
#[derive(Clone, Debug)]
pub struct OpDiff {
    pub op: String,
    pub comm: String,
    pub a: Histogram,
    pub b: Histogram,
    /// Earth mover's distance between the normalised histograms, in
    /// buckets (factors of two); `None` when one side has no calls.
    pub emd: Option<f64>,
    pub changes: Vec<PeakChange>,
}

/// Compare two recordings operation by operation. Processes are matched by
/// name (pids differ between runs); ranked by distance, largest first, and
/// operations present on one side only first of all.
pub fn diff(a: &LatencyData, b: &LatencyData) -> Vec<OpDiff> {
    let mut by_op: BTreeMap<(String, String), (Histogram, Histogram)> = BTreeMap::new();
    for (side, data) in [(0, a), (1, b)] {
        for h in &data.histograms {
            let e = by_op.entry((h.op.clone(), h.comm.clone())).or_default();
            let hist = if side == 0 { &mut e.0 } else { &mut e.1 };
            hist.add(&h.count, &h.ns);
        }
    }
    let mut out: Vec<OpDiff> = by_op
        .into_iter()
        .map(|((op, comm), (ha, hb))| {
            let (pa, pb) = (find_peaks(&ha), find_peaks(&hb));
            let emd =
                (ha.total_count() > 0 && hb.total_count() > 0).then(|| emd(&ha.count, &hb.count));
            OpDiff {
                op,
                comm,
                changes: peak_changes(&pa, &pb),
                a: ha,
                b: hb,
                emd,
            }
        })
        .collect();
    out.sort_by(|x, y| {
        let key = |d: &OpDiff| d.emd.unwrap_or(f64::INFINITY);
        key(y)
            .total_cmp(&key(x))
            .then_with(|| x.op.cmp(&y.op))
            .then_with(|| x.comm.cmp(&y.comm))
    });
    out
}

/// Match peaks of A and B one to one by their highest bucket, nearest
/// first, among pairs whose ranges overlap; a matched pair whose mean
/// latency changed by a factor of two (a bucket's width) or more has moved,
/// the rest appeared or vanished. (A highest bucket that flips to its
/// neighbour is no move: a peak straddling a bucket edge does that from run
/// to run.)
pub fn peak_changes(a: &[Peak], b: &[Peak]) -> Vec<PeakChange> {
    let mut pairs: Vec<(usize, usize, usize)> = Vec::new();
    for (i, pa) in a.iter().enumerate() {
        for (j, pb) in b.iter().enumerate() {
            if pa.lo_slot <= pb.hi_slot && pb.lo_slot <= pa.hi_slot {
                pairs.push((pa.mode_slot.abs_diff(pb.mode_slot), i, j));
            }
        }
    }
    pairs.sort();
    let (mut used_a, mut used_b) = (vec![false; a.len()], vec![false; b.len()]);
    let mut changes = Vec::new();
    for (dist, i, j) in pairs {
        if used_a[i] || used_b[j] {
            continue;
        }
        used_a[i] = true;
        used_b[j] = true;
        let mean = |p: &Peak| p.ns as f64 / p.count.max(1) as f64;
        let (ma, mb) = (mean(&a[i]), mean(&b[j]));
        if dist > 0 && ma.max(mb) >= 2.0 * ma.min(mb) {
            changes.push(PeakChange::Moved {
                from: a[i].clone(),
                to: b[j].clone(),
            });
        }
    }
    changes.extend(
        a.iter()
            .zip(&used_a)
            .filter(|(_, &u)| !u)
            .map(|(p, _)| PeakChange::Vanished(p.clone())),
    );
    changes.extend(
        b.iter()
            .zip(&used_b)
            .filter(|(_, &u)| !u)
            .map(|(p, _)| PeakChange::Appeared(p.clone())),
    );
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdup_trace::latency::IntervalHistogram;

    fn data(comm: &str, pid: u32, count: &[u64]) -> LatencyData {
        let ns = count.iter().enumerate().map(|(s, &c)| c << s).collect();
        LatencyData {
            interval_ns: 1_000_000_000,
            histograms: vec![
                IntervalHistogram {
                    op: "func:take".into(),
                    pid,
                    comm: comm.into(),
                    interval: 0,
                    count: count.to_vec(),
                    ns,
                    cause_ns: Vec::new(),
                },
                IntervalHistogram {
                    op: "syscall:read".into(),
                    pid,
                    comm: comm.into(),
                    interval: 2,
                    count: vec![0, 4],
                    ns: vec![0, 8],
                    cause_ns: Vec::new(),
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn time_lapse_steps() {
        let ops = operations(&data("a", 1, &[0, 9]), Some(2));
        let read = ops.iter().find(|o| o.op == "syscall:read").unwrap();
        assert_eq!(read.steps.len(), 1);
        assert_eq!(read.steps[0].0, 2);
        assert_eq!(read.hist.total_count(), 4);
    }

    #[test]
    fn diff_finds_the_vanished_slow_peak() {
        let before = data("app", 10, &[0, 0, 0, 50, 200, 30, 0, 0, 0, 0, 20, 60, 10]);
        let after = data("app", 11, &[0, 0, 0, 55, 210, 35]);
        let d = diff(&before, &after);
        assert_eq!(d[0].op, "func:take", "ranked first: it changed");
        assert!(d[0].emd.unwrap() > 1.0);
        assert_eq!(d[1].emd, Some(0.0));
        match &d[0].changes[..] {
            [PeakChange::Vanished(p)] => assert_eq!((p.lo_slot, p.hi_slot, p.count), (10, 12, 90)),
            other => panic!("{other:?}"),
        }
        // Reversed: it appears.
        let d = diff(&after, &before);
        assert!(matches!(&d[0].changes[..], [PeakChange::Appeared(_)]));
    }

    #[test]
    fn a_shifted_peak_moved() {
        let a = data("app", 1, &[0, 0, 10, 100, 10]);
        let b = data("app", 1, &[0, 0, 0, 0, 10, 100, 10]);
        let d = diff(&a, &b);
        assert!((d[0].emd.unwrap() - 2.0).abs() < 1e-9);
        match &d[0].changes[..] {
            [PeakChange::Moved { from, to }] => assert_eq!((from.mode_slot, to.mode_slot), (3, 5)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_peak_whose_top_bucket_flips_to_its_neighbour_stayed() {
        // Calls of 3.9 vs 4.1 µs: the highest bucket changes, the peak does not.
        let a = data("app", 1, &[0, 0, 10, 60, 50]);
        let b = data("app", 1, &[0, 0, 10, 50, 60]);
        let d = diff(&a, &b);
        assert!(d[0].changes.is_empty(), "{:?}", d[0].changes);
    }
}
