//! `holdup latency` without root: the report's text and JSON of a hand-made
//! latency file against golden files, and damaged files.

use crate::support::latency::*;
use crate::support::*;
use holdup_trace::latency::{write_latency, IntervalHistogram, LatencyData};
use std::path::{Path, PathBuf};

/// A small recording made by hand: two processes, a bimodal operation.
fn fixture(dir: &Path, name: &str, slow: u64) -> PathBuf {
    let bucketed = |counts: &[(usize, u64)]| {
        let mut count = vec![0u64; 40];
        let mut ns = vec![0u64; 40];
        for &(s, c) in counts {
            count[s] = c;
            ns[s] = c * (3u64 << s) / 2;
        }
        (count, ns)
    };
    let hist = |op: &str, pid, comm: &str, interval, counts: &[(usize, u64)]| {
        let (count, ns) = bucketed(counts);
        IntervalHistogram {
            op: op.into(),
            pid,
            comm: comm.into(),
            interval,
            count,
            ns,
            cause_ns: Vec::new(),
        }
    };
    let data = LatencyData {
        holdup_version: "0.1.0".into(),
        command: vec!["./reader".into()],
        start_unix_ns: 0,
        duration_ns: 2_000_000_000,
        interval_ns: 1_000_000_000,
        lost_events: 0,
        requested: vec!["func:lookup".into()],
        histograms: vec![
            hist(
                "syscall:read",
                10,
                "reader",
                0,
                &[(11, 200), (12, 300), (13, 40)],
            ),
            hist(
                "syscall:read",
                10,
                "reader",
                1,
                &[(11, 100), (17, 5), (18, slow), (19, slow / 3)],
            ),
            hist("func:lookup", 10, "reader", 1, &[(9, 1000), (10, 20)]),
            hist("syscall:write", 11, "logger", 0, &[(8, 50)]),
        ],
        ..Default::default()
    };
    let path = dir.join(name);
    write_latency(std::fs::File::create(&path).unwrap(), &data).unwrap();
    path
}

#[test]
fn report_text_and_json_golden() {
    let dir = scratch("latency_golden");
    let data = fixture(&dir, "small.data", 120);
    let golden = repo_root().join("crates/holdup-cli/tests/latency_golden");
    let text = run_ok(&[
        "latency",
        "report",
        "-i",
        data.to_str().unwrap(),
        "--time-lapse",
        "1s",
    ]);
    assert_golden(&golden, "small.txt", &String::from_utf8_lossy(&text.stdout));
    let j = run_ok(&["latency", "report", "--json", "-i", data.to_str().unwrap()]);
    assert_golden(&golden, "small.json", &String::from_utf8_lossy(&j.stdout));
    let fixed = fixture(&dir, "fixed.data", 0);
    let d = run_ok(&[
        "latency",
        "diff",
        data.to_str().unwrap(),
        fixed.to_str().unwrap(),
    ]);
    let d = String::from_utf8_lossy(&d.stdout).replace(dir.to_str().unwrap(), "DIR");
    assert_golden(&golden, "small.diff.txt", &d);
}

#[test]
fn damaged_files_are_one_clear_line() {
    let dir = scratch("latency_damaged");
    let data = fixture(&dir, "good.data", 120);
    let bytes = std::fs::read(&data).unwrap();
    let cut = dir.join("cut.data");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    assert_one_line_error(
        &["latency", "report", "-i", cut.to_str().unwrap()],
        "truncated",
    );
    let mut flipped = bytes.clone();
    let last = flipped.len() - 5;
    flipped[last] ^= 0x11;
    let bad = dir.join("bad.data");
    std::fs::write(&bad, &flipped).unwrap();
    assert_one_line_error(
        &["latency", "report", "-i", bad.to_str().unwrap()],
        "corrupt",
    );
    let other = dir.join("other.data");
    std::fs::write(&other, b"not a latency file at all").unwrap();
    assert_one_line_error(
        &[
            "latency",
            "diff",
            data.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
        "not a holdup latency file",
    );
    assert_one_line_error(
        &[
            "latency",
            "report",
            "-i",
            dir.join("missing.data").to_str().unwrap(),
        ],
        "missing.data",
    );
    assert_one_line_error(
        &[
            "latency",
            "report",
            "--op",
            "syscall:nope",
            "-i",
            data.to_str().unwrap(),
        ],
        "no operation matching",
    );
}
