//! JVM lock waits end to end, beyond the monitor's report: the wait-for
//! graph credits a monitor's timed re-checks to its holder, a thread
//! taking a `ReentrantLock` another thread holds is contention with the
//! holder named, and a pool's workers waiting for tasks are idle. The
//! workloads (`workloads/runtimes/`) know their answer by construction.
//! Needs root and BPF.

use crate::support::runtimes::{
    assert_waits_for_holder, n, record_java, report_text, section, thread_by_tid,
};
use crate::support::*;

#[test]
#[ignore = "needs root and BPF"]
fn a_monitor_waiter_waits_for_its_holder_in_the_wait_for_graph() {
    let _serial = serial();
    let (data, stdout) = record_java("jvm_monitor_waitgraph", &[], "Monitor", &["2"]);
    let waiter = format!("t:{}", printed_value(&stdout, "waiter_tid"));
    let holder = format!("t:{}", printed_value(&stdout, "holder_tid"));
    let g = json(&["waitgraph", "--json", "-i", data.to_str().unwrap()]);
    // HotSpot re-checks a monitor after 1 ms, then 8 ms, … with timed parks
    // the timer ends; the holder's release ends the last. Every wait of the
    // chain waited for the holder.
    let out: Vec<&serde_json::Value> = g["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["from"] == waiter.as_str())
        .collect();
    let total: f64 = out.iter().map(|e| n(&e["weight_ns"])).sum();
    let to_holder: f64 = out
        .iter()
        .filter(|e| e["to"] == holder.as_str())
        .map(|e| n(&e["weight_ns"]))
        .sum();
    let share = to_holder / total;
    eprintln!(
        "{waiter} waits {:.3} s, {:.1}% of it for {holder}",
        total / 1e9,
        100.0 * share
    );
    assert!(total > 0.2e9, "the waiter waits: {out:?}");
    assert!(share >= 0.9, "{out:?}");
}

#[test]
#[ignore = "needs root and BPF"]
fn a_reentrant_lock_waiter_waits_for_its_holder_and_idle_pool_threads_are_idle() {
    let _serial = serial();
    // Java frames have names only in compiled code, in a perf map, which
    // names a compiled method but not what it inlined: the frames the
    // rules match on are kept out of line, as the JIT leaves them in
    // programs whose callers of lock() or getTask are not compiled.
    let flags = [
        "-XX:+PreserveFramePointer",
        "-XX:+UnlockDiagnosticVMOptions",
        "-XX:+DumpPerfMapAtExit",
        "-XX:CompileCommand=quiet",
        "-XX:CompileCommand=dontinline,java.util.concurrent.locks.ReentrantLock::lock",
        "-XX:CompileCommand=dontinline,java.util.concurrent.ThreadPoolExecutor::getTask",
    ];
    let (data, stdout) = record_java("jvm_parks", &flags, "Parks", &["2"]);
    let tid = |key: &str| printed_value(&stdout, key) as u64;
    // A ReentrantLock parks its waiters in LockSupport.park under an AQS
    // acquire: contention, though the park is the same as a pool thread's.
    let pair = (tid("waiter_tid"), tid("holder_tid"));
    let waited = printed_value(&stdout, "waited_s");
    assert_waits_for_holder(&data, pair, waited, "Parker::park");

    let r = report(&data);
    let text = report_text(&data);
    let idle_tids: Vec<u64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("idle_tid ")?.parse().ok())
        .collect();
    assert_eq!(idle_tids.len(), 2, "{stdout}");
    for idle_tid in idle_tids {
        let t = thread_by_tid(&r, idle_tid);
        let lock = n(&t["samples"]["lock"]);
        let (idle, mutex) = (n(&t["lock_split"]["idle"]), n(&t["lock_split"]["mutex"]));
        eprintln!("pool thread {idle_tid}: {idle} of {lock} lock samples idle, {mutex} contention");
        // Parked in getTask for about the whole 2 s run.
        assert!(lock >= 1500.0, "{}", t["samples"]);
        assert!(idle >= 0.9 * lock, "{}", t["lock_split"]);
        assert!(mutex <= 0.02 * lock, "{}", t["lock_split"]);
        let summary = section(&text, idle_tid);
        assert!(
            summary.contains("pool thread waiting for a task"),
            "{summary}"
        );
    }
}
