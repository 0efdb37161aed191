//! `report` (text, callers view, sections by name, JSON), `script` and
//! `flame` on the small hand-made trace whose totals are known by
//! construction, compared with golden files (`HOLDUP_BLESS=1` rewrites
//! them). The construction's totals are asserted first, so a blessed file
//! cannot hide a wrong answer.

mod support;

use std::path::{Path, PathBuf};
use support::small_trace::*;
use support::*;

fn setup(test: &str) -> PathBuf {
    let dir = scratch(test);
    small_trace(&dir.join("small.data"));
    dir
}

fn run(dir: &Path, args: &[&str]) -> String {
    let out = holdup().current_dir(dir).args(args).bounded_output();
    assert!(
        out.status.success(),
        "holdup {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn golden_dir() -> PathBuf {
    repo_root().join("crates/holdup-cli/tests/report_golden")
}

/// The JSON report carries the trace's construction: thread a has 5 on-CPU
/// and 3 lock points, b 3 on-CPU, 4 I/O and 2 of runqueue (steal).
#[test]
fn report_json_has_the_constructed_totals() {
    let dir = setup("report_golden_json");
    let got = run(&dir, &["report", "--json", "-i", "small.data"]);
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
    assert_golden(&golden_dir(), "small.json", &got);
}

#[test]
fn report_text_and_views_match_the_golden_files() {
    let dir = setup("report_golden_text");
    for (args, file) in [
        (vec!["report", "-i", "small.data"], "small.txt"),
        (
            vec!["report", "--children", "-i", "small.data"],
            "small.children.txt",
        ),
        (
            vec!["report", "--sort", "comm", "-i", "small.data"],
            "small.comm.txt",
        ),
        (vec!["script", "-i", "small.data"], "small.script.folded"),
    ] {
        let got = run(&dir, &args);
        assert_golden(&golden_dir(), file, &got);
    }
}

/// The flame graph's SVG: every frame of the trace is in it with its
/// subclass colour, and the whole file is pinned.
#[test]
fn flame_svg_matches_the_golden_file() {
    let dir = setup("report_golden_flame");
    run(
        &dir,
        &[
            "flame",
            "-i",
            "small.data",
            "-o",
            "flame.svg",
            "--title",
            "small",
        ],
    );
    let svg = std::fs::read_to_string(dir.join("flame.svg")).unwrap();
    for name in ["main", "work", "helper", "pthread_mutex_lock", "vfs_read"] {
        assert!(svg.contains(name), "{name} missing from the flame graph");
    }
    assert_golden(&golden_dir(), "small.flame.svg", &svg);
}
