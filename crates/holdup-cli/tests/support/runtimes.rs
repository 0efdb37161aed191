//! The managed runtimes' workloads (`workloads/runtimes/`) and the report
//! parts their tests read.

use super::{repo_root, run_ok, threads, Bounded};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn source(name: &str) -> PathBuf {
    repo_root().join("workloads/runtimes").join(name)
}

/// Compile `workloads/runtimes/<class>.java`, with the classes it uses,
/// into a scratch directory for `test`, and record `java FLAGS… CLASS
/// ARGS…` there: the trace and what the program printed.
pub fn record_java(test: &str, flags: &[&str], class: &str, args: &[&str]) -> (PathBuf, String) {
    let dir = super::scratch(test);
    let status = Command::new("javac")
        .args(["-d", dir.to_str().unwrap(), "-sourcepath"])
        .arg(source(""))
        .arg(source(&format!("{class}.java")))
        .bounded_status();
    assert!(status.success(), "javac {class}");
    let mut cmd = vec!["java"];
    cmd.extend_from_slice(flags);
    cmd.extend(["-cp", dir.to_str().unwrap(), class]);
    cmd.extend_from_slice(args);
    super::record_with_output(&dir, &[], &cmd)
}

pub fn thread_by_tid(r: &Value, tid: u64) -> &Value {
    threads(r)
        .iter()
        .find(|t| t["tid"] == tid)
        .unwrap_or_else(|| panic!("no thread {tid} in the report"))
}

pub fn report_text(data: &Path) -> String {
    let out = run_ok(&["report", "-i", data.to_str().unwrap()]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The text report's head of one thread's section: header, summary, advice.
pub fn section(text: &str, tid: u64) -> String {
    let head = format!(" tid {tid}: ");
    text.lines()
        .skip_while(|l| !l.contains(&head))
        .take(3)
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn n(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A thread that measured `waited_s` taking a lock the thread `holder`
/// held (`(waiter, holder)`, their tids): at least 90% of its lock time is
/// contention, the sites whose label has `site` hold the time it measured
/// (their lock wait plus the runqueue wait after each handoff; its
/// spinning before it parks is on-CPU), and the holder is named for at
/// least 90% of it, in the JSON and in the text.
pub fn assert_waits_for_holder(
    data: &Path,
    (waiter, holder): (u64, u64),
    waited_s: f64,
    site: &str,
) {
    let r = super::report(data);
    let t = thread_by_tid(&r, waiter);
    let lock = n(&t["samples"]["lock"]);
    let mutex = n(&t["lock_split"]["mutex"]);
    eprintln!("waiter: {mutex} of {lock} lock samples are contention; it measured {waited_s:.3} s taking the lock");
    assert!(mutex >= 0.9 * lock, "{}", t["lock_split"]);
    let secs = |samples: f64| samples * n(&r["period_ns"]) / 1e9;
    let at_site = super::site_samples(t, site, "lock") + super::site_samples(t, site, "sched");
    super::assert_near(
        "seconds waiting to take the lock",
        secs(at_site),
        waited_s,
        0.05 + 0.1 * waited_s,
    );
    // The thread that released the lock ended the waits, timed re-checks
    // included.
    let lock_site = t["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["class"] == "lock")
        .unwrap();
    assert_eq!(lock_site["lock_kind"], "mutex", "{lock_site}");
    let by_holder: f64 = lock_site["wakers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["name"] == format!("holder:{holder}"))
        .map(|w| n(&w["samples"]))
        .sum();
    let share = by_holder / n(&lock_site["samples"]);
    eprintln!("holder named for {:.1}% of the site's wait", 100.0 * share);
    assert!(share >= 0.9, "holder named for {share:.2} of {lock_site}");
    // The text report says so in the waiter's summary and its rows.
    let text = report_text(data);
    let summary = section(&text, waiter);
    assert!(summary.contains("(mutex "), "{summary}");
    assert!(
        text.contains(&format!("held by: holder:{holder} ")),
        "{text}"
    );
}
