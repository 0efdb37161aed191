//! What the holder was doing: on programs that time their own waits and
//! I/O calls, the report's while-held activity of a waiter's mutex row
//! against the program's measure, on the real kernel. Needs root and BPF.

use crate::support::*;
use serde_json::Value;
use std::path::Path;

fn n(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

fn thread<'a>(r: &'a Value, comm: &str) -> &'a Value {
    threads(r)
        .iter()
        .find(|t| t["comm"] == comm)
        .unwrap_or_else(|| panic!("no thread {comm} in the report"))
}

fn tid(t: &Value) -> u64 {
    t["tid"].as_u64().unwrap()
}

/// The waiter's rows of its mutex site: the [L] rows and the runqueue row
/// after their wakeups (the program's timing includes that, too).
fn mutex_rows(waiter: &Value) -> (Vec<&Value>, f64) {
    let sites = waiter["sites"].as_array().unwrap();
    let rows: Vec<&Value> = sites
        .iter()
        .filter(|s| s["class"] == "lock" && s["lock_kind"] == "mutex")
        .collect();
    assert!(!rows.is_empty(), "no mutex row: {waiter}");
    let runqueue: f64 = sites
        .iter()
        .filter(|s| s["class"] == "sched" && s["site"].as_str().unwrap().contains("take_lock"))
        .map(|s| n(&s["samples"]))
        .sum();
    (rows, runqueue)
}

/// The activities under the mutex rows, with the row weight they explain.
fn activities<'a>(rows: &[&'a Value]) -> Vec<&'a Value> {
    rows.iter()
        .filter_map(|r| r["while_held"]["activities"].as_array())
        .flatten()
        .collect()
}

fn site_has(a: &Value, parts: &[&str]) -> bool {
    a["site"]
        .as_str()
        .is_some_and(|s| parts.iter().any(|p| s.contains(p)))
}

fn record_held_io(dir: &Path, mode: &str) -> (Value, String, f64) {
    let bin = workload("held_io");
    let file = dir.join("held_io.dat");
    let (data, stdout) = record_with_output(
        dir,
        &[],
        &[bin.to_str().unwrap(), mode, file.to_str().unwrap(), "1.5"],
    );
    let measured = printed_value(&stdout, "io_share");
    let text = String::from_utf8(run_ok(&["report", "-i", data.to_str().unwrap()]).stdout).unwrap();
    (report(&data), text, measured)
}

#[test]
#[ignore = "needs root and BPF"]
fn io_inside_a_lock_is_what_the_waiter_waits_for() {
    let _serial = serial();
    let dir = scratch("held_io_lock");
    let (r, text, measured) = record_held_io(&dir, "lock");
    let keeper = tid(thread(&r, "keeper"));
    let waiter = thread(&r, "waiter");
    let (rows, runqueue) = mutex_rows(waiter);
    let locked: f64 = rows.iter().map(|s| n(&s["samples"])).sum();
    let acts = activities(&rows);
    // The holder's activity: its own, or a chain that starts at it.
    let by_keeper: f64 = acts
        .iter()
        .filter(|a| {
            let via = a["via"].as_array().unwrap();
            match via.first() {
                None => a["tid"] == keeper,
                Some(v) => v["tid"] == keeper,
            }
        })
        .filter(|a| {
            !matches!(
                a["state"].as_str(),
                Some("unrecorded" | "not_alive" | "cut")
            )
        })
        .map(|a| n(&a["samples"]))
        .sum();
    let io: f64 = acts
        .iter()
        .filter(|a| a["tid"] == keeper && site_has(a, &["fdatasync", "pwrite"]))
        .map(|a| n(&a["samples"]))
        .sum();
    let io_share = io / (locked + runqueue);
    eprintln!(
        "mutex {locked} + runqueue {runqueue} samples; keeper's activity {:.1}%, its I/O calls {:.1}% (measured {:.1}%)",
        100.0 * by_keeper / locked,
        100.0 * io_share,
        100.0 * measured
    );
    assert!(locked >= 200.0, "too few mutex samples to judge: {locked}");
    assert!(
        by_keeper >= 0.9 * locked,
        "only {by_keeper} of {locked} mutex samples attributed to the keeper"
    );
    assert_near("I/O site share", io_share, measured, 0.05);
    let line = text
        .lines()
        .find(|l| l.contains("while held:"))
        .unwrap_or_else(|| panic!("no while-held line:\n{text}"));
    assert!(line.contains("sync_under_lock → fdatasync"), "{line}");
}

#[test]
#[ignore = "needs root and BPF"]
fn a_wait_through_a_mutex_and_a_pipe_ends_on_the_disk_reads() {
    let _serial = serial();
    let dir = scratch("held_io_chain");
    let (r, text, measured) = record_held_io(&dir, "chain");
    let relay = tid(thread(&r, "relay"));
    let feeder = tid(thread(&r, "feeder"));
    let waiter = thread(&r, "waiter");
    let (rows, runqueue) = mutex_rows(waiter);
    let locked: f64 = rows.iter().map(|s| n(&s["samples"])).sum();
    let acts = activities(&rows);
    // The feeder's reads, reached through the relay's pipe wait.
    let through_relay = |a: &&&Value| {
        let via = a["via"].as_array().unwrap();
        via.len() == 1 && via[0]["tid"] == relay && via[0]["class"] == "other"
    };
    let reads: f64 = acts
        .iter()
        .filter(through_relay)
        .filter(|a| a["tid"] == feeder && site_has(a, &["read_block"]))
        .map(|a| n(&a["samples"]))
        .sum();
    let disk: f64 = acts
        .iter()
        .filter(through_relay)
        .filter(|a| a["tid"] == feeder && a["class"] == "io" && site_has(a, &["read_block"]))
        .map(|a| n(&a["samples"]))
        .sum();
    let share = reads / (locked + runqueue);
    eprintln!(
        "mutex {locked} + runqueue {runqueue} samples; feeder's reads {:.1}% ([I] {:.1}%), measured {:.1}%",
        100.0 * share,
        100.0 * disk / locked,
        100.0 * measured
    );
    assert!(locked >= 200.0, "too few mutex samples to judge: {locked}");
    assert_near("feeder's read share", share, measured, 0.05);
    // The heaviest thing the waiter waits for is the disk read.
    let top = acts
        .iter()
        .max_by(|a, b| n(&a["samples"]).total_cmp(&n(&b["samples"])))
        .unwrap();
    assert_eq!(top["tid"], feeder, "{top}");
    assert_eq!(top["class"], "io", "{top}");
    assert!(
        text.lines()
            .any(|l| l.contains("while held: feeder:") && l.contains("via relay:")),
        "{text}"
    );
    // The critical path of the waiter: the same reads, through both waits.
    let data = dir.join("holdup.data");
    let data = data.to_str().unwrap();
    let cp = critical_path(data, &["--comm", "waiter"]);
    let w = &cp["threads"][0];
    let via_reads: f64 = w["activities"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["tid"] == feeder && a["via"].as_array().unwrap().len() == 2)
        .filter(|a| site_has(a, &["read_block"]))
        .map(|a| n(&a["samples"]))
        .sum();
    assert!(
        (via_reads - reads).abs() <= 0.02 * locked,
        "critical path {via_reads} vs rows {reads}"
    );
    let svg = critical_flame(&dir, data, &["--comm", "waiter"]);
    assert!(
        svg.contains(&format!("[L] wait for relay:{relay}")),
        "no wait edge in the flame graph"
    );
    assert!(
        svg.contains(&format!("[B] wait for feeder:{feeder}")),
        "no wait edge in the flame graph"
    );
}
