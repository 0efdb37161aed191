//! `holdup waitgraph --json`: schema `holdup.waitgraph/1` (docs/design.md).
//!
//! Written straight from the graph through views that borrow it, not
//! built as a `serde_json::Value` first (a map per object, a string per
//! key: as much work as the writing, on a large graph). Each object's keys
//! are in the order of their names, the order the output has always had:
//! the fields of every view below are declared in it.

use crate::advice;
use holdup_analysis::holder::{Activity, RowHeld, Via};
use holdup_analysis::waitgraph::{
    Edge, EdgeKind, Knot, KnotKind, Node, NodeKind, StackInfo, Stats, WaitGraph,
};
use holdup_trace::Class;
use serde::Serialize;
use std::collections::BTreeMap;

/// Write the graph as pretty-printed JSON.
pub fn write_json(out: impl std::io::Write, g: &WaitGraph) -> serde_json::Result<()> {
    serde_json::to_writer_pretty(out, &GraphView::of(g))
}

#[derive(Serialize)]
struct GraphView<'a> {
    duration_ns: u64,
    edges: Vec<EdgeView<'a>>,
    events: u64,
    knots: Vec<KnotView<'a>>,
    nodes: Vec<NodeView<'a>>,
    notes: &'a [String],
    period_ns: u64,
    schema: &'static str,
    stats: StatsView<'a>,
    threshold_ns: u64,
}

impl<'a> GraphView<'a> {
    fn of(g: &'a WaitGraph) -> Self {
        GraphView {
            duration_ns: g.duration_ns,
            edges: g.edges.iter().map(|e| EdgeView::of(g, e)).collect(),
            events: g.events(),
            knots: g.knots.iter().map(|k| KnotView::of(g, k)).collect(),
            nodes: g.nodes.iter().map(NodeView::of).collect(),
            notes: &g.notes,
            period_ns: g.period_ns,
            schema: "holdup.waitgraph/1",
            stats: StatsView::of(&g.stats),
            threshold_ns: g.threshold_ns,
        }
    }
}

#[derive(Serialize)]
struct NodeView<'a> {
    bytes: u64,
    comm: &'a str,
    cpu_ns: u64,
    id: &'a str,
    kind: NodeKind,
    label: &'a str,
    pids: &'a [u32],
    recorded: bool,
    requests: u64,
    runnable_ns: u64,
    short_lived: bool,
    tids: &'a [u32],
    wait_ns: u64,
}

impl<'a> NodeView<'a> {
    fn of(n: &'a Node) -> Self {
        NodeView {
            bytes: n.bytes,
            comm: &n.comm,
            cpu_ns: n.cpu_ns,
            id: &n.id,
            kind: n.kind,
            label: &n.label,
            pids: &n.pids,
            recorded: n.recorded,
            requests: n.requests,
            runnable_ns: n.runnable_ns,
            short_lived: n.short_lived,
            tids: &n.tids,
            wait_ns: n.wait_ns,
        }
    }
}

/// Raw waiting time by subclass (the subclasses an edge can carry).
#[derive(Serialize)]
struct ClassNs {
    io: u64,
    lock: u64,
    other: u64,
}

#[derive(Serialize)]
struct EdgeView<'a> {
    class_ns: ClassNs,
    count: u64,
    from: &'a str,
    kind: EdgeKind,
    share: f64,
    stack_details: Vec<StackView<'a>>,
    stacks: Vec<&'a str>,
    to: &'a str,
    wait_ns: u64,
    waited_for: Option<HeldView<'a>>,
    waker_stacks: Vec<StackView<'a>>,
    weight_ns: u64,
}

impl<'a> EdgeView<'a> {
    fn of(g: &'a WaitGraph, e: &'a Edge) -> Self {
        let ns = |c: Class| e.class_ns[c.index()];
        EdgeView {
            class_ns: ClassNs {
                io: ns(Class::Io),
                lock: ns(Class::Lock),
                other: ns(Class::Other),
            },
            count: e.count,
            from: &g.nodes[e.from].id,
            kind: e.kind,
            share: e.share,
            stack_details: e.stacks.iter().map(StackView::of).collect(),
            stacks: e.stacks.iter().map(|s| s.folded.as_str()).collect(),
            to: &g.nodes[e.to].id,
            wait_ns: e.wait_ns,
            waited_for: e.held.as_ref().map(|h| HeldView::of(e, h)),
            waker_stacks: e.waker_stacks.iter().map(StackView::of).collect(),
            weight_ns: e.weight_ns,
        }
    }
}

#[derive(Serialize)]
struct StackView<'a> {
    reason: Option<&'a str>,
    samples: u64,
    short: &'a str,
    site: Option<&'a str>,
    stack: &'a str,
}

impl<'a> StackView<'a> {
    fn of(s: &'a StackInfo) -> Self {
        StackView {
            reason: s.reason.as_deref(),
            samples: s.samples,
            short: &s.short,
            site: s.site.as_deref(),
            stack: &s.folded,
        }
    }
}

#[derive(Serialize)]
struct HeldView<'a> {
    activities: Vec<ActivityView<'a>>,
    samples: f64,
    summary: Option<String>,
}

impl<'a> HeldView<'a> {
    fn of(e: &'a Edge, h: &'a RowHeld) -> Self {
        HeldView {
            activities: h.activities.iter().map(ActivityView::of).collect(),
            samples: h.samples,
            summary: super::meanwhile(e, 5),
        }
    }
}

#[derive(Serialize)]
struct ActivityView<'a> {
    class: Class,
    samples: f64,
    site: Option<&'a str>,
    state: &'a str,
    thread: &'a str,
    tid: u32,
    via: Vec<ViaView<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    woken_by: Option<&'a str>,
}

impl<'a> ActivityView<'a> {
    fn of(a: &'a Activity) -> Self {
        ActivityView {
            class: a.class,
            samples: a.samples,
            site: a.site.as_deref(),
            state: a.state,
            thread: &a.thread,
            tid: a.tid,
            via: a.via.iter().map(ViaView::of).collect(),
            woken_by: a.woken_by.as_deref(),
        }
    }
}

#[derive(Serialize)]
struct ViaView<'a> {
    class: Class,
    thread: &'a str,
    tid: u32,
}

impl<'a> ViaView<'a> {
    fn of(v: &'a Via) -> Self {
        ViaView {
            class: v.class,
            thread: &v.thread,
            tid: v.tid,
        }
    }
}

/// An edge of a knot, by the ids of its ends.
#[derive(Serialize)]
struct Pair<'a> {
    from: &'a str,
    to: &'a str,
}

#[derive(Serialize)]
struct KnotView<'a> {
    advice: String,
    background: bool,
    cpu_bound: bool,
    cpu_ns: u64,
    edges: Vec<Pair<'a>>,
    kind: KnotKind,
    nodes: Vec<&'a str>,
    refined_from: Option<Vec<&'a str>>,
    runnable_ns: u64,
    trimmed: Vec<Pair<'a>>,
    unrecorded: bool,
    wait_ns: u64,
    weight_ns: u64,
    why: Option<String>,
}

impl<'a> KnotView<'a> {
    fn of(g: &'a WaitGraph, k: &'a Knot) -> Self {
        let id = |n: &usize| g.nodes[*n].id.as_str();
        let pair = |e: &usize| Pair {
            from: id(&g.edges[*e].from),
            to: id(&g.edges[*e].to),
        };
        KnotView {
            advice: advice::knot(g, k).to_string(),
            background: k.background,
            cpu_bound: k.cpu_bound,
            cpu_ns: k.cpu_ns,
            edges: k.edges.iter().map(pair).collect(),
            kind: k.kind,
            nodes: k.nodes.iter().map(id).collect(),
            refined_from: k.refined_from.as_ref().map(|v| v.iter().map(id).collect()),
            runnable_ns: k.runnable_ns,
            trimmed: k.trimmed.iter().map(pair).collect(),
            unrecorded: k.unrecorded,
            wait_ns: k.wait_ns,
            weight_ns: k.weight_ns,
            why: super::why(g, &super::text::knot_waits(g, k)),
        }
    }
}

#[derive(Serialize)]
struct StatsView<'a> {
    bio: u64,
    cycles: u64,
    /// Only when the recorder dropped something.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    dropped: BTreeMap<&'a str, u64>,
    late_events: u64,
    light_edges: u64,
    long_ns: u64,
    long_segments: u64,
    lost_events: u64,
    samples: u64,
    segments: u64,
    waits_without_waker: u64,
    wakeups: u64,
}

impl<'a> StatsView<'a> {
    fn of(s: &'a Stats) -> Self {
        StatsView {
            bio: s.bio,
            cycles: s.cycles,
            dropped: s.dropped.iter().map(|(w, n)| (w.as_str(), *n)).collect(),
            late_events: s.late_events,
            light_edges: s.light_edges,
            long_ns: s.long_ns,
            long_segments: s.long_segments,
            lost_events: s.lost_events,
            samples: s.samples,
            segments: s.segments,
            waits_without_waker: s.waits_without_waker,
            wakeups: s.wakeups,
        }
    }
}
