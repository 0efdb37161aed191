//! DARC's root-cause path of a peak. The first level is where the time of
//! the calls in the peak went — on a CPU, or off it waiting for I/O, for a
//! lock (futex), for a CPU (preempted) or for something else, or taken by
//! hard interrupts or softirqs while on the CPU (DARC §3.6): the kernel
//! splits each call's time by these causes and adds it to the call's
//! bucket, so a peak's split is the sum over its buckets.
//!
//! Below a user function whose callees were timed, the path descends: the
//! recorder summed each callee's time (and its causes) inside the root's
//! calls per bucket of the root, so a peak's time splits into its callees
//! plus the function's own time by cause. Latencies are additive (DARC
//! §3): the path goes to the largest of these, and on into that callee's
//! callees, until a function's own time (a cause) outweighs each callee.
//! DARC decides by counting (its maxcount): at each root call's return
//! the recorder marked, below every node, the path that contributed most
//! to that call — the largest timed callee, or the node's own time when
//! that was larger — so the path goes to the callee that was largest in
//! most of the peak's calls, or ends in the function's own time when that
//! was largest in more of them. Recordings without these counts are
//! decided by the sums. Each level's share of the peak's time comes from
//! the sums either way.

use super::{Operation, Peak};
use holdup_trace::latency::{CallPath, LatencyData, WaitSite};
use std::collections::{BTreeMap, HashSet};

/// The name of on-CPU time in a path.
pub use holdup_trace::latency::causes::ON_CPU;

#[derive(Clone, Debug, PartialEq)]
pub struct PeakCauses {
    pub peak: Peak,
    /// (cause, ns, share of the peak's time), largest first; on-CPU time
    /// is `ON_CPU`.
    pub causes: Vec<(String, u64, f64)>,
    /// The root-cause path from the operation down: the operation, callee
    /// functions, and last a cause.
    pub path: Vec<PathStep>,
}

/// One level of a root-cause path.
#[derive(Clone, Debug, PartialEq)]
pub struct PathStep {
    pub frame: String,
    /// Of the peak's time.
    pub share: f64,
    /// Of the peak's calls, those in which this level was the largest
    /// contributor below the previous one (DARC's maxcount), where the
    /// recording counted them.
    pub largest_in: Option<u64>,
}

impl PathStep {
    fn new(frame: impl Into<String>, share: f64, largest_in: Option<u64>) -> Self {
        PathStep {
            frame: frame.into(),
            share,
            largest_in,
        }
    }
}

/// Time within a peak: total, and by cause (the recording's columns).
#[derive(Clone, Debug, Default)]
struct Time {
    ns: u64,
    cause_ns: Vec<u64>,
    /// Calls in which this path was the largest below its caller, and in
    /// which its own time was the largest below it.
    largest: u64,
    own_largest: u64,
}

impl Time {
    fn add(&mut self, ns: u64, cause_ns: &[u64]) {
        self.ns += ns;
        if self.cause_ns.len() < cause_ns.len() {
            self.cause_ns.resize(cause_ns.len(), 0);
        }
        for (m, t) in self.cause_ns.iter_mut().zip(cause_ns) {
            *m += t;
        }
    }

    /// Time by cause, and the rest on a CPU, as (name, ns); `names` names
    /// the cause columns.
    fn split<'a>(&self, names: &'a [String]) -> Vec<(&'a str, u64)> {
        let mut out: Vec<(&str, u64)> = names
            .iter()
            .zip(&self.cause_ns)
            .map(|(name, &ns)| (name.as_str(), ns.min(self.ns)))
            .collect();
        let off: u64 = out.iter().map(|c| c.1).sum();
        out.push((ON_CPU, self.ns.saturating_sub(off)));
        out
    }
}

/// Causes and root-cause path of every peak of `op`; `None` when the
/// recording has no causes. The recording's call-path times and wait
/// sites, where it has them, take the path further down.
pub fn explain(op: &Operation, data: &LatencyData) -> Option<Vec<PeakCauses>> {
    let h = &op.hist;
    if h.cause_ns.is_empty() {
        return None;
    }
    Some(
        op.peaks
            .iter()
            .map(|p| {
                let sum = |v: &[u64]| -> u64 {
                    v.get(p.lo_slot..=p.hi_slot).map_or(0, |s| s.iter().sum())
                };
                let root = Time {
                    ns: sum(&h.ns),
                    cause_ns: h.cause_ns.iter().map(|v| sum(v)).collect(),
                    ..Default::default()
                };
                let share = |ns: u64| share_of(ns, root.ns);
                let mut causes: Vec<(String, u64, f64)> = root
                    .split(&data.causes)
                    .into_iter()
                    .map(|(name, ns)| (name.to_string(), ns, share(ns)))
                    .collect();
                causes.retain(|c| c.1 > 0);
                causes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                PeakCauses {
                    path: descend(op, p, root, data),
                    peak: p.clone(),
                    causes,
                }
            })
            .collect(),
    )
}

/// `ns` as a share of `total` (0 when there is no total).
fn share_of(ns: u64, total: u64) -> f64 {
    if total > 0 {
        ns as f64 / total as f64
    } else {
        0.0
    }
}

/// The root-cause path of peak `p` of `op`, whose calls took `root`.
fn descend(op: &Operation, p: &Peak, root: Time, data: &LatencyData) -> Vec<PathStep> {
    let (callees, fnodes) = (&data.callees, &data.fnodes);
    let total = root.ns;
    let share = |ns: u64| share_of(ns, total);
    let mut times: BTreeMap<u32, Time> = BTreeMap::new();
    for c in callees.iter().filter(|c| {
        c.op == op.op && c.pid == op.pid && (p.lo_slot..=p.hi_slot).contains(&(c.slot as usize))
    }) {
        let t = times.entry(c.fnode).or_default();
        t.add(c.ns, &c.cause_ns);
        t.largest += c.largest;
        t.own_largest += c.own_largest;
    }
    let nodes: Vec<&CallPath> = fnodes.iter().filter(|n| n.op == op.op).collect();
    let mut path = vec![PathStep::new(&op.op, 1.0, None)];
    let mut node_id = nodes.iter().find(|n| n.parent.is_none()).map(|n| n.id);
    // The root's own row carries only its counts; its time is the peak's.
    let mut node = Time {
        own_largest: node_id
            .and_then(|id| times.get(&id))
            .map_or(0, |t| t.own_largest),
        ..root
    };
    let mut visited = HashSet::new();
    loop {
        // The callees with time in this peak, and the function's own time:
        // its time less its callees', by cause.
        let kids: Vec<(&CallPath, &Time)> = match node_id {
            Some(id) if visited.insert(id) => nodes
                .iter()
                .filter(|n| n.parent == Some(id))
                .filter_map(|n| Some((*n, times.get(&n.id)?)))
                .collect(),
            _ => Vec::new(),
        };
        let mut own = node.clone();
        for (_, t) in &kids {
            own.ns = own.ns.saturating_sub(t.ns);
            for (o, c) in own.cause_ns.iter_mut().zip(&t.cause_ns) {
                *o = o.saturating_sub(*c);
            }
        }
        let best_cause = own
            .split(&data.causes)
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)));
        // DARC's decision where the recording counted the largest
        // contributor per call; the sums otherwise.
        let counted = node.own_largest > 0 || kids.iter().any(|(_, t)| t.largest > 0);
        let best_kid = kids.iter().max_by(|a, b| {
            let by_count = if counted {
                a.1.largest.cmp(&b.1.largest)
            } else {
                std::cmp::Ordering::Equal
            };
            by_count
                .then(a.1.ns.cmp(&b.1.ns))
                .then_with(|| b.0.func.cmp(&a.0.func))
        });
        let goes_down = |t: &Time, cause_ns: u64| {
            if counted {
                t.largest > node.own_largest
            } else {
                t.ns > cause_ns
            }
        };
        let count = |n: u64| counted.then_some(n);
        match (best_kid, best_cause) {
            (Some((n, t)), c) if goes_down(t, c.map_or(0, |c| c.1)) => {
                path.push(PathStep::new(&n.func, share(t.ns), count(t.largest)));
                node_id = Some(n.id);
                node = (*t).clone();
            }
            (_, Some((cause, ns))) if ns > 0 => {
                path.push(PathStep::new(cause, share(ns), count(node.own_largest)));
                if let Some((site, ns)) = wait_site(op, p, cause, &data.wait_sites) {
                    path.push(PathStep::new(site, share(ns), None));
                }
                break;
            }
            _ => break,
        }
    }
    path
}

/// The kernel function below the scheduler where the calls of peak `p`
/// spent most of their `cause` time, with that time (wait sites are
/// recorded for system calls).
fn wait_site(op: &Operation, p: &Peak, cause: &str, sites: &[WaitSite]) -> Option<(String, u64)> {
    let mut by_reason: BTreeMap<&str, u64> = BTreeMap::new();
    for s in sites.iter().filter(|s| {
        s.op == op.op
            && s.pid == op.pid
            && s.cause == cause
            && (p.lo_slot..=p.hi_slot).contains(&(s.slot as usize))
    }) {
        *by_reason.entry(s.frames.first()?.as_str()).or_default() += s.ns;
    }
    by_reason
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(r, ns)| (r.to_string(), ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::{find_peaks, Histogram};
    use holdup_trace::latency::CalleeTime;

    /// A recording with the four off-CPU cause columns.
    fn off_cpu_causes() -> LatencyData {
        LatencyData {
            causes: ["iowait", "futex_wait", "preempted", "blocked"]
                .map(String::from)
                .to_vec(),
            ..Default::default()
        }
    }

    /// An operation of `slots` buckets: (slot, calls, ns) and
    /// (cause, slot, ns) filled in, its peaks found.
    fn operation(
        name: &str,
        slots: usize,
        buckets: &[(usize, u64, u64)],
        causes: &[(usize, usize, u64)],
    ) -> Operation {
        let mut hist = Histogram {
            count: vec![0; slots],
            ns: vec![0; slots],
            cause_ns: vec![vec![0; slots]; 4],
        };
        for &(slot, calls, ns) in buckets {
            hist.count[slot] = calls;
            hist.ns[slot] = ns;
        }
        for &(cause, slot, ns) in causes {
            hist.cause_ns[cause][slot] = ns;
        }
        Operation {
            op: name.into(),
            pid: 1,
            comm: "w".into(),
            peaks: find_peaks(&hist),
            hist,
            steps: Vec::new(),
        }
    }

    #[test]
    fn each_peak_splits_into_its_causes() {
        // Fast calls on CPU; slow calls mostly waiting for I/O.
        let op = operation(
            "syscall:read",
            12,
            &[(3, 100, 1000), (10, 50, 60_000)],
            // iowait and preempted
            &[(0, 10, 45_000), (2, 10, 5_000), (2, 3, 100)],
        );
        let e = explain(&op, &off_cpu_causes()).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].causes[0].0, ON_CPU);
        assert!((e[0].causes[0].2 - 0.9).abs() < 1e-9);
        assert_eq!(e[1].causes[0], ("iowait".to_string(), 45_000, 0.75));
        assert_eq!(e[1].causes[1].0, ON_CPU);
        assert_eq!(e[1].path[1], PathStep::new("iowait", 0.75, None));
        let sum: f64 = e[1].causes.iter().map(|c| c.2).sum();
        assert!((sum - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_path_descends_into_the_callee_that_makes_the_peak() {
        // handle() calls parse() (every call, 300 us) and store(); store()
        // calls flush() in one call of eight, which sleeps 2 ms.
        let op = operation(
            "func:handle",
            24,
            &[(18, 700, 700 * 330_000), (21, 100, 100 * 2_340_000)],
            &[(3, 21, 100 * 2_000_000)],
        );
        // spin() is called by both parse() and store(): one call path each.
        let node = |id: u32, parent: Option<u32>, func: &str| CallPath {
            op: "func:handle".into(),
            id,
            parent,
            func: func.into(),
        };
        let fnodes = [
            node(0, None, "handle"),
            node(1, Some(0), "parse"),
            node(2, Some(0), "store"),
            node(3, Some(2), "flush"),
            node(4, Some(1), "spin"),
            node(5, Some(2), "spin"),
        ];
        let time = |fnode: u32, slot: u32, calls: u64, ns: u64, blocked: u64| CalleeTime {
            op: "func:handle".into(),
            pid: 1,
            fnode,
            slot,
            calls,
            ns,
            cause_ns: vec![0, 0, 0, blocked],
            ..Default::default()
        };
        let callees = [
            time(1, 18, 700, 700 * 300_000, 0),
            time(4, 18, 700, 700 * 290_000, 0),
            time(2, 18, 700, 700 * 20_000, 0),
            time(5, 18, 700, 700 * 20_000, 0),
            time(1, 21, 100, 100 * 300_000, 0),
            time(4, 21, 100, 100 * 290_000, 0),
            time(2, 21, 100, 100 * 2_030_000, 100 * 2_000_000),
            time(5, 21, 100, 100 * 20_000, 0),
            time(3, 21, 100, 100 * 2_010_000, 100 * 2_000_000),
        ];
        let data = LatencyData {
            callees: callees.to_vec(),
            fnodes: fnodes.to_vec(),
            ..off_cpu_causes()
        };
        let e = explain(&op, &data).unwrap();
        let frames =
            |i: usize| -> Vec<&str> { e[i].path.iter().map(|f| f.frame.as_str()).collect() };
        assert_eq!(frames(0), ["func:handle", "parse", "spin", ON_CPU]);
        assert!(
            (e[0].path[2].share - 290.0 / 330.0).abs() < 1e-9,
            "one call path's time only"
        );
        assert_eq!(frames(1), ["func:handle", "store", "flush", "blocked"]);
        let p = &e[1].path;
        assert!((p[1].share - 2_030.0 / 2_340.0).abs() < 1e-9);
        assert!((p[2].share - 2_010.0 / 2_340.0).abs() < 1e-9);
        assert!((p[3].share - 2_000.0 / 2_340.0).abs() < 1e-9);
        assert!(p.iter().all(|s| s.largest_in.is_none()), "no counts: sums");
        // Without callee times the path stops at the first level.
        let e = explain(&op, &off_cpu_causes()).unwrap();
        assert_eq!(e[1].path[1].frame, "blocked");
    }

    #[test]
    fn the_callee_largest_in_most_calls_wins_over_the_largest_sum() {
        // One peak of 100 calls of handle(): in 70 of them a() takes 0.7 ms
        // and b() 0.5 ms; in 30, a() 0.1 ms and b() 1.9 ms. b() has the
        // larger sum, a() is the larger contributor in most calls (DARC).
        let op = operation(
            "func:handle",
            24,
            &[(20, 100, 70 * 1_250_000 + 30 * 2_050_000)],
            &[],
        );
        let node = |id: u32, parent: Option<u32>, func: &str| CallPath {
            op: "func:handle".into(),
            id,
            parent,
            func: func.into(),
        };
        let time = |fnode: u32, ns: u64, largest: u64, own_largest: u64| CalleeTime {
            op: "func:handle".into(),
            pid: 1,
            fnode,
            slot: 20,
            calls: 100,
            ns,
            cause_ns: vec![0; 4],
            largest,
            own_largest,
        };
        let data = LatencyData {
            fnodes: vec![
                node(0, None, "handle"),
                node(1, Some(0), "a"),
                node(2, Some(0), "b"),
            ],
            callees: vec![
                time(0, 0, 0, 0),
                time(1, 70 * 700_000 + 30 * 100_000, 70, 70),
                time(2, 70 * 500_000 + 30 * 1_900_000, 30, 30),
            ],
            ..off_cpu_causes()
        };
        let e = explain(&op, &data).unwrap();
        let p = &e[0].path;
        assert_eq!(p[1].frame, "a", "{p:?}");
        assert_eq!(p[1].largest_in, Some(70));
        assert!((p[1].share - 52.0 / 149.0).abs() < 1e-9, "{p:?}");
        assert_eq!(p[2], PathStep::new(ON_CPU, 52.0 / 149.0, Some(70)));
        // The same sums without the counts go to b().
        let mut sums = data.clone();
        for c in &mut sums.callees {
            (c.largest, c.own_largest) = (0, 0);
        }
        assert_eq!(explain(&op, &sums).unwrap()[0].path[1].frame, "b");
        // A function's own time that was larger in most calls ends the path.
        let mut own = data;
        own.callees[0].own_largest = 80;
        let p = &explain(&op, &own).unwrap()[0].path;
        assert_eq!(p[1].frame, ON_CPU, "{p:?}");
        assert_eq!(p[1].largest_in, Some(80));
    }
}
