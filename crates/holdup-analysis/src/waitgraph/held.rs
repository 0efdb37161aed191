//! What the waited-for side did: for every wait edge of the graph, the
//! activity of the threads that ended its waits over those waits, down the
//! chain — the report's while-held attribution (see [`crate::holder`]),
//! summed per edge instead of per row, so that a knot says why it waits,
//! not only on whom.
//!
//! The graph streams the trace; this needs it whole (the chains of a wait
//! reach any thread at any time), so it is a step of its own, run on a
//! loaded trace.

use super::{EdgeKind, NodeKind, WaitGraph};
use crate::fxhash::FxHashMap;
use crate::holder::rows::{sort_activities, ActivityKey, Names};
use crate::holder::{attribute, RowHeld, Scope, Stats};
use holdup_trace::{Class, Trace, Waker};

/// The vertex of each thread: its own, or the group it was merged into.
fn vertex_of_thread(g: &WaitGraph) -> FxHashMap<u32, usize> {
    let mut by_tid: FxHashMap<u32, usize> = FxHashMap::default();
    for (i, n) in g.nodes.iter().enumerate() {
        if n.recorded && matches!(n.kind, NodeKind::Thread | NodeKind::Group) {
            for &t in &n.tids {
                by_tid.entry(t).or_insert(i);
            }
        }
    }
    // A thread seen only as a waker has a vertex with no tids: its id.
    for (i, n) in g.nodes.iter().enumerate() {
        let tid = n.id.strip_prefix("t:").and_then(|t| t.parse().ok());
        if let (NodeKind::Thread, Some(tid)) = (n.kind, tid) {
            by_tid.entry(tid).or_insert(i);
        }
    }
    by_tid
}

/// Fill in `held` of the wait edges whose waits threads ended, from the
/// loaded trace the graph was built from; notes say what could not be
/// followed.
pub fn add_holders(trace: &Trace, g: &mut WaitGraph) {
    let followed = |s: &holdup_trace::Sample| {
        s.class != Class::Cpu && matches!(s.waker, Waker::Thread(_)) && s.wake > s.time
    };
    if !trace.samples.iter().any(followed) {
        return;
    }
    let a = attribute(trace, &|_| true, Scope::Held);
    let vertex = vertex_of_thread(g);
    let edges: FxHashMap<(usize, usize), usize> = g
        .edges
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EdgeKind::Wait)
        .map(|(i, e)| ((e.from, e.to), i))
        .collect();
    let edge_of = |waiter: u32, holder: u32| {
        let (from, to) = (*vertex.get(&waiter)?, *vertex.get(&holder)?);
        edges.get(&(from, to)).copied()
    };
    // The points of every followed wait, per edge; waits the graph put on
    // another vertex (an I/O wait tied to the disk whose completion ended
    // it) are not the holder's.
    let mut per: FxHashMap<usize, (f64, FxHashMap<ActivityKey, f64>)> = FxHashMap::default();
    let mut elsewhere = 0.0;
    for s in trace.samples.iter().filter(|s| followed(s)) {
        let Waker::Thread(holder) = s.waker else {
            continue;
        };
        match edge_of(s.tid, holder) {
            Some(e) => per.entry(e).or_default().0 += f64::from(s.weight),
            None => elsewhere += f64::from(s.weight),
        }
    }
    let mut names = Names::new(trace);
    for p in &a.parts {
        let holder = a.paths.first(p.path).map_or(p.tid, |h| h.tid);
        let Some(e) = edge_of(p.waiter.tid, holder) else {
            continue;
        };
        let key = (p.path, p.tid, p.end, names.site_of(p));
        *per.entry(e).or_default().1.entry(key).or_default() += p.points;
    }
    for (e, (samples, acts)) in per {
        let mut activities: Vec<_> = acts
            .iter()
            .map(|(key, &n)| names.activity(&a, key, n))
            .collect();
        sort_activities(&mut activities);
        g.edges[e].held = Some(RowHeld {
            samples,
            activities,
            woken_at: Vec::new(),
        });
    }
    if elsewhere >= 0.5 {
        g.notes.push(format!(
            "{elsewhere:.0} samples of waits a thread ended sit on edges to devices (the wakeup came right after a request completed): what the waited-for side did is not listed for them"
        ));
    }
    // Waits interrupts ended, or nothing did, are the graph's device and
    // timer edges, not a loss here.
    let lost = Stats {
        interrupt_points: 0.0,
        open_points: 0.0,
        ..a.stats
    };
    for n in lost.notes() {
        g.notes.push(format!("what the waited-for side did: {n}"));
    }
}
