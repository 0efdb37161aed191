//! `holdup html`: one self-contained page (no network; the style sheet and
//! the small script are embedded) with the report tables and a filter box,
//! an interactive on+off-CPU flame graph (search, click to zoom), the
//! wait-for graph, and the causal curves when a causal profile is given.
//!
//! Every name from the trace is escaped: text with [`escape`], the flame
//! graph's data as JSON inside a `<script type="application/json">` with
//! `<`, `>` and `&` written as `\u003c`… so it cannot end the element.

use crate::export::StackSample;
use holdup_analysis::causal::CausalProfile;
use holdup_analysis::folded::leaf_name;
use holdup_analysis::profile::{Profile, ThreadProfile};
use holdup_trace::{Class, Trace};
use std::collections::HashMap;
use std::fmt::Write;

const CSS: &str = include_str!("report.css");
const JS: &str = include_str!("report.js");

/// Flame graph frames under 1/FLAME_DETAIL of all points are left out.
const FLAME_DETAIL: u64 = 20_000;

/// The wait-for graph section: GraphViz's SVG, or a text rendering (edges
/// and knots) when `dot` is not there, or why there is none.
pub enum WaitGraph {
    Svg(String),
    Text(String),
    Missing(String),
}

pub struct Page<'a> {
    pub title: &'a str,
    pub trace: &'a Trace,
    pub profile: &'a Profile,
    pub samples: &'a [StackSample],
    pub waitgraph: WaitGraph,
    pub causal: Option<&'a CausalProfile>,
}

/// Text for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON that can sit inside a `<script>` element.
fn script_json(v: &serde_json::Value) -> String {
    v.to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

fn class_index(c: Class) -> usize {
    c.index()
}

/// A flame graph node: name, points, colour class, children in order of
/// first appearance.
struct Node {
    name: String,
    value: u64,
    class: Option<Class>,
    children: Vec<Node>,
    index: HashMap<String, usize>,
}

impl Node {
    fn new(name: &str) -> Node {
        Node {
            name: name.to_string(),
            value: 0,
            class: None,
            children: Vec::new(),
            index: HashMap::new(),
        }
    }

    fn child(&mut self, name: &str) -> &mut Node {
        let i = match self.index.get(name) {
            Some(&i) => i,
            None => {
                self.children.push(Node::new(name));
                self.index.insert(name.to_string(), self.children.len() - 1);
                self.children.len() - 1
            }
        };
        &mut self.children[i]
    }

    /// Count a sample's points on this node: a node whose samples are all
    /// of one subclass takes its colour, a mixed one the on-CPU colour.
    fn add(&mut self, points: u64, class: Class) {
        self.value += points;
        self.class = match self.class {
            None => Some(class),
            Some(c) if c == class => Some(c),
            Some(_) => Some(Class::Cpu),
        };
    }

    /// The node as `[name, points, class, children]`; children lighter
    /// than `min` points are left out (too narrow to draw, and they would
    /// make the page of a long trace large).
    fn json(&self, min: u64) -> serde_json::Value {
        let class = class_index(self.class.unwrap_or(Class::Cpu));
        let children: Vec<_> = self
            .children
            .iter()
            .filter(|c| c.value >= min)
            .map(|c| c.json(min))
            .collect();
        serde_json::json!([self.name, self.value, class, children])
    }
}

/// root → thread (`comm-tid`) → frames, outermost first → the subclass's
/// pseudo frame for blocked time.
fn flame_tree(samples: &[StackSample]) -> Node {
    let mut root = Node::new("all");
    for s in samples {
        root.add(s.points, s.class);
        let mut node = root.child(&format!("{}-{}", s.thread, s.tid));
        node.add(s.points, s.class);
        for f in s.frames.iter().rev() {
            for func in f.funcs.iter().rev() {
                node = node.child(&func.name);
                node.add(s.points, s.class);
            }
        }
        if let Some(leaf) = leaf_name(s.class) {
            node = node.child(leaf);
            node.add(s.points, s.class);
        }
    }
    root
}

fn ms(points: u64, period_ns: u64) -> String {
    format!("{:.1}", points as f64 * period_ns as f64 / 1e6)
}

fn thread_table(out: &mut String, t: &ThreadProfile, period_ns: u64) {
    let total = t.samples.total().max(1);
    let _ = write!(
        out,
        "<h3>{} <small>tid {} pid {}</small></h3>\n<p>",
        escape(&t.comm),
        t.tid,
        t.pid
    );
    for c in Class::ALL {
        let n = t.samples.get(c);
        let _ = write!(
            out,
            "<span class=\"c{}\">&nbsp;</span> {} {} ms ({:.1}%) ",
            class_index(c),
            c.name(),
            ms(n, period_ns),
            100.0 * n as f64 / total as f64
        );
    }
    out.push_str("</p>\n<table class=\"rows\"><thead><tr><th>share</th><th>ms</th><th></th><th>symbol</th><th>file</th><th>wait reasons</th><th>wakers</th></tr></thead><tbody>\n");
    for r in &t.rows {
        let list = |v: &[(String, u64)]| {
            v.iter()
                .take(3)
                .map(|(n, w)| format!("{} ({})", escape(n), ms(*w, period_ns)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let reasons: Vec<(String, u64)> = r
            .wait_reasons
            .iter()
            .map(|(n, w)| (n.to_string(), *w))
            .collect();
        let _ = writeln!(
            out,
            "<tr><td class=\"n\">{:.2}%</td><td class=\"n\">{}</td><td class=\"c{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            100.0 * r.weight as f64 / total as f64,
            ms(r.weight, period_ns),
            class_index(r.tag.class()),
            escape(r.tag.as_str()),
            escape(&r.symbol),
            escape(&r.dso),
            list(&reasons),
            list(&r.wakers)
        );
    }
    out.push_str("</tbody></table>\n");
}

/// A small chart of a causal curve: program speedup over line speedup.
fn curve_svg(points: &[(f64, f64)], top: f64) -> String {
    let (w, h) = (220.0, 90.0);
    let top = if top > 0.0 { top } else { 1.0 };
    let mut path = String::new();
    for (i, (x, y)) in points.iter().enumerate() {
        let px = 10.0 + x * (w - 20.0);
        let py = h / 2.0 - y / top * (h / 2.0 - 8.0);
        let _ = write!(path, "{}{px:.1},{py:.1}", if i == 0 { "M" } else { " L" });
    }
    format!(
        "<svg class=\"curve\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\"><line x1=\"10\" y1=\"{m}\" x2=\"{x2}\" y2=\"{m}\" stroke=\"#999\"/><path d=\"{path}\" fill=\"none\" stroke=\"#c00\" stroke-width=\"2\"/></svg>",
        m = h / 2.0,
        x2 = w - 10.0
    )
}

fn causal_section(out: &mut String, p: &CausalProfile) {
    out.push_str("<h2 id=\"causal\">Causal profile</h2>\n");
    let Some(point) = &p.progress_point else {
        out.push_str("<p>No experiment measured a progress point.</p>\n");
        return;
    };
    let _ = writeln!(
        out,
        "<p>Progress point {}, {} experiments. Program speedup (vertical, ± the largest) over the speedup of each target (0–100%).</p>",
        escape(point),
        p.experiments
    );
    let top = p
        .targets
        .iter()
        .flat_map(|t| t.curve.iter().map(|c| c.fitted.abs()))
        .fold(0.0, f64::max);
    out.push_str("<table class=\"rows\"><thead><tr><th>target</th><th>best</th><th>samples</th><th>curve</th></tr></thead><tbody>\n");
    for t in &p.targets {
        let points: Vec<(f64, f64)> = t.curve.iter().map(|c| (c.speedup, c.fitted)).collect();
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"n\">{:+.1}%</td><td class=\"n\">{}</td><td>{}</td></tr>",
            escape(&t.target),
            t.max_program_speedup * 100.0,
            t.samples,
            curve_svg(&points, top)
        );
    }
    out.push_str("</tbody></table>\n");
}

/// The SVG element of GraphViz's output, without its XML prolog and
/// doctype (which name a URL).
fn inline_svg(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

/// The whole page.
pub fn render(page: &Page) -> String {
    let period = page.trace.header.period_ns;
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>holdup: {}</title>\n<style>\n{CSS}</style></head>\n<body>\n<h1>holdup: {}</h1>\n",
        escape(page.title),
        escape(page.title)
    );
    let _ = writeln!(
        out,
        "<p>{} on {}: {:.3} s, {} threads, sampling period {} µs. <a href=\"#flame-section\">Flame graph</a> · <a href=\"#waitgraph\">Wait-for graph</a>{}</p>",
        escape(page.title),
        escape(&page.trace.header.hostname),
        page.trace.duration_ns() as f64 / 1e9,
        page.profile.threads.len(),
        period / 1000,
        if page.causal.is_some() {
            " · <a href=\"#causal\">Causal profile</a>"
        } else {
            ""
        }
    );
    out.push_str("<p class=\"legend\">");
    for c in Class::ALL {
        let _ = write!(
            out,
            "<span class=\"c{}\">{} {}</span>",
            class_index(c),
            c.tag(),
            c.name()
        );
    }
    out.push_str("</p>\n");

    out.push_str("<h2 id=\"flame-section\">Flame graph, on- and off-CPU</h2>\n<p><input type=\"search\" id=\"flame-search\" placeholder=\"search functions\"> <button id=\"flame-reset\">reset zoom</button> Click a frame to zoom in.</p>\n<div id=\"flame-info\"></div>\n<div id=\"flame\"></div>\n");
    let _ = writeln!(
        out,
        "<script type=\"application/json\" id=\"flame-data\">{}</script>",
        script_json(&{
            let tree = flame_tree(page.samples);
            tree.json(tree.value / FLAME_DETAIL)
        })
    );

    out.push_str("<h2 id=\"report\">Report</h2>\n<p><input type=\"search\" id=\"filter\" placeholder=\"filter rows\"></p>\n");
    for t in &page.profile.threads {
        thread_table(&mut out, t, period);
    }

    out.push_str("<h2 id=\"waitgraph\">Wait-for graph</h2>\n<div class=\"wait\">");
    match &page.waitgraph {
        WaitGraph::Svg(svg) => out.push_str(inline_svg(svg)),
        WaitGraph::Text(t) => {
            let _ = write!(out, "<pre>{}</pre>", escape(t));
        }
        WaitGraph::Missing(why) => {
            let _ = write!(out, "<p>No wait-for graph: {}</p>", escape(why));
        }
    }
    out.push_str("</div>\n");

    if let Some(c) = page.causal {
        causal_section(&mut out, c);
    }
    let _ = write!(out, "<script>\n{JS}</script>\n</body></html>\n");
    out
}
