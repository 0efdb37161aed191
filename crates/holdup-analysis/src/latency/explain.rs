//! The first level of DARC's root-cause path of a peak: where the time of
//! the calls in the peak went — on a CPU, or off it waiting for I/O, for a
//! lock (futex), for a CPU (preempted) or for something else. The kernel
//! splits each call's time by these causes and adds it to the call's bucket,
//! so a peak's split is the sum over its buckets.

use super::{Operation, Peak};
use holdup_trace::latency::CAUSES;

/// The name of on-CPU time in a path.
pub const ON_CPU: &str = "on-cpu";

#[derive(Clone, Debug, PartialEq)]
pub struct PeakCauses {
    pub peak: Peak,
    /// (cause, ns, share of the peak's time), largest first; on-CPU time
    /// is `ON_CPU`.
    pub causes: Vec<(&'static str, u64, f64)>,
}

impl PeakCauses {
    /// The path from the operation down: the operation itself (all of the
    /// peak), then the cause that holds most of it.
    pub fn path(&self, op: &str) -> Vec<(String, f64)> {
        let mut path = vec![(op.to_string(), 1.0)];
        if let Some(&(cause, _, share)) = self.causes.first() {
            path.push((cause.to_string(), share));
        }
        path
    }
}

/// Causes of every peak of `op`; `None` when the recording has no causes.
pub fn explain(op: &Operation) -> Option<Vec<PeakCauses>> {
    let h = &op.hist;
    if h.cause_ns.len() != CAUSES.len() {
        return None;
    }
    Some(
        op.peaks
            .iter()
            .map(|p| {
                let sum = |v: &[u64]| -> u64 {
                    v.get(p.lo_slot..=p.hi_slot).map_or(0, |s| s.iter().sum())
                };
                let total = sum(&h.ns);
                let mut causes: Vec<(&'static str, u64, f64)> = CAUSES
                    .iter()
                    .zip(&h.cause_ns)
                    .map(|(&name, v)| (name, sum(v).min(total), 0.0))
                    .collect();
                let off: u64 = causes.iter().map(|c| c.1).sum();
                causes.push((ON_CPU, total.saturating_sub(off), 0.0));
                for c in &mut causes {
                    c.2 = if total > 0 {
                        c.1 as f64 / total as f64
                    } else {
                        0.0
                    };
                }
                causes.retain(|c| c.1 > 0);
                causes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
                PeakCauses {
                    peak: p.clone(),
                    causes,
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::{find_peaks, Histogram};

    #[test]
    fn each_peak_splits_into_its_causes() {
        // Fast calls on CPU; slow calls mostly waiting for I/O.
        let mut count = vec![0; 12];
        let mut ns = vec![0; 12];
        let mut causes = vec![vec![0; 12]; 4];
        count[3] = 100;
        ns[3] = 1000;
        count[10] = 50;
        ns[10] = 60_000;
        causes[0][10] = 45_000; // iowait
        causes[2][10] = 5_000; // preempted
        causes[2][3] = 100;
        let hist = Histogram {
            count,
            ns,
            cause_ns: causes,
        };
        let op = Operation {
            op: "syscall:read".into(),
            pid: 1,
            comm: "r".into(),
            peaks: find_peaks(&hist),
            hist,
            steps: Vec::new(),
        };
        let e = explain(&op).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].causes[0].0, ON_CPU);
        assert!((e[0].causes[0].2 - 0.9).abs() < 1e-9);
        assert_eq!(e[1].causes[0], ("iowait", 45_000, 0.75));
        assert_eq!(e[1].causes[1].0, ON_CPU);
        assert_eq!(e[1].path("syscall:read")[1], ("iowait".to_string(), 0.75));
        let sum: f64 = e[1].causes.iter().map(|c| c.2).sum();
        assert!((sum - 1.0).abs() < 1e-9);
    }
}
