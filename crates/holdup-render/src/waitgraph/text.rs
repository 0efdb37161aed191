//! The text report: knots first, each with its vertices, edges, stacks and
//! advice; then the heavy waits outside the knots, then notes.

use super::{dur, pct};
use crate::advice;
use holdup_analysis::waitgraph::{Edge, EdgeKind, Knot, KnotKind, NodeKind, WaitGraph};
use std::io::{self, Write};

#[derive(Clone, Debug)]
pub struct TextOptions {
    pub source: String,
    /// Stacks shown per edge.
    pub stacks: usize,
    /// Knots and sinks shown in full.
    pub knots: usize,
    /// Heaviest edges outside the knots shown.
    pub outside: usize,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions {
            source: "holdup.data".into(),
            stacks: 3,
            knots: 8,
            outside: 6,
        }
    }
}

fn knot_title(g: &WaitGraph, k: &Knot) -> String {
    k.nodes
        .iter()
        .map(|&n| g.nodes[n].label.as_str())
        .collect::<Vec<_>>()
        .join(" + ")
}

fn edge_line(out: &mut impl Write, g: &WaitGraph, e: &Edge, indent: &str) -> io::Result<()> {
    let name = format!("{} → {}", g.nodes[e.from].label, g.nodes[e.to].label);
    let w = format!(
        "{} ({:.0}%)",
        dur(e.weight_ns),
        pct(e.weight_ns, g.duration_ns)
    );
    match e.kind {
        EdgeKind::DeviceIdle => writeln!(
            out,
            "{indent}{name:<44} {w:>18}  raw {}: {:.0}% of the device's idle time ended by its requests ({} issued)",
            dur(e.wait_ns),
            e.share * 100.0,
            e.count
        ),
        EdgeKind::Creator => writeln!(
            out,
            "{indent}{name:<44} {w:>18}  none of the short-lived threads existed: waiting for new ones"
        ),
        EdgeKind::Wait => writeln!(
            out,
            "{indent}{name:<44} {w:>18}  raw {} in {} waits [{}]",
            dur(e.wait_ns),
            e.count,
            e.main_class().name()
        ),
    }
}

fn stacks(out: &mut impl Write, e: &Edge, n: usize, indent: &str) -> io::Result<()> {
    for s in e.stacks.iter().take(n) {
        let reason = s
            .reason
            .as_deref()
            .map(|r| format!(" [{r}]"))
            .unwrap_or_default();
        writeln!(
            out,
            "{indent}  blocked in  {}{reason}  ({} samples)",
            s.site.as_deref().unwrap_or(&s.short),
            s.samples
        )?;
    }
    if let Some(line) = super::meanwhile(e, n.max(1)) {
        writeln!(out, "{indent}  meanwhile   {line}")?;
    }
    for s in e.waker_stacks.iter().take(n.min(2)) {
        writeln!(
            out,
            "{indent}  waker ran   {}  ({} samples)",
            s.short, s.samples
        )?;
    }
    Ok(())
}

/// The waits that hold a knot up: its edges, or, for a sink, the edges
/// into it.
pub(crate) fn knot_waits(g: &WaitGraph, k: &Knot) -> Vec<usize> {
    if k.kind == KnotKind::Sink {
        (0..g.edges.len())
            .filter(|&e| g.edges[e].to == k.nodes[0])
            .collect()
    } else {
        k.edges.clone()
    }
}

fn knot(
    out: &mut impl Write,
    g: &WaitGraph,
    i: usize,
    k: &Knot,
    o: &TextOptions,
) -> io::Result<()> {
    let what = match k.kind {
        KnotKind::Knot => "KNOT",
        KnotKind::Sink if k.cpu_bound => "SINK (CPU-bound)",
        KnotKind::Sink => "SINK",
    };
    writeln!(out, "{what} {}: {}", i + 1, knot_title(g, k))?;
    writeln!(out, "  advice: {}", advice::knot(g, k))?;
    if let Some(why) = super::why(g, &knot_waits(g, k)) {
        writeln!(out, "  why: {why}")?;
    }
    writeln!(
        out,
        "  {:<42} {:>12} {:>12} {:>12}",
        "vertex", "cpu", "runnable", "waiting"
    )?;
    for &n in &k.nodes {
        let v = &g.nodes[n];
        let mut label = v.label.clone();
        if v.kind == NodeKind::Group && v.tids.len() > 1 {
            let tids: Vec<String> = v.tids.iter().take(6).map(|t| t.to_string()).collect();
            label = format!(
                "{label} [{}{}]",
                tids.join(","),
                if v.tids.len() > 6 { ",…" } else { "" }
            );
        }
        if v.kind == NodeKind::Device && !v.id.starts_with("net") {
            writeln!(
                out,
                "  {label:<42} {:>12} {:>12} {:>12}  ({} requests, {} KiB)",
                format!("{} busy", dur(v.cpu_ns)),
                "",
                format!("{} idle", dur(v.wait_ns)),
                v.requests,
                v.bytes / 1024
            )?;
        } else if matches!(v.kind, NodeKind::Thread | NodeKind::Group) && v.recorded {
            writeln!(
                out,
                "  {label:<42} {:>12} {:>12} {:>12}",
                dur(v.cpu_ns),
                dur(v.runnable_ns),
                dur(v.wait_ns)
            )?;
        } else {
            writeln!(out, "  {label:<42} {:>12} {:>12} {:>12}", "-", "-", "-")?;
        }
    }
    if k.kind == KnotKind::Sink {
        // For a sink, who waits on it is the story.
        let mut into: Vec<&Edge> = g
            .edges
            .iter()
            .filter(|e| e.to == k.nodes[0] && e.from != e.to)
            .collect();
        into.sort_by_key(|e| std::cmp::Reverse(e.weight_ns));
        if !into.is_empty() {
            writeln!(out, "  waited on by:")?;
        }
        for e in into.into_iter().take(3) {
            edge_line(out, g, e, "    ")?;
            stacks(out, e, o.stacks.min(2), "    ")?;
        }
    }
    if !k.edges.is_empty() {
        writeln!(
            out,
            "  edges (A → B: A waits for B), weight after cascaded re-distribution:"
        )?;
    }
    let mut es = k.edges.clone();
    es.sort_by_key(|&e| std::cmp::Reverse(g.edges[e].weight_ns));
    for e in es {
        edge_line(out, g, &g.edges[e], "    ")?;
        stacks(out, &g.edges[e], o.stacks, "    ")?;
    }
    if let Some(from) = &k.refined_from {
        let trimmed: Vec<String> = k
            .trimmed
            .iter()
            .map(|&e| {
                let e = &g.edges[e];
                format!(
                    "{} → {} {}",
                    g.nodes[e.from].label,
                    g.nodes[e.to].label,
                    dur(e.weight_ns)
                )
            })
            .collect();
        writeln!(
            out,
            "  refined from a knot of {} vertices by trimming its lightest edges: {}",
            from.len(),
            trimmed.join(", ")
        )?;
    }
    writeln!(out)
}

pub fn render(out: &mut impl Write, g: &WaitGraph, o: &TextOptions) -> io::Result<()> {
    writeln!(
        out,
        "# holdup waitgraph: {}, {} recorded, {} scheduler events ({} off-CPU intervals) analysed",
        o.source,
        dur(g.duration_ns),
        g.events(),
        g.stats.segments
    )?;
    writeln!(
        out,
        "# {} vertices, {} edges; knots are refined down to edges of at least {} ({:.0}% of the recording)",
        g.nodes.len(),
        g.edges.len(),
        dur(g.threshold_ns),
        pct(g.threshold_ns, g.duration_ns)
    )?;
    writeln!(out)?;
    let main: Vec<&Knot> = g
        .knots
        .iter()
        .filter(|k| !k.background && !k.unrecorded)
        .collect();
    let aside: Vec<&Knot> = g
        .knots
        .iter()
        .filter(|k| k.background || k.unrecorded)
        .collect();
    if main.is_empty() {
        writeln!(
            out,
            "No knot or sink outside the background: nothing limits throughput from off-CPU."
        )?;
        writeln!(out)?;
    }
    for (i, k) in main.iter().take(o.knots).enumerate() {
        knot(out, g, i, k, o)?;
    }
    if main.len() > o.knots {
        let rest: Vec<String> = main[o.knots..]
            .iter()
            .map(|k| knot_title(g, k))
            .take(10)
            .collect();
        writeln!(
            out,
            "… and {} more: {} (--json has all)",
            main.len() - o.knots,
            rest.join("; ")
        )?;
        writeln!(out)?;
    }
    if !aside.is_empty() {
        writeln!(
            out,
            "Set aside (background threads, idle threads, or outside the recording):"
        )?;
        for k in aside.iter().take(10) {
            writeln!(out, "  {}", advice::knot(g, k))?;
        }
        if aside.len() > 10 {
            writeln!(out, "  … and {} more", aside.len() - 10)?;
        }
        writeln!(out)?;
    }
    let mut inside = vec![false; g.edges.len()];
    for k in &g.knots {
        for &e in &k.edges {
            inside[e] = true;
        }
    }
    let outside: Vec<&Edge> = (0..g.edges.len())
        .filter(|&e| !inside[e])
        .map(|e| &g.edges[e])
        .take(o.outside)
        .collect();
    if !outside.is_empty() {
        writeln!(out, "Heaviest waits outside the knots (waiting long here is a symptom, not the bottleneck):")?;
        for e in outside {
            edge_line(out, g, e, "  ")?;
            stacks(out, e, 1, "  ")?;
        }
        writeln!(out)?;
    }
    for n in &g.notes {
        writeln!(out, "note: {n}")?;
    }
    Ok(())
}
