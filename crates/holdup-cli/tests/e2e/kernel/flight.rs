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

/// CLOCK_MONOTONIC now, the clock of the trace's times.
fn monotonic_ns() -> f64 {
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
}

/// Kills a process when dropped: a failing test leaves no workload behind.
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        unsafe { libc::kill(self.0, libc::SIGKILL) };
    }
}

/// The stall's blocked time is in the report, at its own stack, below the
/// request that stalled.
fn assert_stall_below_its_request(r: &serde_json::Value, stall_ms: f64) {
    let t = &threads(r)[0];
    let functions = t["functions"].as_array().unwrap();
    let blocked = |name: &str| {
        functions
            .iter()
            .find(|f| f["symbol"] == name)
            .map(|f| f["total"]["other"].as_f64().unwrap() + f["total"]["sched"].as_f64().unwrap())
            .unwrap_or_else(|| panic!("{name} is on a stack of the trace"))
    };
    assert_near(
        "stall_once's blocked time (ms)",
        blocked("stall_once"),
        stall_ms,
        5.0,
    );
    assert!(blocked("handle_request") >= stall_ms - 5.0);
}

/// The ends of the trace's samples.
fn sample_ends(data: &std::path::Path) -> Vec<f64> {
    let mut ends = Vec::new();
    holdup_trace::Reader::open(data)
        .unwrap()
        .for_each(|rec| {
            if let holdup_trace::Record::Sample(s) = rec {
                ends.push(s.end.max(s.time) as f64);
            }
        })
        .unwrap();
    ends
}

#[test]
#[ignore = "needs root and BPF"]
fn sigusr1_writes_the_last_seconds_at_once_and_the_command_runs_on() {
    use std::io::BufRead;
    use std::process::Stdio;
    let _serial = serial();
    let dir = scratch("flight-sigusr1");
    let data = dir.join("holdup.data");
    let bin = workload("flight_stall");
    // 30 s of requests, the stall at 3 s; 3 s kept; SIGUSR1 a second after
    // the stall, long before the end.
    let mut child = holdup()
        .args(["record", "--flight", "3", "-o", data.to_str().unwrap()])
        .arg("--")
        .arg(&bin)
        .args(["30", "3"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let recorder = child.id() as i32;
    let _recorder_guard = KillOnDrop(recorder);
    let mut stdout = String::new();
    for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        stdout += &line;
        stdout.push('\n');
        if line.starts_with("stall_ns") {
            break;
        }
    }
    let stall_start = printed_value(&stdout, "stall_start_ns");
    let stall_ms = printed_value(&stdout, "stall_ns") / 1e6;
    let children = std::fs::read_to_string(format!("/proc/{recorder}/task/{recorder}/children"))
        .unwrap_or_default();
    let command: i32 = children
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .expect("the recorder runs the command");
    let _command_guard = KillOnDrop(command);
    std::thread::sleep(std::time::Duration::from_secs(1));
    let signalled = monotonic_ns();
    assert_eq!(unsafe { libc::kill(recorder, libc::SIGUSR1) }, 0);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            std::time::Instant::now() < until,
            "the recorder still runs 20 s after SIGUSR1"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let written_after_s = (monotonic_ns() - signalled) / 1e9;
    // The command runs on, no longer traced; the test ends it.
    let alive = unsafe { libc::kill(command, 0) } == 0;
    unsafe { libc::kill(command, libc::SIGKILL) };
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    eprintln!("{stderr}");
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains("SIGUSR1 asked for the flight recorder's trace"),
        "{stderr}"
    );
    assert!(
        written_after_s < 10.0,
        "the trace was written {written_after_s:.1} s after SIGUSR1, not at once"
    );
    assert!(alive, "the command runs on after the recording");

    let r = report(&data);
    assert_stall_below_its_request(&r, stall_ms);
    // About the last 3 s before the signal: the newest event is from about
    // when it arrived (within a drain), none older than 3 s before that.
    let ends = sample_ends(&data);
    let (first, last) = (
        ends.iter().cloned().fold(f64::MAX, f64::min),
        ends.iter().cloned().fold(0.0, f64::max),
    );
    assert_near(
        "the newest event, from SIGUSR1 (s)",
        (last - signalled) / 1e9,
        0.0,
        1.2,
    );
    assert!(
        last - first <= 3.1e9,
        "{:.2} s of events",
        (last - first) / 1e9
    );
    assert!(first < stall_start, "the stall is inside the window");
    let duration = r["duration_ns"].as_f64().unwrap_or(0.0) / 1e9;
    assert_near("the trace's duration (s)", duration, 3.0, 0.3);
}

#[test]
#[ignore = "needs root and BPF"]
fn a_slow_function_call_triggers_the_flight_recorders_trace() {
    let _serial = serial();
    let dir = scratch("flight-func");
    let data = dir.join("holdup.data");
    let bin = workload("flight_stall");
    // Requests of about 1 ms for 9 s, one of about 51 ms at 5 s; 3 s kept.
    let trigger = format!("{}:handle_request:40", bin.display());
    let out = run_ok(&[
        "record",
        "--flight",
        "3",
        "--trigger-latency",
        &trigger,
        "-o",
        data.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
        "9",
        "5",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    let stall_start = printed_value(&stdout, "stall_start_ns");
    let stall_ms = printed_value(&stdout, "stall_ns") / 1e6;
    // "holdup: handle_request took 51.2 ms in process …"
    let took: f64 = stderr
        .split("holdup: handle_request took ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("the trigger is said: {stderr}"));
    // The slow request is the stall and about 1 ms of work.
    assert_near("the slow call (ms)", took, stall_ms + 1.0, 5.0);

    let r = report(&data);
    assert_stall_below_its_request(&r, stall_ms);
    // Written at the trigger, not at the end 4 s later: the newest event
    // ends soon after the slow call returned.
    let ends = sample_ends(&data);
    let last = ends.iter().cloned().fold(0.0, f64::max);
    let returned = stall_start + stall_ms * 1e6;
    assert_near(
        "the newest event, after the slow call (s)",
        (last - returned) / 1e9,
        0.0,
        1.0,
    );
    let duration = r["duration_ns"].as_f64().unwrap_or(0.0) / 1e9;
    assert_near("the trace's duration (s)", duration, 3.0, 0.3);
}
