//! The renderers' outputs on synthetic traces whose answers are known by
//! construction, compared with golden files (`HOLDUP_BLESS=1` rewrites
//! them). The construction's numbers are asserted first, so a blessed file
//! cannot hide a wrong answer. No root, no BPF, no clang.

mod golden;

mod syscalls {
    use super::golden::{assert_golden, dir};
    use holdup_analysis::syscalls::{analyze, Options};
    use holdup_trace::synth;

    /// `holdup syscalls` as text and as `holdup.syscalls/1`.
    #[test]
    fn text_and_json_match_the_golden_files() {
        let r = synth::syscalls::overlapping_reads();
        let trace = r.trace(&r.header(), 0);
        let r = analyze(
            &trace,
            &Options {
                pids: Vec::new(),
                slowest: 2,
            },
        )
        .unwrap();
        let srv = &r.processes[0];
        let read = srv.calls.iter().find(|c| c.name == "read").unwrap();
        assert_eq!((read.count, read.total_ns), (40, 36_000_000));
        assert_eq!(read.blocked_ns.other, 20_000_000);
        assert_eq!(r.slowest.len(), 2);
        let mut text = Vec::new();
        holdup_render::syscalls::render(&mut text, &r).unwrap();
        let mut json = Vec::new();
        holdup_render::syscalls::write_json(&r, &mut json).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["schema"], "holdup.syscalls/1");
        json.push(b'\n');
        let d = dir("syscalls");
        assert_golden(&d, "overlapping.txt", &String::from_utf8(text).unwrap());
        assert_golden(&d, "overlapping.json", &String::from_utf8(json).unwrap());
    }
}

/// `holdup waitgraph` as text and DOT.
mod waitgraph {
    use super::golden::{assert_golden, dir};
    use holdup_analysis::waitgraph::{add_holders, analyze, InMemory, Options};
    use holdup_render::waitgraph::{render, to_dot, write_json, DotOptions, TextOptions};
    use holdup_trace::features;
    use holdup_trace::synth::{waits, WAIT_FEATURES};

    /// The lock pair's knot and the stray interrupt's sink, as `holdup
    /// waitgraph -i small.data` (and `--dot`) shows them.
    #[test]
    fn text_and_dot_match_the_golden_files() {
        let r = waits::lock_pair_and_stray_irq();
        let records = r.records();
        let mut src = InMemory {
            header: r.header(),
            features: features::SEGMENTS,
            records: &records,
        };
        let g = analyze(&mut src, &Options::default()).unwrap();
        // Each of a and b waits for the other 10 × 5 ms.
        let pair = &g.knots[0];
        let labels: Vec<&str> = pair
            .nodes
            .iter()
            .map(|&n| g.nodes[n].label.as_str())
            .collect();
        assert_eq!(labels, ["a:10", "b:11"]);
        assert_eq!(pair.edges.len(), 2);
        for &e in &pair.edges {
            let e = &g.edges[e];
            assert_eq!((e.wait_ns, e.count), (50_000_000, 10), "{e:?}");
        }
        let mut text = Vec::new();
        let o = TextOptions {
            source: "small.data".into(),
            ..Default::default()
        };
        render(&mut text, &g, &o).unwrap();
        let dot = to_dot(
            &g,
            &DotOptions {
                title: "holdup waitgraph small.data".into(),
                ..Default::default()
            },
        );
        let d = dir("waitgraph");
        assert_golden(&d, "small.txt", &String::from_utf8(text).unwrap());
        assert_golden(&d, "small.dot", &dot);
    }

    /// `holdup waitgraph --json` on wPerf's Figure 1, with what the
    /// waited-for side did: the producer's 800 blocked points on the
    /// consumer, 6 of every 8.001 ms of them in the consumer's write.
    #[test]
    fn json_matches_the_golden_file() {
        let r = waits::figure_1();
        let records = r.records();
        let mut src = InMemory {
            header: r.header(),
            features: WAIT_FEATURES,
            records: &records,
        };
        let mut g = analyze(&mut src, &Options::default()).unwrap();
        add_holders(&r.trace(&r.header(), WAIT_FEATURES), &mut g);
        let mut json = Vec::new();
        write_json(&mut json, &g).unwrap();
        json.push(b'\n');
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        // Each object's keys in the order of their names, as a map sorts
        // them: the same bytes when written again from the parsed value.
        let mut again = serde_json::to_vec_pretty(&v).unwrap();
        again.push(b'\n');
        assert!(again == json, "keys out of order");
        let edge = v["edges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["from"] == "t:10" && e["to"] == "t:11")
            .unwrap();
        let held = &edge["waited_for"];
        assert_eq!(held["samples"], 800.0);
        let write = held["activities"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["class"] == "io" && a["tid"] == 11)
            .unwrap();
        let want = 800.0 * 6.0 / 8.001;
        assert!((write["samples"].as_f64().unwrap() - want).abs() < 0.05);
        assert_golden(
            &dir("waitgraph"),
            "figure_1.json",
            &String::from_utf8(json).unwrap(),
        );
    }
}

/// `holdup report` (text, callers view, sections by name, JSON), `script`
/// and `flame` on the small trace.
mod report {
    use super::golden::{assert_golden, dir};
    use holdup_analysis::folded::{self, FoldOptions};
    use holdup_analysis::profile::{self, Filter, Section};
    use holdup_render::flame::{self, FlameOptions};
    use holdup_render::report::{self, ReportOptions};
    use holdup_trace::synth::small;
    use holdup_trace::{features, Trace};

    fn small_trace() -> Trace {
        small::trace("a").trace(&small::header(), features::SEGMENTS)
    }

    /// The report's text with the sections `section`, as
    /// `holdup report -i small.data` shows it.
    fn text(trace: &Trace, section: Section, children: bool) -> String {
        let mut p = profile::profile(trace, &Filter::default());
        p.threads = profile::group(std::mem::take(&mut p.threads), section);
        let o = ReportOptions {
            children,
            source: "small.data".into(),
            ..Default::default()
        };
        let mut out = Vec::new();
        report::render(&mut out, &p, &o).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The JSON report carries the trace's construction: thread a has 5
    /// on-CPU and 3 lock points, b 3 on-CPU, 4 I/O and 2 of runqueue
    /// (steal).
    #[test]
    fn report_json_has_the_constructed_totals() {
        let p = profile::profile(&small_trace(), &Filter::default());
        let mut out = Vec::new();
        report::write_json(&p, &mut out).unwrap();
        out.push(b'\n');
        let got = String::from_utf8(out).unwrap();
        let v: serde_json::Value = serde_json::from_str(&got).unwrap();
        let threads = v["threads"].as_array().expect("threads");
        let by_tid = |tid: u64| {
            threads
                .iter()
                .find(|t| t["tid"] == tid)
                .unwrap_or_else(|| panic!("thread {tid} in {got}"))
        };
        let a = by_tid(10);
        let b = by_tid(11);
        let class = |t: &serde_json::Value, c: &str| t["samples"][c].as_u64().unwrap();
        let counts = |t| ["cpu", "io", "lock", "sched", "other"].map(|c| class(t, c));
        assert_eq!(counts(a), [5, 0, 3, 0, 0], "{a}");
        assert_eq!(counts(b), [3, 4, 0, 2, 0], "{b}");
        assert_golden(&dir("report"), "small.json", &got);
    }

    #[test]
    fn report_text_and_views_match_the_golden_files() {
        let trace = small_trace();
        let d = dir("report");
        assert_golden(&d, "small.txt", &text(&trace, Section::Thread, false));
        assert_golden(
            &d,
            "small.children.txt",
            &text(&trace, Section::Thread, true),
        );
        assert_golden(&d, "small.comm.txt", &text(&trace, Section::Comm, false));
        let stacks = folded::folded(&trace, &FoldOptions::default());
        let mut out = Vec::new();
        folded::write_folded(&mut out, &stacks).unwrap();
        assert_golden(&d, "small.script.folded", &String::from_utf8(out).unwrap());
    }

    /// The flame graph's SVG: every frame of the trace is in it with its
    /// subclass colour, and the whole file is pinned.
    #[test]
    fn flame_svg_matches_the_golden_file() {
        let stacks = folded::folded(&small_trace(), &FoldOptions::default());
        let mut out = Vec::new();
        let o = FlameOptions {
            title: "small".into(),
        };
        flame::render(&stacks, &o, &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        for name in ["main", "work", "helper", "pthread_mutex_lock", "vfs_read"] {
            assert!(svg.contains(name), "{name} missing from the flame graph");
        }
        assert_golden(&dir("report"), "small.flame.svg", &svg);
    }
}
