//! Rendering of the wait-for graph: text (knots first), JSON
//! (`holdup.waitgraph/1`), GraphViz DOT, and SVG through `dot`.

mod dot;
mod json;
mod text;

pub use dot::{to_dot, to_svg, DotOptions};
pub use json::to_json;
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
