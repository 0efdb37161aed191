//! `record --flight N`: only the last N seconds of events are kept, and the
//! trace is written when a system call is slower than the trigger; a stall
//! the program timed itself is in it, with its stack.

use crate::support::*;

#[test]
#[ignore = "needs root and BPF"]
fn a_stall_triggers_the_flight_recorders_trace() {
    let _serial = serial();
    let dir = scratch("flight-stall");
    let data = dir.join("holdup.data");
    let bin = workload("flight_stall");
    // 12 s of a steady loop, one 50 ms poll at 8 s; 3 s kept.
    let out = run_ok(&[
        "record",
        "--flight",
        "3",
        "--trigger-latency",
        "poll:40",
        "-o",
        data.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
        "12",
        "8",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("holdup: poll took"),
        "the trigger is said: {stderr}"
    );
    let stall_start = printed_value(&stdout, "stall_start_ns");
    let stall_ms = printed_value(&stdout, "stall_ns") / 1e6;

    let r = report(&data);
    // The stall's blocked time is there, at its own stack.
    let t = &threads(&r)[0];
    let stall = t["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["symbol"] == "stall_once")
        .expect("stall_once is on a stack of the trace");
    let blocked =
        stall["total"]["other"].as_f64().unwrap() + stall["total"]["sched"].as_f64().unwrap();
    assert_near("stall_once's blocked time (ms)", blocked, stall_ms, 5.0);
    // The trace covers about the last 3 s: it starts about 3 s before it
    // was written, which was soon after the stall (within a drain, ≤ 1 s).
    let mut ends = Vec::new();
    holdup_trace::Reader::open(&data)
        .unwrap()
        .for_each(|rec| {
            if let holdup_trace::Record::Sample(s) = rec {
                ends.push(s.end.max(s.time));
            }
        })
        .unwrap();
    let duration = r["duration_ns"].as_f64().unwrap_or(0.0) / 1e9;
    assert_near("the trace's duration (s)", duration, 3.0, 0.3);
    let first_end = *ends.iter().min().expect("samples") as f64;
    assert!(
        first_end > stall_start - 3.3e9 && first_end < stall_start,
        "the earliest event ends {:.2} s before the stall, not over 3 s",
        (stall_start - first_end) / 1e9
    );
    // Every other verb reads it too.
    for verb in [
        &["waitgraph"][..],
        &["syscalls"],
        &["script"],
        &["flame", "-o", dir.join("f.svg").to_str().unwrap()],
    ] {
        let mut args = vec![verb[0], "-i", data.to_str().unwrap()];
        args.extend_from_slice(&verb[1..]);
        run_ok(&args);
    }
}
