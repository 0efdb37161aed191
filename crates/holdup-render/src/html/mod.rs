//! `holdup html`: one self-contained page (no network; the style sheet and
//! the small script are embedded) with the report tables and a filter box,
//! an interactive on+off-CPU flame graph (search, click to zoom), the
//! wait-for graph, and the causal curves when a causal profile is given.
//!
//! Every name from the trace is escaped: text with [`escape`], the flame
//! graph's data as JSON inside a `<script type="application/json">` with
//! `<`, `>` and `&` written as `\u003c`… so it cannot end the element, and
//! GraphViz's picture of the wait-for graph is rebuilt from the drawing
//! elements it may hold (`svg.rs`).

mod svg;

use crate::export::StackSample;
use holdup_analysis::causal::CausalProfile;
use holdup_analysis::folded::leaf_name;
use holdup_analysis::profile::{Profile, ThreadProfile};
use holdup_trace::{Class, Trace};
use std::collections::HashMap;
use std::fmt::Write;
use std::rc::Rc;

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
    /// Folded stacks of the critical path (as `flame --critical-path`
    /// draws them), or why there are none.
    pub critical: Result<&'a [(String, u64)], String>,
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

/// JSON text that can sit inside a `<script>` element.
fn script_text(json: &str) -> String {
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

fn class_index(c: Class) -> usize {
    c.index()
}

/// A flame graph node: name, points, colour class, children in order of
/// first appearance (indices into the tree's nodes).
struct Node {
    name: Rc<str>,
    value: u64,
    class: Option<Class>,
    children: Vec<usize>,
    index: HashMap<Rc<str>, usize>,
}

impl Node {
    fn new(name: Rc<str>) -> Node {
        Node {
            name,
            value: 0,
            class: None,
            children: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// Count a sample's points on this node: a node whose samples are all
    /// of one subclass takes its colour, a mixed one the on-CPU colour.
    fn add(&mut self, points: u64, class: Class) {
        self.value = self.value.saturating_add(points);
        self.class = match self.class {
            None => Some(class),
            Some(c) if c == class => Some(c),
            Some(_) => Some(Class::Cpu),
        };
    }
}

/// The flame graph's tree, its nodes in one list (the root first): a stack
/// as deep as a trace may hold is walked by loops, not recursion, both
/// when the tree is built and when it is written.
struct FlameTree {
    nodes: Vec<Node>,
}

impl FlameTree {
    /// The child of `parent` named `name`, made if new.
    fn child(&mut self, parent: usize, name: &Rc<str>) -> usize {
        if let Some(&i) = self.nodes[parent].index.get(name) {
            return i;
        }
        let i = self.nodes.len();
        self.nodes.push(Node::new(name.clone()));
        let p = &mut self.nodes[parent];
        p.children.push(i);
        p.index.insert(name.clone(), i);
        i
    }

    /// The tree as nested `[name, points, class, children]` arrays;
    /// children lighter than `min` points are left out (too narrow to
    /// draw, and they would make the page of a long trace large).
    fn json(&self, min: u64) -> String {
        let mut out = String::new();
        // (node, its next child to write); a node is opened when pushed
        // and closed when its children are done.
        let mut stack: Vec<(usize, usize)> = Vec::new();
        let open = |out: &mut String, n: &Node| {
            let class = class_index(n.class.unwrap_or(Class::Cpu));
            let name = serde_json::Value::from(&*n.name);
            let _ = write!(out, "[{name},{},{class},[", n.value);
        };
        open(&mut out, &self.nodes[0]);
        stack.push((0, 0));
        while let Some((node, next)) = stack.last_mut() {
            let kids = &self.nodes[*node].children;
            match kids[*next..]
                .iter()
                .position(|&c| self.nodes[c].value >= min)
            {
                Some(k) => {
                    let child = kids[*next + k];
                    // After a sibling written before (not the opening `[`).
                    if out.ends_with(']') {
                        out.push(',');
                    }
                    *next += k + 1;
                    open(&mut out, &self.nodes[child]);
                    stack.push((child, 0));
                }
                None => {
                    out.push_str("]]");
                    stack.pop();
                }
            }
        }
        out
    }
}

/// root → thread (`comm-tid`) → frames, outermost first → the subclass's
/// pseudo frame for blocked time.
fn flame_tree(samples: &[StackSample]) -> FlameTree {
    let mut tree = FlameTree {
        nodes: vec![Node::new(Rc::from("all"))],
    };
    for s in samples {
        tree.nodes[0].add(s.points, s.class);
        let thread: Rc<str> = Rc::from(format!("{}-{}", s.thread, s.tid));
        let mut node = tree.child(0, &thread);
        tree.nodes[node].add(s.points, s.class);
        for f in s.frames.iter().rev() {
            for func in f.funcs.iter().rev() {
                node = tree.child(node, &func.name);
                tree.nodes[node].add(s.points, s.class);
            }
        }
        if let Some(leaf) = leaf_name(s.class) {
            node = tree.child(node, &Rc::from(leaf));
            tree.nodes[node].add(s.points, s.class);
        }
    }
    tree
}

/// The subclass a critical-path frame stands for: a wait edge
/// (`[L] wait for keeper:12`) the subclass it waited in, a leaf
/// (`[I] io wait`) the subclass it ends in.
fn frame_class(frame: &str) -> Option<Class> {
    Class::ALL.into_iter().find(|&c| {
        leaf_name(c) == Some(frame)
            || frame
                .strip_prefix(c.tag())
                .is_some_and(|rest| rest.starts_with(" wait for "))
    })
}

/// root → the waiter's thread → its frames → a frame per wait of the
/// chain → the frames of what ended it → its subclass leaf, from the
/// folded lines of the critical path. A wait edge takes the colour of the
/// subclass it waited in, the other frames that of where the line ends.
fn critical_tree(lines: &[(String, u64)]) -> FlameTree {
    let mut tree = FlameTree {
        nodes: vec![Node::new(Rc::from("all"))],
    };
    for (line, points) in lines {
        let frames: Vec<&str> = line.split(';').collect();
        let end = frames
            .last()
            .and_then(|f| frame_class(f))
            .filter(|_| frames.len() > 1)
            .unwrap_or(Class::Cpu);
        tree.nodes[0].add(*points, end);
        let mut node = 0;
        for f in frames {
            node = tree.child(node, &Rc::from(f));
            let class = frame_class(f).unwrap_or(end);
            tree.nodes[node].add(*points, class);
        }
    }
    tree
}

/// The flame graphs' data: both trees, or why the critical path has none.
fn flame_data(page: &Page) -> String {
    let tree = flame_tree(page.samples);
    let flame = tree.json(tree.nodes[0].value / FLAME_DETAIL);
    let (critical, why) = match &page.critical {
        Ok(lines) if !lines.is_empty() => {
            let tree = critical_tree(lines);
            (tree.json(tree.nodes[0].value / FLAME_DETAIL), "null".into())
        }
        Ok(_) => (
            "null".into(),
            serde_json::Value::from("no thread of the page has samples").to_string(),
        ),
        Err(why) => (
            "null".into(),
            serde_json::Value::from(why.as_str()).to_string(),
        ),
    };
    format!("{{\"flame\":{flame},\"critical\":{critical},\"critical_missing\":{why}}}")
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
        "<p>{} on {}: {:.3} s, {} threads, sampling period {} µs. <a href=\"#flame-section\">Flame graph</a> · <a href=\"#critical-path\">Critical path</a> · <a href=\"#waitgraph\">Wait-for graph</a>{}</p>",
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

    out.push_str("<h2 id=\"flame-section\">Flame graph, on- and off-CPU</h2>\n<p id=\"critical-path\"><button id=\"view-flame\" class=\"on\">on- and off-CPU</button> <button id=\"view-critical\">critical path</button> The critical path replaces each wait another thread ended by what the chain behind it did; the wait is a frame naming its subclass and the thread waited for (<code>[L] wait for keeper:12</code>).</p>\n<p><input type=\"search\" id=\"flame-search\" placeholder=\"search functions\"> <button id=\"flame-reset\">reset zoom</button> Click a frame to zoom in.</p>\n<div id=\"flame-info\"></div>\n<div id=\"flame\"></div>\n");
    let _ = writeln!(
        out,
        "<script type=\"application/json\" id=\"flame-data\">{}</script>",
        script_text(&flame_data(page))
    );

    out.push_str("<h2 id=\"report\">Report</h2>\n<p><input type=\"search\" id=\"filter\" placeholder=\"filter rows\"></p>\n");
    for t in &page.profile.threads {
        thread_table(&mut out, t, period);
    }

    out.push_str("<h2 id=\"waitgraph\">Wait-for graph</h2>\n<div class=\"wait\">");
    match &page.waitgraph {
        WaitGraph::Svg(svg) => match svg::clean(svg) {
            Ok(svg) => out.push_str(&svg),
            Err(why) => {
                let _ = write!(
                    out,
                    "<p>No wait-for graph: GraphViz's picture was left out ({})</p>",
                    escape(&why)
                );
            }
        },
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

#[cfg(test)]
mod tests {
    use super::*;
    use holdup_analysis::stacks::Func;
    use holdup_trace::Frame;

    fn func(name: &str) -> Func {
        Func {
            name: Rc::from(name),
            dso: Rc::from("app"),
            file: None,
            line: 0,
            kernel: false,
            inlined: false,
        }
    }

    /// Leaf first, one function per frame (or several: inlined ones).
    fn sample(class: Class, points: u64, frames: Vec<Vec<Func>>) -> StackSample {
        StackSample {
            time: 0,
            pid: 1,
            tid: 2,
            thread: Rc::from("app"),
            class,
            wait_reason: None,
            waker: holdup_trace::Waker::None,
            frames: frames
                .into_iter()
                .map(|funcs| StackFrame {
                    frame: Frame { dso: 1, addr: 0 },
                    funcs: funcs.into(),
                })
                .collect(),
            points,
        }
    }

    use crate::export::StackFrame;

    #[test]
    fn the_flame_tree_nests_threads_frames_and_subclass_leaves() {
        let samples = [
            sample(Class::Cpu, 3, vec![vec![func("work")], vec![func("main")]]),
            sample(Class::Io, 2, vec![vec![func("read")], vec![func("main")]]),
            sample(
                Class::Cpu,
                1,
                vec![vec![func("<tiny>")], vec![func("main")]],
            ),
        ];
        let tree = flame_tree(&samples);
        assert_eq!(
            tree.json(0),
            r#"["all",6,0,[["app-2",6,0,[["main",6,0,[["work",3,0,[]],["read",2,1,[["[I] io wait",2,1,[]]]],["<tiny>",1,0,[]]]]]]]]"#
        );
        // Lighter nodes are left out, and names stay inside the script.
        assert_eq!(
            tree.json(2),
            r#"["all",6,0,[["app-2",6,0,[["main",6,0,[["work",3,0,[]],["read",2,1,[["[I] io wait",2,1,[]]]]]]]]]]"#
        );
        assert!(!script_text(&flame_tree(&samples).json(0)).contains('<'));
    }

    #[test]
    fn the_critical_tree_colours_a_wait_by_its_subclass_and_the_rest_by_the_end() {
        let lines = vec![
            (
                "waiter;main;take;[L] wait for keeper:2;keep;fdatasync;[I] io wait".to_string(),
                6,
            ),
            ("waiter;main;take;[L] wait for keeper:2;keep".to_string(), 2),
            ("waiter;main;spin".to_string(), 1),
        ];
        let (cpu, io, lock) = (Class::Cpu.index(), Class::Io.index(), Class::Lock.index());
        assert_eq!(
            critical_tree(&lines).json(0),
            format!(
                r#"["all",9,{cpu},[["waiter",9,{cpu},[["main",9,{cpu},[["take",8,{cpu},[["[L] wait for keeper:2",8,{lock},[["keep",8,{cpu},[["fdatasync",6,{io},[["[I] io wait",6,{io},[]]]]]]]]]],["spin",1,{cpu},[]]]]]]]]"#
            )
        );
    }

    /// The deepest stack a trace holds (its frames, each with its inlined
    /// functions: 65536 levels) once made a recursion per level, which
    /// overflowed the thread's stack.
    #[test]
    fn the_deepest_stack_a_trace_holds_is_drawn_without_recursion() {
        let depth = holdup_trace::codec::MAX_STACK_FRAMES;
        // Made in the thread with the small stack (Rc is not sent).
        let json = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || {
                let frames = (0..depth)
                    .map(|i| {
                        (0..holdup_trace::codec::MAX_INLINED)
                            .map(|j| func(&format!("f{i}_{j}")))
                            .collect()
                    })
                    .collect();
                flame_tree(&[sample(Class::Lock, 1, frames)]).json(0)
            })
            .unwrap()
            .join()
            .expect("no stack overflow");
        // all, the thread, the functions, the subclass leaf ("[L] …").
        let levels = 2 + depth * holdup_trace::codec::MAX_INLINED + 1;
        assert_eq!(json.matches('[').count(), 2 * levels + 1);
        assert!(json.ends_with(&"]]".repeat(levels)));
    }
}
