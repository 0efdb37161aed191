//! One line of advice per knot, from its shape and its stacks (wPerf §4.3:
//! blocking I/O → batch or make it asynchronous; lock contention → finer
//! locks; load imbalance → finer tasks).

use super::{cpu_bound_text, pct};
use holdup_analysis::waitgraph::{Edge, Knot, KnotKind, Node, NodeKind, WaitGraph};
use holdup_trace::Class;
use std::fmt;

/// A knot's advice: what the knot is (the headline a graph's label shows)
/// and the rest of the line (what to do, from `: ` or `; ` on, or empty).
#[derive(Clone, Debug, PartialEq)]
pub struct KnotAdvice {
    pub headline: String,
    pub rest: String,
}

impl KnotAdvice {
    fn new(headline: impl Into<String>, rest: impl Into<String>) -> Self {
        KnotAdvice {
            headline: headline.into(),
            rest: rest.into(),
        }
    }
}

impl fmt::Display for KnotAdvice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.headline, self.rest)
    }
}

fn any_stack(edges: &[Edge], es: &[usize], words: &[&str]) -> bool {
    es.iter().any(|&e| {
        edges[e].stacks.iter().any(|s| {
            let f = s.folded.to_ascii_lowercase();
            words.iter().any(|w| f.contains(w))
        })
    })
}

fn how(e: &Edge) -> String {
    match e.stacks.first() {
        Some(s) => {
            let at = s.site.as_deref().unwrap_or(&s.short);
            match &s.reason {
                Some(r) if !at.is_empty() => format!("in {at} [{r}]"),
                _ => format!("in {at}"),
            }
        }
        None => format!("{} waits", e.main_class().name()),
    }
}

const BARRIER: [&str; 4] = ["barrier", "pthread_join", "cond_wait", "cond_timedwait"];
const LOCK: [&str; 5] = [
    "mutex_lock",
    "pthread_mutex",
    "lll_lock",
    "rwlock",
    "spin_lock",
];

/// The advice for a thread saturated on its CPU.
fn cpu_bound(n: &Node) -> KnotAdvice {
    let life = n
        .cpu_ns
        .saturating_add(n.runnable_ns)
        .saturating_add(n.wait_ns);
    let (shares, rest) = cpu_bound_text(pct(n.cpu_ns, life), pct(n.runnable_ns, life));
    KnotAdvice::new(
        format!("{} is {shares}", n.label),
        format!(
            "{rest} (holdup report --tid {})",
            n.tids.first().copied().unwrap_or(0)
        ),
    )
}

/// The advice for knot `k` of `g`.
pub fn knot(g: &WaitGraph, k: &Knot) -> KnotAdvice {
    let (nodes, edges) = (&g.nodes[..], &g.edges[..]);
    if k.cpu_bound {
        return cpu_bound(&nodes[k.nodes[0]]);
    }
    let mut advice = by_shape(nodes, edges, k);
    let thready: Vec<&Node> = k
        .nodes
        .iter()
        .map(|&v| &nodes[v])
        .filter(|n| matches!(n.kind, NodeKind::Thread | NodeKind::Group))
        .collect();
    // In 128 bits: the times of a crafted trace may be anywhere in 64.
    let run: u128 = thready.iter().map(|n| n.runnable_ns as u128).sum();
    let all: u128 = thready
        .iter()
        .map(|n| n.cpu_ns as u128 + n.runnable_ns as u128 + n.wait_ns as u128)
        .sum();
    if !k.background && !k.unrecorded && all > 0 && run * 5 > all {
        advice.rest.push_str(&format!(
            "; its threads are runnable {:.0}% of the time: more cores or a higher priority would help",
            100.0 * run as f64 / all as f64
        ));
    }
    advice
}

/// What the knot's shape (a sink, a device in a cycle, merged threads, a
/// cycle of threads) and its stacks say.
fn by_shape(nodes: &[Node], edges: &[Edge], k: &Knot) -> KnotAdvice {
    let label = |v: usize| nodes[v].label.as_str();
    if k.unrecorded {
        return KnotAdvice::new(
            format!(
                "{} is outside the recording (a kernel thread or another process)",
                label(k.nodes[0])
            ),
            ": record with -a to see what it waits for",
        );
    }
    if k.kind == KnotKind::Sink && nodes[k.nodes[0]].id == "timer" {
        return KnotAdvice::new(
            "threads wait for timers (sleeps, timeouts)",
            ": set aside as pacing, not a resource; if the sleeps are in the critical path, shorten them or wake on events instead",
        );
    }
    if k.background && k.kind == KnotKind::Sink {
        return KnotAdvice::new(
            format!(
                "{} barely runs and waits for nothing else in the graph",
                label(k.nodes[0])
            ),
            ": idle, not a bottleneck",
        );
    }
    if k.background {
        return KnotAdvice::new(
            "background threads (no device, under one core of CPU)",
            ": not needed for throughput; set aside",
        );
    }
    let mut internal = k.edges.clone();
    internal.sort_by_key(|&e| std::cmp::Reverse(edges[e].weight_ns));
    if k.kind == KnotKind::Sink {
        return sink(nodes, edges, k.nodes[0]);
    }
    // A knot.
    let device = k
        .nodes
        .iter()
        .copied()
        .find(|&v| nodes[v].kind == NodeKind::Device);
    if let Some(d) = device {
        let into = internal.iter().copied().find(|&e| {
            edges[e].to == d
                && edges[e].from != d
                && matches!(
                    nodes[edges[e].from].kind,
                    NodeKind::Thread | NodeKind::Group
                )
        });
        if let Some(e) = into {
            let t = edges[e].from;
            let mut rest = format!(
                ": {} waits for {} on each request ({}) while {} waits for it: batch the I/O or make it asynchronous so that they overlap",
                label(t),
                label(d),
                how(&edges[e]),
                label(d)
            );
            // Merged workers that also wait for each other (a lock around
            // the I/O, as in group commit).
            let self_loop = internal.iter().copied().find(|&x| {
                edges[x].from == t
                    && edges[x].to == t
                    && edges[x].weight_ns.saturating_mul(2) >= edges[e].weight_ns
            });
            if let Some(x) = self_loop {
                rest.push_str(&format!(
                    "; the {} merged threads also wait for each other ({})",
                    nodes[t].tids.len(),
                    how(&edges[x])
                ));
            }
            return KnotAdvice::new("blocking I/O in the loop", rest);
        }
        return KnotAdvice::new(
            format!("{} and the threads it serves wait for each other", label(d)),
            ": overlap or batch the I/O",
        );
    }
    let is_group = |v: usize| nodes[v].kind == NodeKind::Group;
    if k.nodes.len() == 1 && is_group(k.nodes[0]) {
        let n = &nodes[k.nodes[0]];
        let self_loop = internal
            .iter()
            .copied()
            .find(|&e| edges[e].from == edges[e].to);
        let what = self_loop.map(|e| how(&edges[e])).unwrap_or_default();
        let threads = format!("the {} merged {} threads ({what})", n.tids.len(), n.comm);
        if any_stack(edges, &internal, &BARRIER) && !any_stack(edges, &internal, &LOCK) {
            return KnotAdvice::new(
                format!("load imbalance among {threads}"),
                ": split the work into finer tasks",
            );
        }
        let lock = self_loop.is_some_and(|e| edges[e].main_class() == Class::Lock)
            || any_stack(edges, &internal, &LOCK);
        if lock {
            return KnotAdvice::new(
                format!("lock contention among {threads}"),
                ": finer-grained locks or sharding",
            );
        }
        return KnotAdvice::new(
            format!(
                "the {} merged {} threads wait for each other ({what})",
                n.tids.len(),
                n.comm
            ),
            ": contention on a shared resource",
        );
    }
    let Some(&heavy) = internal.iter().find(|&&e| edges[e].from != edges[e].to) else {
        return KnotAdvice::new("threads wait for each other", "");
    };
    let (a, b) = (edges[heavy].from, edges[heavy].to);
    let names = if k.nodes.len() == 2 {
        format!("{} and {}", label(a), label(b))
    } else {
        format!(
            "{} threads ({} → {} heaviest)",
            k.nodes.len(),
            label(a),
            label(b)
        )
    };
    let heaviest = how(&edges[heavy]);
    if any_stack(edges, &internal, &BARRIER) {
        return KnotAdvice::new(
            "load imbalance",
            format!(": {names} wait for each other in turn ({heaviest}): finer tasks or dynamic work distribution would balance the phases"),
        );
    }
    if edges[heavy].main_class() == Class::Lock || any_stack(edges, &internal, &LOCK) {
        return KnotAdvice::new(
            "lock handoffs",
            format!(": {names} wait for each other's lock ({heaviest}): shorten the critical sections or split the lock"),
        );
    }
    KnotAdvice::new(
        format!(
            "{names} wait for each other in a cycle; start with the heaviest edge ({heaviest})"
        ),
        "",
    )
}

/// A vertex that waits for nobody in the graph.
fn sink(nodes: &[Node], edges: &[Edge], v: usize) -> KnotAdvice {
    let n = &nodes[v];
    // Its waits, if any, went to vertices set aside (timers, threads
    // outside the recording): it is not simply CPU-bound then.
    let life = n
        .cpu_ns
        .saturating_add(n.runnable_ns)
        .saturating_add(n.wait_ns)
        .max(1);
    let mut away: Vec<&Edge> = edges
        .iter()
        .filter(|e| e.from == v && e.to != v && e.wait_ns as u128 * 100 >= life as u128)
        .collect();
    away.sort_by_key(|e| std::cmp::Reverse(e.wait_ns));
    if matches!(n.kind, NodeKind::Thread | NodeKind::Group) && !away.is_empty() {
        let on: Vec<String> = away
            .iter()
            .take(3)
            .map(|e| format!("{} ({:.0}%)", nodes[e.to].label, pct(e.wait_ns, life)))
            .collect();
        return KnotAdvice::new(
            format!(
                "{} waits only for {}, set aside; it is on CPU {:.0}% of the time",
                n.label,
                on.join(", "),
                pct(n.cpu_ns, life)
            ),
            ": speed up its code, or its waits if they are in the critical path",
        );
    }
    match n.kind {
        NodeKind::Thread => KnotAdvice::new(
            format!("{} waits for nobody", n.label),
            format!(
                ": it is CPU-bound; speed up its code (holdup report --tid {})",
                n.tids.first().copied().unwrap_or(0)
            ),
        ),
        NodeKind::Group => KnotAdvice::new(
            format!("{} wait for nobody", n.label),
            ": CPU-bound; speed up their code or add threads",
        ),
        NodeKind::Device if n.id.starts_with("net") => KnotAdvice::new(
            "waits on the network (the NIC's own waits are not recorded)",
            ": batch or pipeline requests",
        ),
        NodeKind::Device
            if n.cpu_ns.saturating_add(n.wait_ns) > 0
                && (n.wait_ns as u128) * 10 < n.cpu_ns as u128 + n.wait_ns as u128 =>
        {
            KnotAdvice::new(
                format!(
                    "{} is busy {:.0}% of the time",
                    n.label,
                    pct(n.cpu_ns, n.cpu_ns.saturating_add(n.wait_ns))
                ),
                ": a saturated device; less I/O or faster storage would pay",
            )
        }
        NodeKind::Device => KnotAdvice::new(
            format!("{} waits for nobody recorded", n.label),
            ": its requests come from outside the recording",
        ),
        NodeKind::Irq if n.id == "timer" => KnotAdvice::new(
            "threads wait for timers (sleeps, timeouts)",
            ": shorten or remove them, or wake on events instead",
        ),
        NodeKind::Irq => KnotAdvice::new(
            format!("waits on {}, an interrupt not tied to a device", n.label),
            "",
        ),
        NodeKind::Softirq => KnotAdvice::new(format!("waits on {} work", n.label), ""),
    }
}
