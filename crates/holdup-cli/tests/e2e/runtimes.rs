//! Lock waits of managed runtimes are classified by what the runtime does,
//! not by the glibc call underneath: a JVM thread entering a monitor that
//! another thread holds is contention, with the holder named; Go's OS
//! threads parked in the scheduler are idle. The workloads
//! (`workloads/runtimes/`) know their answer by construction. Needs root
//! and BPF.

use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn n(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn source(name: &str) -> PathBuf {
    repo_root().join("workloads/runtimes").join(name)
}

fn thread_by_tid(r: &Value, tid: u64) -> &Value {
    threads(r)
        .iter()
        .find(|t| t["tid"] == tid)
        .unwrap_or_else(|| panic!("no thread {tid} in the report"))
}

fn report_text(data: &Path) -> String {
    let out = run_ok(&["report", "-i", data.to_str().unwrap()]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The text report's head of one thread's section: header, summary, advice.
fn section(text: &str, tid: u64) -> String {
    let head = format!(" tid {tid}: ");
    text.lines()
        .skip_while(|l| !l.contains(&head))
        .take(3)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
#[ignore = "needs root and BPF"]
fn a_jvm_thread_entering_a_held_monitor_waits_for_its_holder() {
    let _serial = serial();
    let dir = scratch("runtimes_monitor");
    let status = Command::new("javac")
        .args(["-d", dir.to_str().unwrap()])
        .arg(source("Monitor.java"))
        .bounded_status();
    assert!(status.success(), "javac");
    let (data, stdout) = record_with_output(
        &dir,
        &[],
        &["java", "-cp", dir.to_str().unwrap(), "Monitor", "3"],
    );
    let waiter = printed_value(&stdout, "waiter_tid") as u64;
    let holder = printed_value(&stdout, "holder_tid") as u64;
    let waited = printed_value(&stdout, "waited_s");
    let r = report(&data);
    let t = thread_by_tid(&r, waiter);
    // HotSpot parks a monitor's waiters on a condition variable; the wait
    // is still for the monitor.
    let lock = n(&t["samples"]["lock"]);
    let mutex = n(&t["lock_split"]["mutex"]);
    eprintln!("waiter: {mutex} of {lock} lock samples are contention; it measured {waited:.3} s entering the monitor");
    assert!(mutex >= 0.9 * lock, "{}", t["lock_split"]);
    // Ground truth: the time the waiter measured entering the monitor is
    // the monitor site's lock wait plus the runqueue wait after each
    // handoff (its spinning before it parks is on-CPU).
    let secs = |samples: f64| samples * n(&r["period_ns"]) / 1e9;
    let at_enter = site_samples(t, "ObjectMonitor::EnterI", "lock")
        + site_samples(t, "ObjectMonitor::EnterI", "sched");
    assert_near(
        "seconds waiting to enter the monitor",
        secs(at_enter),
        waited,
        0.05 + 0.1 * waited,
    );
    // The holder is named: the thread that released the monitor ended the
    // waits, timed re-checks included.
    let site = t["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["class"] == "lock")
        .unwrap();
    assert_eq!(site["lock_kind"], "mutex", "{site}");
    let by_holder: f64 = site["wakers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["name"] == format!("holder:{holder}"))
        .map(|w| n(&w["samples"]))
        .sum();
    let share = by_holder / n(&site["samples"]);
    eprintln!("holder named for {:.1}% of the site's wait", 100.0 * share);
    assert!(share >= 0.9, "holder named for {share:.2} of {site}");
    // The text report says so in the waiter's summary and its rows.
    let text = report_text(&data);
    let summary = section(&text, waiter);
    assert!(summary.contains("(mutex "), "{summary}");
    assert!(
        text.contains(&format!("held by: holder:{holder} ")),
        "{text}"
    );
}

/// A Go toolchain: the one in /usr/local/go, or Debian's.
fn go() -> &'static str {
    if Path::new("/usr/local/go/bin/go").exists() {
        "/usr/local/go/bin/go"
    } else {
        "go"
    }
}

#[test]
#[ignore = "needs root and BPF"]
fn go_threads_parked_in_the_scheduler_are_idle_not_contention() {
    let _serial = serial();
    let dir = scratch("runtimes_go_parkers");
    let bin = dir.join("parkers");
    let status = Command::new(go())
        .args(["build", "-o"])
        .arg(&bin)
        .arg(source("parkers.go"))
        .bounded_status();
    assert!(status.success(), "go build");
    let (data, stdout) = record_with_output(&dir, &[], &[bin.to_str().unwrap(), "2"]);
    assert!(printed_value(&stdout, "handoffs") > 100.0, "{stdout}");
    let r = report(&data);
    let ts: Vec<&Value> = threads(&r)
        .iter()
        .filter(|t| t["comm"] == "parkers")
        .collect();
    // No goroutine ever takes a lock: its OS threads wait for work only.
    let lock: f64 = ts.iter().map(|t| n(&t["samples"]["lock"])).sum();
    let mutex: f64 = ts.iter().map(|t| n(&t["lock_split"]["mutex"])).sum();
    let idle: f64 = ts.iter().map(|t| n(&t["lock_split"]["idle"])).sum();
    eprintln!(
        "{} threads: {mutex} of {lock} lock samples called contention, {idle} idle",
        ts.len()
    );
    assert!(lock > 1000.0, "the OS threads park for seconds: {lock}");
    assert_eq!(mutex, 0.0, "no lock is ever contended");
    assert!(idle >= 0.99 * lock, "idle {idle} of {lock}");
    // The summary and advice of the thread parked longest say idle.
    let parked = ts
        .iter()
        .max_by_key(|t| t["lock_split"]["idle"].as_u64().unwrap())
        .unwrap();
    let text = section(&report_text(&data), parked["tid"].as_u64().unwrap());
    assert!(text.contains("idle ("), "{text}");
    assert!(
        text.contains("parked in the scheduler") || text.contains("network poller"),
        "{text}"
    );
    assert!(!text.contains("mutexes held by other threads"), "{text}");
}
