//! `holdup waitgraph` on hand-made trace files: empty, tiny, segment-less,
//! unknown devices and interrupts, output formats.

use crate::support::waitgraph::*;
use crate::support::*;
use holdup_trace::{features, Class, Finish, Header, Record, Segment, Waker, Writer};
use std::path::Path;

const MS: u64 = 1_000_000;
const T0: u64 = 5_000 * MS;

fn write_trace(path: &Path, feats: u32, records: &[Record]) {
    let header = Header {
        period_ns: MS,
        start_ns: T0,
        hostname: "test-host-that-is-not-this-one".into(),
        ..Default::default()
    };
    let mut w = Writer::create(path, &header, feats).unwrap();
    for r in records {
        w.write(r).unwrap();
    }
    w.finish().unwrap();
}

fn seg(tid: u32, start: u64, wake: u64, end: u64, class: Class, waker: Waker) -> Record {
    Record::Segment(Segment {
        pid: 1,
        tid,
        start: T0 + start * MS,
        wake: if wake == 0 { 0 } else { T0 + wake * MS },
        end: T0 + end * MS,
        class,
        waker,
        cpu: Some(0),
    })
}

fn comm(tid: u32, c: &str) -> Record {
    Record::Comm {
        time: T0,
        pid: 1,
        tid,
        comm: c.into(),
    }
}

fn finish(at: u64) -> Record {
    Record::Finish(Finish {
        time: T0 + at * MS,
        exit_code: Some(0),
    })
}

fn fails_with(args: &[&str], needle: &str) {
    let out = holdup().args(args).bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    // One sentence: no cause repeated by the error chain.
    assert!(err.matches("os error").count() <= 1, "{err}");
}

#[test]
fn empty_damaged_and_segmentless_files_give_one_clear_sentence() {
    let dir = scratch("wg_empty");
    let empty = dir.join("empty.data");
    write_trace(&empty, features::SEGMENTS, &[finish(10)]);
    fails_with(
        &["waitgraph", "-i", empty.to_str().unwrap()],
        "no wait segments",
    );

    let noseg = dir.join("noseg.data");
    write_trace(&noseg, 0, &[finish(10)]);
    fails_with(
        &["waitgraph", "-i", noseg.to_str().unwrap()],
        "--no-segments",
    );

    let garbage = dir.join("garbage.data");
    std::fs::write(&garbage, b"this is not a trace").unwrap();
    fails_with(
        &["waitgraph", "-i", garbage.to_str().unwrap()],
        "not a holdup trace",
    );

    let zero = dir.join("zero.data");
    std::fs::write(&zero, b"").unwrap();
    fails_with(
        &["waitgraph", "-i", zero.to_str().unwrap()],
        "not a holdup trace",
    );

    fails_with(
        &[
            "waitgraph",
            "-i",
            dir.join("missing.data").to_str().unwrap(),
        ],
        "missing.data",
    );
    fails_with(
        &[
            "waitgraph",
            "--threshold",
            "lots",
            "-i",
            empty.to_str().unwrap(),
        ],
        "not a threshold",
    );
}

/// Two threads and an interrupt that no device explains.
fn small_trace(path: &Path) {
    let r = holdup_trace::synth::waits::lock_pair_and_stray_irq();
    r.write(path, &r.header(), features::SEGMENTS).unwrap();
}

#[test]
fn tiny_traces_and_unknown_interrupts_work() {
    let dir = scratch("wg_tiny");
    let one = dir.join("one.data");
    write_trace(
        &one,
        features::SEGMENTS,
        &[
            comm(7, "x"),
            seg(7, 1, 2, 3, Class::Other, Waker::Timer),
            finish(5),
        ],
    );
    let g = waitgraph(&one, &[]);
    assert_eq!(g["events"], 2, "one switch and one wakeup");
    let timer = g["knots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["nodes"][0] == "timer")
        .expect("timer sink");
    assert_eq!(timer["background"], true, "paced by a timer: set aside");

    let small = dir.join("small.data");
    small_trace(&small);
    let g = waitgraph(&small, &[]);
    let irq = node(&g, |n| n["id"] == "irq:99", "irq 99");
    assert_eq!(irq["kind"], "irq");
    assert!(
        g["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("irq 99 could not be tied to a device")),
        "{}",
        g["notes"]
    );
    let knots = main_knots(&g);
    assert_eq!(
        ids(knots[0]),
        ["t:10", "t:11"].map(String::from).into(),
        "{}",
        g["knots"]
    );
}

#[test]
fn svg_is_rendered_with_graphviz() {
    if std::process::Command::new("dot")
        .arg("-V")
        .output()
        .is_err()
    {
        panic!("GraphViz `dot` is needed (apt install graphviz)");
    }
    let dir = scratch("wg_svg");
    let small = dir.join("small.data");
    small_trace(&small);
    let svg = dir.join("g.svg");
    run_ok(&[
        "waitgraph",
        "-i",
        small.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(
        s.contains("<svg") && s.contains("a:10") && s.contains("knot 1"),
        "{}",
        &s[..s.len().min(400)]
    );
}

/// `waitgraph` and `html` name a disk alike: both by this machine's name
/// for it when the trace was recorded here (a disk of this machine stands
/// in for the synthetic one), by its numbers otherwise.
#[test]
fn waitgraph_and_html_name_the_same_disk_alike() {
    use holdup_trace::devices::{block_devices, major_minor};
    use holdup_trace::synth::{waits, DISK, WAIT_FEATURES};
    let dir = scratch("wg_disk_names");
    let here = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let (dev, name) = block_devices()
        .into_iter()
        .min()
        .map_or((DISK, None), |(dev, name)| (dev, Some(name)));
    let (ma, mi) = major_minor(dev);
    let mut r = waits::figure_1();
    for (_, rec) in &mut r.timed {
        if let Record::BioIssue(b) | Record::BioDone(b) = rec {
            b.dev = dev;
        }
    }
    for (host, named) in [(here.trim(), name.as_deref()), ("elsewhere", None)] {
        let data = dir.join("disk.data");
        let header = Header {
            hostname: host.into(),
            ..r.header()
        };
        r.write(&data, &header, WAIT_FEATURES).unwrap();
        let want = match named {
            Some(n) => format!("{n} ({ma}:{mi})"),
            None => format!("disk {ma}:{mi}"),
        };
        let g = waitgraph(&data, &[]);
        assert_eq!(disk(&g)["label"], want.as_str());
        let page = dir.join("disk.html");
        run_ok(&[
            "html",
            "-i",
            data.to_str().unwrap(),
            "-o",
            page.to_str().unwrap(),
        ]);
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(
            html.contains(&want),
            "the page does not name the disk {want}"
        );
    }
}
