//! Lock waits of managed runtimes are classified by what the runtime does,
//! not by the glibc call underneath: a JVM thread entering a monitor that
//! another thread holds is contention, with the holder named; Go's OS
//! threads parked in the scheduler are idle. The workloads
//! (`workloads/runtimes/`) know their answer by construction. Needs root
//! and BPF.

use crate::support::runtimes::{
    assert_waits_for_holder, n, record_java, report_text, section, source,
};
use crate::support::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

#[test]
#[ignore = "needs root and BPF"]
fn a_jvm_thread_entering_a_held_monitor_waits_for_its_holder() {
    let _serial = serial();
    let (data, stdout) = record_java("runtimes_monitor", &[], "Monitor", &["3"]);
    let waiter = printed_value(&stdout, "waiter_tid") as u64;
    let holder = printed_value(&stdout, "holder_tid") as u64;
    let waited = printed_value(&stdout, "waited_s");
    // HotSpot parks a monitor's waiters on a condition variable; the wait
    // is still for the monitor.
    assert_waits_for_holder(&data, (waiter, holder), waited, "ObjectMonitor::EnterI");
}

/// A Go toolchain: the one in /usr/local/go, or Debian's.
pub fn go() -> &'static str {
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
