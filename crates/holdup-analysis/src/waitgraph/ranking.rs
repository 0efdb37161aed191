//! The knots and sinks of a finished wait-for graph, ranked: light edges
//! set aside, knots found and refined (knots.rs), background knots marked,
//! CPU-bound threads added as sinks, most important first.

use super::knots::{find_knots, KnotGraph};
use super::*;

/// Knots and sinks, most important first, and the number of edges too
/// light to matter that were ignored while finding them.
pub(super) fn knots_of(
    nodes: &[Node],
    edges: &[Edge],
    spans: &[u64],
    duration: u64,
    threshold: u64,
) -> (Vec<Knot>, u64) {
    // A stray wakeup makes an edge out of what would be a knot and hides
    // it. An edge under 1% of the recording and under 5% of its source's
    // heaviest edge cannot be a bottleneck (its weight bounds what
    // optimizing it could gain, wPerf §3.2.2): leave it out.
    let mut heaviest = vec![0u64; nodes.len()];
    for e in edges {
        heaviest[e.from] = heaviest[e.from].max(e.weight_ns);
    }
    let keep: Vec<usize> = (0..edges.len())
        .filter(|&i| {
            let e = &edges[i];
            !(e.weight_ns.saturating_mul(100) < duration
                && e.weight_ns.saturating_mul(20) < heaviest[e.from])
        })
        .collect();
    let ignored = (edges.len() - keep.len()) as u64;
    let g = KnotGraph {
        n: nodes.len(),
        edges: keep
            .iter()
            .map(|&i| {
                let e = &edges[i];
                (
                    e.from,
                    e.to,
                    e.weight_ns.max(if e.wait_ns > 0 { 1 } else { 0 }),
                )
            })
            .collect(),
    };
    // Sums and products of times in 128 bits: a crafted trace's times may
    // be anywhere in 64.
    let span = |c: &[usize]| c.iter().map(|&v| spans[v]).max().unwrap_or(duration).max(1) as u128;
    let has_device = |c: &[usize]| c.iter().any(|&v| nodes[v].kind == NodeKind::Device);
    let cpu = |c: &[usize]| {
        c.iter()
            .map(|&v| nodes[v].cpu_ns)
            .fold(0u64, u64::saturating_add)
    };
    let demand = |c: &[usize]| {
        c.iter()
            .map(|&v| nodes[v].cpu_ns as u128 + nodes[v].runnable_ns as u128)
            .sum::<u128>()
    };
    let threads = |c: &[usize]| {
        c.iter()
            .map(|&v| nodes[v].tids.len().max(1) as u128)
            .sum::<u128>()
    };
    let is_sink = |c: &[usize], es: &[usize]| {
        c.len() == 1 && !es.iter().any(|&e| g.edges[e].0 == g.edges[e].1)
    };
    let background = |c: &[usize], es: &[usize]| {
        let thready = c
            .iter()
            .all(|&v| matches!(nodes[v].kind, NodeKind::Thread | NodeKind::Group));
        if !thready || has_device(c) {
            return false;
        }
        if is_sink(c, es) {
            // A thread that waits on nothing named and barely runs: idle.
            demand(c) * 2 < span(c) * threads(c)
        } else {
            // wPerf's test is CPU time below one core; time spent runnable
            // counts too, or any knot starved by other processes' load
            // would look like background threads.
            demand(c) < span(c)
        }
    };
    let unrecorded = |c: &[usize]| c.len() == 1 && !nodes[c[0]].recorded;
    // Threads paced by sleeps and timeouts wait on the timer; like
    // background threads, they are reported and set aside, so that what
    // they hid (a knot whose members sometimes sleep) comes out.
    let timer = |c: &[usize]| c.len() == 1 && nodes[c[0]].id == "timer";
    let aside = |c: &[usize], es: &[usize]| unrecorded(c) || timer(c) || background(c, es);
    let mut raw = find_knots(&g, threshold, &aside);
    for k in &mut raw {
        for e in k.edges.iter_mut().chain(k.trimmed.iter_mut()) {
            *e = keep[*e];
        }
    }
    // Threads first, then devices and interrupts.
    let rank = |v: usize| {
        (nodes[v].kind == NodeKind::Thread || nodes[v].kind == NodeKind::Group) as u8 ^ 1
    };
    let mut knots: Vec<Knot> = raw
        .into_iter()
        .map(|mut k| {
            k.nodes.sort_by_key(|&v| (rank(v), v));
            // Edge ids are the graph's again here.
            let sink = k.nodes.len() == 1 && !k.edges.iter().any(|&e| edges[e].from == edges[e].to);
            Knot {
                kind: if sink { KnotKind::Sink } else { KnotKind::Knot },
                background: k.aside && !unrecorded(&k.nodes),
                unrecorded: unrecorded(&k.nodes),
                cpu_bound: false,
                cpu_ns: cpu(&k.nodes),
                runnable_ns: k
                    .nodes
                    .iter()
                    .map(|&v| nodes[v].runnable_ns)
                    .fold(0, u64::saturating_add),
                wait_ns: k
                    .nodes
                    .iter()
                    .map(|&v| nodes[v].wait_ns)
                    .fold(0, u64::saturating_add),
                weight_ns: k
                    .edges
                    .iter()
                    .map(|&e| edges[e].weight_ns)
                    .fold(0, u64::saturating_add),
                nodes: k.nodes,
                edges: k.edges,
                refined_from: k.refined_from,
                trimmed: k.trimmed,
            }
        })
        .collect();
    add_cpu_bound(nodes, spans, duration, &mut knots);
    // CPU-bound threads first, then knots before sinks, set-aside ones
    // last; heavier first.
    knots.sort_by_key(|k| {
        let rank = match (k.background || k.unrecorded, k.kind) {
            _ if k.cpu_bound => 0,
            (false, KnotKind::Knot) => 1,
            (false, KnotKind::Sink) => 2,
            (true, _) => 3,
        };
        (
            rank,
            std::cmp::Reverse(k.weight_ns.max(k.cpu_ns)),
            k.nodes.clone(),
        )
    });
    (knots, ignored)
}

/// A thread that runs or waits for a core nearly all its life is a sink
/// whose resource is the CPU (wPerf §3: a vertex that waits for nobody),
/// even when a few stray waits put it in a cycle, as a server's brief
/// waits for its clients do. It is the bottleneck that comes first.
fn add_cpu_bound(nodes: &[Node], spans: &[u64], duration: u64, knots: &mut Vec<Knot>) {
    for (v, n) in nodes.iter().enumerate() {
        if n.kind != NodeKind::Thread || !n.recorded || !is_saturated(n, spans[v], duration) {
            continue;
        }
        let own = knots
            .iter()
            .position(|k| k.kind == KnotKind::Sink && k.nodes == [v]);
        let mut knot = match own {
            Some(i) => knots.remove(i),
            None => Knot {
                kind: KnotKind::Sink,
                nodes: vec![v],
                edges: Vec::new(),
                background: false,
                unrecorded: false,
                cpu_bound: true,
                refined_from: None,
                trimmed: Vec::new(),
                cpu_ns: n.cpu_ns,
                runnable_ns: n.runnable_ns,
                wait_ns: n.wait_ns,
                weight_ns: 0,
            },
        };
        knot.background = false;
        knot.cpu_bound = true;
        knots.push(knot);
    }
}

/// Running or runnable more than 90% of its life, and alive for at least a
/// tenth of the recording (a short burst is not a bottleneck).
fn is_saturated(n: &Node, span: u64, duration: u64) -> bool {
    let busy = n.cpu_ns.saturating_add(n.runnable_ns);
    let life = busy.saturating_add(n.wait_ns);
    crate::is_cpu_bound(busy, life) && life.max(span) as u128 * 10 >= duration as u128
}
