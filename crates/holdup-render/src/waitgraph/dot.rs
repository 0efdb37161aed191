//! GraphViz: knots drawn as red clusters, edge weights as labels and pen
//! widths, thin edges dashed; SVG by piping the DOT text through `dot`.

use super::{dur, pct};
use crate::advice;
use holdup_analysis::waitgraph::{EdgeKind, KnotKind, NodeKind, WaitGraph};
use std::io::{self, Write};
use std::process::{Command, Stdio};

#[derive(Clone, Debug)]
pub struct DotOptions {
    /// Edges lighter than this fraction of the recording are left out
    /// (unless they are in a knot), and so are vertices left without edges.
    pub min_fraction: f64,
    /// Edges lighter than this fraction are dashed.
    pub thin_fraction: f64,
    pub title: String,
}

impl Default for DotOptions {
    fn default() -> Self {
        DotOptions {
            min_fraction: 0.001,
            thin_fraction: 0.05,
            title: "holdup waitgraph".into(),
        }
    }
}

fn q(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                o.push('\\');
                o.push(c);
            }
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

pub fn to_dot(g: &WaitGraph, o: &DotOptions) -> String {
    let d = g.duration_ns.max(1);
    let min = (d as f64 * o.min_fraction) as u64;
    let thin = (d as f64 * o.thin_fraction) as u64;
    let mut in_knot = vec![None; g.nodes.len()];
    let mut edge_in_knot = vec![false; g.edges.len()];
    for (i, k) in g.knots.iter().enumerate() {
        for &n in &k.nodes {
            in_knot[n].get_or_insert(i);
        }
        if !k.background && !k.unrecorded {
            for &e in &k.edges {
                edge_in_knot[e] = true;
            }
        }
    }
    let shown_edge: Vec<bool> = (0..g.edges.len())
        .map(|e| edge_in_knot[e] || g.edges[e].weight_ns >= min)
        .collect();
    let mut shown_node = vec![false; g.nodes.len()];
    for (e, &s) in shown_edge.iter().enumerate() {
        if s {
            shown_node[g.edges[e].from] = true;
            shown_node[g.edges[e].to] = true;
        }
    }
    for k in g.knots.iter().filter(|k| !k.background && !k.unrecorded) {
        for &n in &k.nodes {
            shown_node[n] = true;
        }
    }

    let mut s = String::new();
    s.push_str("digraph waitgraph {\n");
    s.push_str(&format!(
        "  graph [rankdir=LR, fontname=\"Helvetica\", fontsize=11, labelloc=t, label={}];\n",
        q(&format!(
            "{}: {} recorded; edge A → B: A waits for B (weight after cascaded re-distribution); red: knots",
            o.title,
            dur(g.duration_ns)
        ))
    ));
    s.push_str("  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", fontname=\"Helvetica\", fontsize=10];\n");
    s.push_str("  edge [fontname=\"Helvetica\", fontsize=9];\n");

    let node_line = |n: usize| -> String {
        let v = &g.nodes[n];
        let shape = match v.kind {
            NodeKind::Thread => "box",
            NodeKind::Group => "box3d",
            NodeKind::Device => "cylinder",
            NodeKind::Irq | NodeKind::Softirq => "ellipse",
        };
        let detail = match v.kind {
            NodeKind::Device if !v.id.starts_with("net") => {
                format!("busy {} / idle {}", dur(v.cpu_ns), dur(v.wait_ns))
            }
            NodeKind::Thread | NodeKind::Group if v.recorded => format!(
                "cpu {}  run {}  wait {}",
                dur(v.cpu_ns),
                dur(v.runnable_ns),
                dur(v.wait_ns)
            ),
            NodeKind::Thread => "not recorded".to_string(),
            _ => String::new(),
        };
        let label = if detail.is_empty() {
            v.label.clone()
        } else {
            format!("{}\n{detail}", v.label)
        };
        let (fill, style) = match in_knot[n].map(|i| &g.knots[i]) {
            Some(k) if k.unrecorded => ("#eeeeee", "rounded,filled,dotted"),
            Some(k) if k.background => ("#eeeeee", "rounded,filled"),
            Some(k) if k.kind == KnotKind::Knot => ("#fcbba1", "rounded,filled,bold"),
            Some(_) => ("#fdd49e", "rounded,filled"),
            None if !v.recorded => ("#ffffff", "rounded,filled,dotted"),
            None => ("#ffffff", "rounded,filled"),
        };
        format!(
            "{} [label={}, shape={shape}, fillcolor=\"{fill}\", style=\"{style}\"];",
            q(&v.id),
            q(&label)
        )
    };

    for (i, k) in g.knots.iter().enumerate() {
        if k.background || k.unrecorded || k.kind != KnotKind::Knot {
            continue;
        }
        s.push_str(&format!(
            "  subgraph cluster_knot{i} {{\n    label={}; color=\"#cb181d\"; penwidth=2; style=\"rounded\"; fontcolor=\"#cb181d\";\n",
            q(&format!("knot {}: {}", i + 1, advice::knot(g, k).headline))
        ));
        for &n in &k.nodes {
            s.push_str(&format!("    {}\n", node_line(n)));
        }
        s.push_str("  }\n");
    }
    for n in 0..g.nodes.len() {
        let clustered = in_knot[n].is_some_and(|i| {
            let k = &g.knots[i];
            !k.background && !k.unrecorded && k.kind == KnotKind::Knot
        });
        if shown_node[n] && !clustered {
            s.push_str(&format!("  {}\n", node_line(n)));
        }
    }
    for (i, e) in g.edges.iter().enumerate() {
        if !shown_edge[i] {
            continue;
        }
        let share = e.weight_ns as f64 / d as f64;
        let pen = (1.0 + 4.0 * share.min(1.0)).max(0.5);
        let mut attrs = vec![
            format!(
                "label={}",
                q(&match super::meanwhile(e, 1) {
                    Some(what) =>
                        format!("{} ({:.0}%)\n{what}", dur(e.weight_ns), pct(e.weight_ns, d)),
                    None => format!("{} ({:.0}%)", dur(e.weight_ns), pct(e.weight_ns, d)),
                })
            ),
            format!("penwidth={pen:.2}"),
        ];
        if e.weight_ns < thin {
            attrs.push("style=dashed".into());
        }
        if edge_in_knot[i] {
            attrs.push("color=\"#cb181d\"".into());
            attrs.push("fontcolor=\"#cb181d\"".into());
        }
        if e.kind == EdgeKind::DeviceIdle {
            attrs.push("arrowhead=empty".into());
        }
        s.push_str(&format!(
            "  {} -> {} [{}];\n",
            q(&g.nodes[e.from].id),
            q(&g.nodes[e.to].id),
            attrs.join(", ")
        ));
    }
    s.push_str("}\n");
    s
}

/// GraphViz's SVG picture of DOT text: `dot -Tsvg` reads it on its
/// standard input and writes the picture on its standard output, so no
/// file is made anywhere (a fixed or guessable name in a shared directory
/// could be a link another user planted). The SVG is as `dot` wrote it:
/// names in it are the trace's, so a page must clean it before use.
pub fn to_svg(dot: &str) -> io::Result<String> {
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                io::Error::new(
                    e.kind(),
                    "GraphViz `dot` was not found: install graphviz (apt install graphviz), or write --dot and render it elsewhere",
                )
            } else {
                e
            }
        })?;
    // Fed from a thread while the output is read: a large graph would
    // otherwise fill both pipes and stop both sides.
    let mut stdin = child.stdin.take().expect("piped");
    let text = dot.to_string();
    let feeder = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let res = child.wait_with_output()?;
    let fed = feeder
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("feeding dot")));
    if !res.status.success() {
        return Err(io::Error::other(format!(
            "dot failed: {}",
            String::from_utf8_lossy(&res.stderr).trim()
        )));
    }
    fed?;
    String::from_utf8(res.stdout)
        .map_err(|_| io::Error::other("dot wrote an SVG that is not UTF-8"))
}
