//! `holdup waitgraph --json`: schema `holdup.waitgraph/1` (docs/design.md). The
//! contract fields come first in each object; the rest are additions.

use crate::advice;
use holdup_analysis::waitgraph::{Edge, StackInfo, WaitGraph};
use holdup_trace::Class;
use serde_json::{json, Value};

fn stacks(v: &[StackInfo]) -> Value {
    Value::Array(
        v.iter()
            .map(|s| {
                json!({
                    "stack": s.folded,
                    "short": s.short,
                    "site": s.site,
                    "reason": s.reason,
                    "samples": s.samples,
                })
            })
            .collect(),
    )
}

fn classes(e: &Edge) -> Value {
    let mut m = serde_json::Map::new();
    for c in [Class::Io, Class::Lock, Class::Other] {
        m.insert(c.name().to_string(), json!(e.class_ns[c.index()]));
    }
    Value::Object(m)
}

pub fn to_json(g: &WaitGraph) -> Value {
    let id = |n: usize| g.nodes[n].id.clone();
    let pair = |e: usize| json!({ "from": id(g.edges[e].from), "to": id(g.edges[e].to) });
    let mut v = json!({
        "schema": "holdup.waitgraph/1",
        "duration_ns": g.duration_ns,
        "events": g.events(),
        "period_ns": g.period_ns,
        "threshold_ns": g.threshold_ns,
        "nodes": g.nodes.iter().map(|n| json!({
            "id": n.id,
            "kind": n.kind,
            "label": n.label,
            "tids": n.tids,
            "cpu_ns": n.cpu_ns,
            "runnable_ns": n.runnable_ns,
            "wait_ns": n.wait_ns,
            "comm": n.comm,
            "pids": n.pids,
            "recorded": n.recorded,
            "short_lived": n.short_lived,
            "requests": n.requests,
            "bytes": n.bytes,
        })).collect::<Vec<_>>(),
        "edges": g.edges.iter().map(|e| json!({
            "from": id(e.from),
            "to": id(e.to),
            "weight_ns": e.weight_ns,
            "wait_ns": e.wait_ns,
            "stacks": e.stacks.iter().map(|s| s.folded.clone()).collect::<Vec<_>>(),
            "kind": e.kind,
            "count": e.count,
            "class_ns": classes(e),
            "share": e.share,
            "stack_details": stacks(&e.stacks),
            "waker_stacks": stacks(&e.waker_stacks),
            "waited_for": e.held.as_ref().map(|h| json!({
                "samples": h.samples,
                "summary": super::meanwhile(e, 5),
                "activities": h.activities,
            })),
        })).collect::<Vec<_>>(),
        "knots": g.knots.iter().map(|k| json!({
            "kind": k.kind,
            "nodes": k.nodes.iter().map(|&n| id(n)).collect::<Vec<_>>(),
            "background": k.background,
            "cpu_bound": k.cpu_bound,
            "unrecorded": k.unrecorded,
            "edges": k.edges.iter().map(|&e| pair(e)).collect::<Vec<_>>(),
            "refined_from": k.refined_from.as_ref().map(|v| v.iter().map(|&n| id(n)).collect::<Vec<_>>()),
            "trimmed": k.trimmed.iter().map(|&e| pair(e)).collect::<Vec<_>>(),
            "cpu_ns": k.cpu_ns,
            "runnable_ns": k.runnable_ns,
            "wait_ns": k.wait_ns,
            "weight_ns": k.weight_ns,
            "advice": advice::knot(g, k).to_string(),
            "why": super::why(g, &super::text::knot_waits(g, k)),
        })).collect::<Vec<_>>(),
        "notes": g.notes,
        "stats": {
            "segments": g.stats.segments,
            "wakeups": g.stats.wakeups,
            "samples": g.stats.samples,
            "bio": g.stats.bio,
            "waits_without_waker": g.stats.waits_without_waker,
            "long_segments": g.stats.long_segments,
            "long_ns": g.stats.long_ns,
            "late_events": g.stats.late_events,
            "cycles": g.stats.cycles,
            "lost_events": g.stats.lost_events,
            "light_edges": g.stats.light_edges,
        },
    });
    if !g.stats.dropped.is_empty() {
        let dropped: serde_json::Map<String, Value> = g
            .stats
            .dropped
            .iter()
            .map(|(w, n)| (w.clone(), Value::from(*n)))
            .collect();
        v["stats"]["dropped"] = Value::Object(dropped);
    }
    v
}
