//! What the waited-for side did, on the wait-for graph's edges: on a
//! program that times its own waits and I/O calls, the edge of the waiter
//! to the lock's keeper carries the keeper's I/O in the share the program
//! measured. Needs root and BPF.

use crate::support::*;
use serde_json::Value;
use std::path::PathBuf;

fn n(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// A recording of `held_io MODE`, its report and graph (JSON), the graph's
/// text, and the share of the waiter's mutex time the program measured
/// inside the I/O calls.
fn held_io(mode: &str) -> (PathBuf, Value, Value, String, f64) {
    let dir = scratch(&format!("waitgraph_held_{mode}"));
    let bin = workload("held_io");
    let file = dir.join("held_io.dat");
    let (data, stdout) = record_with_output(
        &dir,
        &[],
        &[bin.to_str().unwrap(), mode, file.to_str().unwrap(), "1.5"],
    );
    let path = data.to_str().unwrap();
    let graph = json(&["waitgraph", "--json", "-i", path]);
    let text = String::from_utf8(run_ok(&["waitgraph", "-i", path]).stdout).unwrap();
    let measured = printed_value(&stdout, "io_share");
    let r = report(&data);
    (data, r, graph, text, measured)
}

/// The tid of the report's thread called `comm`.
fn tid_of(r: &Value, comm: &str) -> u64 {
    threads(r)
        .iter()
        .find(|t| t["comm"] == comm)
        .and_then(|t| t["tid"].as_u64())
        .unwrap_or_else(|| panic!("no thread {comm} in the report"))
}

/// The edge of the graph from the vertex holding `from` to the one holding
/// `to`.
fn edge(g: &Value, from: u64, to: u64) -> &Value {
    let id = |tid: u64| {
        g["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["tids"].as_array().unwrap().iter().any(|t| t == tid))
            .map(|v| v["id"].clone())
            .unwrap_or_else(|| panic!("no vertex holds tid {tid}"))
    };
    let (a, b) = (id(from), id(to));
    g["edges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["from"] == a && e["to"] == b)
        .unwrap_or_else(|| panic!("no edge {a} → {b}"))
}

/// The waiter's runqueue time after its mutex waits, in samples: the
/// program's timing of the lock includes it.
fn runqueue(r: &Value) -> f64 {
    let waiter = threads(r).iter().find(|t| t["comm"] == "waiter").unwrap();
    site_samples(waiter, "take_lock", "sched")
}

/// Samples of the edge's activities done by `tid` at a site naming one of
/// `parts`, with `via` threads between.
fn at_sites(e: &Value, tid: u64, via: usize, parts: &[&str]) -> f64 {
    e["waited_for"]["activities"]
        .as_array()
        .unwrap_or_else(|| panic!("the edge lists nothing done meanwhile: {e}"))
        .iter()
        .filter(|a| a["tid"] == tid && a["via"].as_array().unwrap().len() == via)
        .filter(|a| {
            a["site"]
                .as_str()
                .is_some_and(|s| parts.iter().any(|p| s.contains(p)))
        })
        .map(|a| n(&a["samples"]))
        .sum()
}

/// The edge `from → to`, after checking that the activities of `tid` at
/// `sites` (through `via` threads) take the share of the waiter's mutex
/// time the program measured.
fn edge_with_share<'g>(
    g: &'g Value,
    r: &Value,
    (from, to): (u64, u64),
    (tid, via, sites): (u64, usize, &[&str]),
    measured: f64,
) -> &'g Value {
    let e = edge(g, from, to);
    let samples = n(&e["waited_for"]["samples"]);
    let share = at_sites(e, tid, via, sites) / (samples + runqueue(r));
    eprintln!(
        "edge {from} → {to}: {samples} samples, {tid} at {sites:?} {:.1}% (measured {:.1}%)",
        100.0 * share,
        100.0 * measured
    );
    assert!(samples >= 200.0, "too few samples to judge: {samples}");
    assert_near(
        "the share of the waited-for side's site",
        share,
        measured,
        0.05,
    );
    e
}

#[test]
#[ignore = "needs root and BPF"]
fn the_edge_to_the_keeper_lists_its_fdatasync() {
    let _serial = serial();
    let (_, r, g, text, measured) = held_io("lock");
    let (waiter, keeper) = (tid_of(&r, "waiter"), tid_of(&r, "keeper"));
    let io = (keeper, 0, &["fdatasync", "pwrite"][..]);
    let e = edge_with_share(&g, &r, (waiter, keeper), io, measured);
    let summary = e["waited_for"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("fdatasync") && summary.contains("[I]"),
        "{summary}"
    );
    // The text says it under the edge.
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("waiter:") && l.contains("→ keeper:"))
        .unwrap_or_else(|| panic!("no waiter → keeper edge:\n{text}"));
    assert!(
        lines[at + 1..]
            .iter()
            .take(5)
            .any(|l| l.contains("meanwhile") && l.contains("fdatasync")),
        "{text}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn the_edge_to_the_relay_ends_on_the_feeders_reads() {
    let _serial = serial();
    let (_, r, g, _, measured) = held_io("chain");
    let (waiter, relay, feeder) = (
        tid_of(&r, "waiter"),
        tid_of(&r, "relay"),
        tid_of(&r, "feeder"),
    );
    let reads = (feeder, 1, &["read_block"][..]);
    let e = edge_with_share(&g, &r, (waiter, relay), reads, measured);
    // The heaviest activity is the feeder's disk read, through the relay.
    let top = &e["waited_for"]["activities"][0];
    assert_eq!(top["tid"], feeder, "{top}");
    assert_eq!(top["class"], "io", "{top}");
    assert_eq!(top["via"][0]["tid"], relay, "{top}");
}
