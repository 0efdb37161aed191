//! Rendering of the wait-for graph: text (knots first), JSON
//! (`holdup.waitgraph/1`), GraphViz DOT, and SVG through `dot`.

mod dot;
mod json;
mod text;

use holdup_analysis::waitgraph::{Edge, WaitGraph};

pub use dot::{to_dot, to_svg, DotOptions};
pub use json::write_json;
pub use text::{render, TextOptions};

/// `1.234 s`, `12.3 ms`, `45 µs`.
pub(crate) fn dur(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if ns >= 1_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.0} µs", ns as f64 / 1e3)
    }
}

pub(crate) fn pct(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * n as f64 / total as f64
    }
}

/// What the waited-for side of an edge did over its waits, as the report
/// says it under a row: up to `max` sites with their subclasses.
pub(crate) fn meanwhile(e: &Edge, max: usize) -> Option<String> {
    let held = e.held.as_ref()?;
    let line = crate::report::held::line(held, held.samples.round() as u64, max);
    (!line.is_empty()).then_some(line)
}

/// Why the waits of a knot (or, into a sink, `edges` waiting on it) last:
/// what the waited-for side of the heaviest of them did meanwhile.
pub(crate) fn why(g: &WaitGraph, edges: &[usize]) -> Option<String> {
    // Heaviest first; only the first that has something to say is worded.
    let mut held: Vec<&Edge> = edges
        .iter()
        .map(|&e| &g.edges[e])
        .filter(|e| e.held.is_some())
        .collect();
    held.sort_by_key(|e| std::cmp::Reverse((e.weight_ns, std::cmp::Reverse((e.from, e.to)))));
    let e = held.into_iter().find_map(|e| Some((e, meanwhile(e, 2)?)));
    e.map(|(e, line)| {
        format!(
            "{} waits for {}, which meanwhile: {line}",
            g.nodes[e.from].label, g.nodes[e.to].label
        )
    })
}
