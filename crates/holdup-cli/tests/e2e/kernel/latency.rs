//! `holdup latency`: histograms recorded on the real kernel from workloads
//! that know their own answer, `explain`, `diff`, and bad function names.

use crate::support::latency::*;
use crate::support::*;
use std::path::{Path, PathBuf};

/// The value of `key=N` in a workload's output.
fn measured(out: &str, key: &str) -> u64 {
    out.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in {out:?}"))
}

/// `holdup latency -o <dir>/<name> <extra> -- <cmd>`; the file and what
/// the command printed.
fn latency(dir: &Path, name: &str, extra: &[&str], cmd: &[&str]) -> (PathBuf, String) {
    let (data, out, _) = latency_and_notes(dir, name, extra, cmd);
    (data, out)
}

/// `latency`, and what `holdup latency` printed on stderr.
fn latency_and_notes(
    dir: &Path,
    name: &str,
    extra: &[&str],
    cmd: &[&str],
) -> (PathBuf, String, String) {
    let data = dir.join(name);
    let mut args = vec!["latency", "-o", data.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(cmd);
    let out = run_ok(&args);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (data, text(&out.stdout), text(&out.stderr))
}

/// The operation `op` of `holdup latency report --json`.
fn operation(data: &Path, op: &str) -> serde_json::Value {
    let r = json(&["latency", "report", "--json", "-i", data.to_str().unwrap()]);
    assert_eq!(r["schema"], "holdup.latency/1");
    r["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == op)
        .unwrap_or_else(|| panic!("no {op} in {r}"))
        .clone()
}

/// `holdup latency explain OP --json`: per peak, the causes by name → share.
/// `holdup latency explain OP --json`.
fn explain_json(data: &Path, op: &str) -> serde_json::Value {
    json(&[
        "latency",
        "explain",
        op,
        "--json",
        "-i",
        data.to_str().unwrap(),
    ])
}

/// (name, share) of each entry of a JSON list, the name under `key`.
fn shares(list: &serde_json::Value, key: &str) -> Vec<(String, f64)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c[key].as_str().unwrap().to_string(),
                c["share"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn explain(data: &Path, op: &str) -> Vec<std::collections::HashMap<String, f64>> {
    explain_json(data, op)["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| shares(&p["causes"], "cause").into_iter().collect())
        .collect()
}

/// The last frame of each peak's path, and its share.
fn path_ends(data: &Path, op: &str) -> Vec<(String, f64)> {
    explain_json(data, op)["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| shares(&p["path"], "frame").pop().unwrap())
        .collect()
}

fn peak_counts(op: &serde_json::Value) -> Vec<u64> {
    op["peaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["count"].as_u64().unwrap())
        .collect()
}

#[test]
#[ignore = "needs root and BPF"]
fn cached_and_evicted_reads_make_two_peaks() {
    let _g = serial();
    let dir = scratch("latency_cache");
    let bin = workload("lat_cache_reader");
    let file = dir.join("blocks.bin");
    let (data, out) = latency(
        &dir,
        "lat.data",
        &[],
        &[bin.to_str().unwrap(), file.to_str().unwrap(), "512", "32"],
    );
    let (hits, misses) = (measured(&out, "hits"), measured(&out, "misses"));
    assert!(
        hits > 150 && misses > 150,
        "the workload's own split: {out}"
    );
    let read = operation(&data, "syscall:read");
    let peaks = read["peaks"].as_array().unwrap();
    assert_eq!(peaks.len(), 2, "{read}");
    // The dynamic loader's few reads of libraries join the fast peak.
    let counts = peak_counts(&read);
    assert_near("cached reads (peak 1)", counts[0] as f64, hits as f64, 8.0);
    assert_near(
        "evicted reads (peak 2)",
        counts[1] as f64,
        misses as f64,
        8.0,
    );
    // The disk reads hold nearly all the time.
    assert!(peaks[1]["share"].as_f64().unwrap() > 0.7, "{read}");
    assert!(peaks[0]["hi_ns"].as_u64() <= peaks[1]["lo_ns"].as_u64());
    // explain: the slow peak waited for the disk, the fast one copied.
    let ends = path_ends(&data, "syscall:read");
    assert_eq!(ends[0].0, "on-cpu", "{ends:?}");
    let e = explain_json(&data, "syscall:read");
    let slow = e["paths"][1]["path"].as_array().unwrap();
    assert_eq!(slow[1]["frame"], "iowait", "{slow:?}");
    let iowait = slow[1]["share"].as_f64().unwrap();
    assert!(iowait > 0.5, "{slow:?}");
    // Below the cause, the kernel function where the reads waited for the
    // page being read in (folio_wait_bit_common here; older kernels wait
    // on a page), holding nearly all of the I/O wait.
    let site = slow.last().unwrap();
    let name = site["frame"].as_str().unwrap();
    assert!(
        name.contains("folio_wait") || name.contains("wait_on_page"),
        "{slow:?}"
    );
    assert!(site["share"].as_f64().unwrap() > 0.8 * iowait, "{slow:?}");
}

#[test]
#[ignore = "needs root and BPF"]
fn contended_mutex_makes_two_peaks_and_the_fix_removes_one() {
    let _g = serial();
    let dir = scratch("latency_mutex");
    let bin = workload("lat_mutex");
    let bin = bin.to_str().unwrap();
    let (before, out) = latency(
        &dir,
        "before.data",
        &["--func", "take_lock", "--callees", "1", "--callees-libs"],
        &[bin, "2000"],
    );
    let contended = measured(&out, "contended");
    assert!(contended > 60, "too little contention to test: {out}");
    let take = operation(&before, "func:take_lock");
    assert_eq!(take["count"], 2000);
    // The free takes and the contended ones are two peaks; the slowest is
    // the contended one. (A virtual machine may add a small bump of a few
    // µs, e.g. waking from idle: that is a peak too, but not this one.)
    let counts = peak_counts(&take);
    assert!(counts.len() >= 2, "{take}");
    let slow = counts.len() - 1;
    // A contended call that arrives just before the holder lets go waits
    // only microseconds: it belongs to the fast peak.
    assert_near(
        "contended calls (slowest peak)",
        counts[slow] as f64,
        contended as f64,
        0.03 * contended as f64 + 3.0,
    );
    assert!(
        take["peaks"][slow]["lo_ns"].as_u64().unwrap() >= 100_000,
        "{take}"
    );
    // explain: the slow peak is the lock wait, the fast one is not.
    let causes = explain(&before, "func:take_lock");
    assert!(causes[slow]["futex_wait"] > 0.8, "{causes:?}");
    assert!(
        causes[0].get("futex_wait").copied().unwrap_or(0.0) < 0.5,
        "{causes:?}"
    );
    // The path descends into libc through the PLT: take_lock's time in the
    // slow peak is pthread_mutex_lock's, and that is the futex wait.
    let paths = explain_json(&before, "func:take_lock");
    let slow_path = shares(&paths["paths"][slow]["path"], "frame");
    assert_eq!(
        frames(&slow_path),
        ["func:take_lock", "pthread_mutex_lock", "futex_wait"],
        "{slow_path:?}"
    );
    assert!(slow_path[1].1 > 0.9, "{slow_path:?}");

    // The same function, named by the line of its definition.
    let src = std::fs::read_to_string(repo_root().join("workloads/lat_mutex.c")).unwrap();
    let line = 1 + src
        .lines()
        .position(|l| l.contains("void take_lock(void)"))
        .unwrap();
    let (after, out) = latency(
        &dir,
        "after.data",
        &["--func", &format!("lat_mutex.c:{line}")],
        &[bin, "--no-contention", "2000"],
    );
    assert_eq!(measured(&out, "contended"), 0);
    let take_after = operation(&after, "func:take_lock");
    assert_eq!(take_after["count"], 2000);
    let slow_after: Vec<&serde_json::Value> = take_after["peaks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["lo_ns"].as_u64().unwrap() >= 100_000)
        .collect();
    assert!(slow_after.is_empty(), "the slow peak is gone: {take_after}");

    let d = json(&[
        "latency",
        "diff",
        "--json",
        before.to_str().unwrap(),
        after.to_str().unwrap(),
    ]);
    assert_eq!(d["schema"], "holdup.latency-diff/1");
    let first = &d["operations"][0];
    assert_eq!(first["op"], "func:take_lock", "ranked first: {d}");
    assert!(first["emd"].as_f64().unwrap() > 0.3, "{first}");
    // The contended peak vanished; or, when the machine left a bump of
    // slower free takes whose range reaches it, it "moved" there, at least
    // four times faster.
    let changes = first["changes"].as_array().unwrap();
    let gone = changes
        .iter()
        .find(|c| c["from"]["index"] == slow + 1)
        .unwrap_or_else(|| panic!("no change of the contended peak: {first}"));
    let mean = |p: &serde_json::Value| {
        p["total_ns"].as_f64().unwrap() / p["count"].as_f64().unwrap().max(1.0)
    };
    match gone["change"].as_str().unwrap() {
        "vanished" => {}
        "moved" => assert!(mean(&gone["to"]) * 4.0 < mean(&gone["from"]), "{gone}"),
        other => panic!("the contended peak {other}: {first}"),
    }
    assert_near(
        "the contended peak's calls",
        gone["from"]["count"].as_u64().unwrap() as f64,
        contended as f64,
        0.03 * contended as f64 + 3.0,
    );
    let text = run_ok(&[
        "latency",
        "diff",
        before.to_str().unwrap(),
        after.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&text.stdout);
    let said = format!("peak {} {}", slow + 1, gone["change"].as_str().unwrap());
    assert!(text.contains(&said), "{text}");
}

#[test]
#[ignore = "needs root and BPF"]
fn preempted_cpu_function_is_explained_by_preemption() {
    let _g = serial();
    let dir = scratch("latency_preempt");
    let bin = workload("lat_cpu");
    // The spinners usually take about 90-180 ms from the calls; now and then the
    // scheduler leaves them much less, and such a run tells nothing: it is
    // run again, up to twice.
    let (data, out) = (0..3)
        .map(|_| {
            latency(
                &dir,
                "lat.data",
                &["--func", "burn"],
                &[bin.to_str().unwrap(), "300"],
            )
        })
        .find(|(_, out)| measured(out, "offcpu_ns") as f64 > 50e6)
        .expect("the spinners did not compete in three runs");
    let offcpu = measured(&out, "offcpu_ns") as f64;
    let r = json(&[
        "latency",
        "explain",
        "func:burn",
        "--json",
        "-i",
        data.to_str().unwrap(),
    ]);
    let paths = r["paths"].as_array().unwrap();
    // All the time the calls were preempted, against what the workload
    // measured of itself (wall clock − thread CPU clock around each call).
    let preempted: f64 = paths
        .iter()
        .flat_map(|p| p["causes"].as_array().unwrap())
        .filter(|c| c["cause"] == "preempted")
        .map(|c| c["total_ns"].as_f64().unwrap())
        .sum();
    assert_near(
        "preempted ms",
        preempted / 1e6,
        offcpu / 1e6,
        0.1 * offcpu / 1e6 + 5.0,
    );
    // Interrupts are named: the scheduler tick that preempts the calls
    // (DARC §8.1) runs inside them as `irq:timer`.
    let timer: f64 = paths
        .iter()
        .flat_map(|p| p["causes"].as_array().unwrap())
        .filter(|c| c["cause"] == "irq:timer")
        .map(|c| c["total_ns"].as_f64().unwrap())
        .sum();
    assert!(
        timer > 0.0,
        "no timer interrupt inside 300 ms of calls: {r}"
    );
    // Preemption is what slows the slowest peak down: it is that peak's
    // first off-CPU cause, and it takes a larger share of it than of the
    // fastest peak. (Whether it outweighs on-CPU time depends on how many
    // spinners the machine's CPUs hold, so that is not asserted.)
    let share = |p: &serde_json::Value, cause: &str| -> f64 {
        p["causes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["cause"] == cause)
            .map(|c| c["share"].as_f64().unwrap())
            .sum()
    };
    let last = paths.last().unwrap();
    let causes = last["causes"].as_array().unwrap();
    let off_cpu: Vec<&serde_json::Value> =
        causes.iter().filter(|c| c["cause"] != "on-cpu").collect();
    assert_eq!(off_cpu[0]["cause"], "preempted", "{r}");
    if paths.len() > 1 {
        let first = &paths[0];
        assert!(
            share(last, "preempted") > share(first, "preempted") + 0.1,
            "the slow peak is not the preempted one: {r}"
        );
        // The path's first step below the operation is the peak's largest cause.
        let top = causes
            .iter()
            .max_by(|a, b| {
                a["share"]
                    .as_f64()
                    .partial_cmp(&b["share"].as_f64())
                    .unwrap()
            })
            .unwrap();
        assert_eq!(last["path"][1]["frame"], top["cause"], "{r}");
    }
}

/// What lat_callees (or lat_majority) measured of itself, summed over the
/// buckets from `lo_ns` (inclusive) to `hi_ns` (exclusive): each `key=N`
/// of its bucket lines → the sum of N.
fn callee_truth(out: &str, lo_ns: u64, hi_ns: u64) -> std::collections::HashMap<String, f64> {
    let mut sums = std::collections::HashMap::new();
    for line in out.lines().filter(|l| l.starts_with("bucket=")) {
        let b = measured(line, "bucket");
        if (1u64 << b) < lo_ns || (1u64 << b) >= hi_ns {
            continue;
        }
        for (key, n) in line.split_whitespace().filter_map(|w| w.split_once('=')) {
            if key != "bucket" {
                *sums.entry(key.to_string()).or_insert(0.0) += n.parse::<f64>().unwrap();
            }
        }
    }
    sums
}

/// One peak of `func:handle` in a lat_callees (or lat_indirect) recording:
/// explain's path (frame, share) and what the workload measured of itself
/// in the peak's buckets.
struct HandlePeak {
    path: Vec<(String, f64)>,
    truth: std::collections::HashMap<String, f64>,
}

/// The peaks of `func:handle` in `data`, left to right, with the
/// workload's output `out`.
fn handle_peaks(data: &Path, out: &str) -> Vec<HandlePeak> {
    let e = explain_json(data, "func:handle");
    let peaks = e["operations"][0]["peaks"].as_array().unwrap();
    let paths = e["paths"].as_array().unwrap();
    peaks
        .iter()
        .zip(paths)
        .map(|(p, path)| HandlePeak {
            path: shares(&path["path"], "frame"),
            truth: callee_truth(
                out,
                p["lo_ns"].as_u64().unwrap(),
                p["hi_ns"].as_u64().unwrap(),
            ),
        })
        .collect()
}

/// The slow peak: the one holding most of write_out's sleeps (fast calls
/// that were preempted for long may make a peak of their own in between).
fn slowest(peaks: &[HandlePeak]) -> usize {
    (0..peaks.len())
        .max_by(|&a, &b| peaks[a].truth["write_ns"].total_cmp(&peaks[b].truth["write_ns"]))
        .unwrap()
}

/// The frames of a path.
fn frames(path: &[(String, f64)]) -> Vec<&str> {
    path.iter().map(|f| f.0.as_str()).collect()
}

#[test]
#[ignore = "needs root and BPF"]
fn explain_descends_to_the_callee_that_makes_the_slow_peak() {
    let _g = serial();
    let dir = scratch("latency_callees");
    let bin = workload("lat_callees");
    let (data, out) = latency(
        &dir,
        "callees.data",
        &["--func", "handle", "--callees", "3"],
        &[bin.to_str().unwrap(), "1600"],
    );
    let peaks = handle_peaks(&data, &out);
    assert!(peaks.len() >= 2, "{} peaks", peaks.len());
    // The fast peak: parse() makes it.
    let (fast, t) = (&peaks[0].path, &peaks[0].truth);
    assert!(
        t["parse_ns"] > 2.0 * t["store_ns"],
        "the workload's own split: {t:?}"
    );
    assert_eq!(fast[0].0, "func:handle");
    assert_eq!(fast[1].0, "parse", "{fast:?}");
    assert_near(
        "parse in the fast peak",
        fast[1].1,
        t["parse_ns"] / t["handle_ns"],
        0.05,
    );
    // The slow peak: store() → flush() → write_out(), which sleeps.
    let slow_i = slowest(&peaks);
    assert!(slow_i > 0, "the slow peak is the fast one");
    let (slow, t) = (&peaks[slow_i].path, &peaks[slow_i].truth);
    assert!(
        t["store_ns"] > t["parse_ns"],
        "the workload's own split: {t:?}"
    );
    let frames = frames(slow);
    assert_eq!(
        frames,
        ["func:handle", "store", "flush", "write_out", "blocked"],
        "{slow:?}"
    );
    for (level, key) in [(1, "store_ns"), (2, "flush_ns"), (3, "write_ns")] {
        assert_near(
            &format!("{} in the slow peak", frames[level]),
            slow[level].1,
            t[key] / t["handle_ns"],
            0.05,
        );
    }
    eprintln!("fast peak {fast:?}\nslow peak {slow:?}\nslow truth {t:?}");
}

/// The busiest peak of `func:handle` in a lat_majority recording: its
/// path, how many of its calls each level was the largest in, and the
/// workload's own measure of it.
fn majority_peak(data: &Path, out: &str) -> (HandlePeak, Vec<Option<u64>>, u64) {
    let e = explain_json(data, "func:handle");
    let counts: Vec<u64> = peak_counts(&e["operations"][0]);
    let busiest = (0..counts.len()).max_by_key(|&i| counts[i]).unwrap();
    let largest_in = e["paths"][busiest]["path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["largest_in"].as_u64())
        .collect();
    let peak = handle_peaks(data, out).swap_remove(busiest);
    (peak, largest_in, counts[busiest])
}

/// DARC's decision on lat_majority: the path goes from handle to a(), and
/// a() was the largest in as many of the peak's calls as the workload
/// counted, within `tol` of them.
fn assert_goes_to_a(peak: &HandlePeak, largest_in: &[Option<u64>], calls: u64, tol: f64) {
    assert_eq!(
        frames(&peak.path)[..2],
        ["func:handle", "a"],
        "{:?}",
        peak.path
    );
    assert_near(
        "calls in which a() was the largest",
        largest_in[1].expect("counted") as f64 / calls as f64,
        peak.truth["a_larger"] / peak.truth["calls"],
        tol,
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn explain_goes_to_the_callee_largest_in_most_calls() {
    let _g = serial();
    let dir = scratch("latency_majority");
    let bin = workload("lat_majority");
    let (data, out) = latency(
        &dir,
        "majority.data",
        &["--func", "handle", "--callees", "1"],
        &[bin.to_str().unwrap(), "600"],
    );
    let (peak, largest_in, calls) = majority_peak(&data, &out);
    let t = &peak.truth;
    // By construction b() has the larger sum and a() is larger in most
    // calls; DARC's decision is a().
    assert!(t["b_ns"] > 1.4 * t["a_ns"], "{t:?}");
    assert_goes_to_a(&peak, &largest_in, calls, 0.05);
    assert_near(
        "a's share of the peak",
        peak.path[1].1,
        t["a_ns"] / t["handle_ns"],
        0.05,
    );
    eprintln!(
        "peak {:?} {largest_in:?} of {calls}\ntruth {t:?}",
        peak.path
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn decision_ops_ends_the_recording_once_each_peak_has_its_calls() {
    let _g = serial();
    let dir = scratch("latency_decision_ops");
    let bin = workload("lat_majority");
    // 3000 calls take about 4 s; the decision needs 100 (DARC's start).
    let began = std::time::Instant::now();
    let (data, out) = latency(
        &dir,
        "decided.data",
        &["--func", "handle", "--callees", "1", "--decision-ops", "50"],
        &[bin.to_str().unwrap(), "3000"],
    );
    let whole = began.elapsed();
    assert_eq!(
        measured(&out, "calls"),
        3000,
        "the command ran on to its end"
    );
    let (peak, largest_in, calls) = majority_peak(&data, &out);
    let recorded: u64 = peak_counts(&operation(&data, "func:handle")).iter().sum();
    assert!(
        (100..1000).contains(&recorded),
        "the recording ended after {recorded} of 3000 calls ({whole:?})"
    );
    assert!(calls >= 50, "{calls}");
    // The same decision from the calls recorded (the truth is the whole
    // run's, whose calls are alike).
    assert_goes_to_a(&peak, &largest_in, calls, 0.1);
    let file = holdup_trace::latency::read_latency(&data).unwrap();
    assert_eq!(file.decision_ops, 50);
    // Without a function to decide on, one clear line.
    assert_one_line_error(
        &[
            "latency",
            "--decision-ops",
            "5",
            "--",
            bin.to_str().unwrap(),
            "1",
        ],
        "--decision-ops needs a user function whose peaks to decide on (--func)",
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn explain_resumes_below_a_path_found_before() {
    let _g = serial();
    let dir = scratch("latency_resume");
    let bin = workload("lat_callees");
    let bin = bin.to_str().unwrap();
    // One level below handle → store → flush, where a previous explain
    // stopped; parse() and lookup() are not timed.
    let (data, out) = latency(
        &dir,
        "resume.data",
        &[
            "--func",
            "handle",
            "--callees",
            "1",
            "--resume",
            "store,flush",
        ],
        &[bin, "800"],
    );
    let peaks = handle_peaks(&data, &out);
    let slow = &peaks[slowest(&peaks)];
    assert_eq!(
        frames(&slow.path),
        ["func:handle", "store", "flush", "write_out", "blocked"],
        "{:?}",
        slow.path
    );
    assert_near(
        "write_out in the slow peak",
        slow.path[3].1,
        slow.truth["write_ns"] / slow.truth["handle_ns"],
        0.05,
    );
    // The fast peak is parse's, which is not timed: it ends in handle's own time.
    let fast = &peaks[0].path;
    assert_eq!(fast[1].0, "on-cpu", "{fast:?}");
    // A path the code does not have is one clear line.
    assert_one_line_error(
        &[
            "latency",
            "-o",
            dir.join("bad.data").to_str().unwrap(),
            "--func",
            "handle",
            "--callees",
            "1",
            "--resume",
            "parse,flush",
            "--",
            bin,
            "10",
        ],
        "--resume: 'flush' is not called by 'parse'",
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn callees_called_through_a_pointer_come_from_a_recording() {
    let _g = serial();
    let dir = scratch("latency_indirect");
    let bin = workload("lat_indirect");
    let bin = bin.to_str().unwrap();
    // The binary's code does not name store(): the slow peak stops at
    // handle's own sleeping time.
    let (alone, _) = latency(
        &dir,
        "alone.data",
        &["--func", "handle", "--callees", "3"],
        &[bin, "400"],
    );
    let e = explain_json(&alone, "func:handle");
    let last = e["paths"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        frames(&shares(&last["path"], "frame")),
        ["func:handle", "blocked"],
        "{e}"
    );

    // A recording's samples do: handle → store → flush → write_out.
    let trace = dir.join("indirect.trace");
    run_ok(&["record", "-o", trace.to_str().unwrap(), "--", bin, "200"]);
    let (data, out) = latency(
        &dir,
        "indirect.data",
        &[
            "--func",
            "handle",
            "--callees",
            "3",
            "--callees-from",
            trace.to_str().unwrap(),
        ],
        &[bin, "800"],
    );
    let peaks = handle_peaks(&data, &out);
    let slow = &peaks[slowest(&peaks)];
    assert_eq!(
        frames(&slow.path),
        ["func:handle", "store", "flush", "write_out", "blocked"],
        "{:?}",
        slow.path
    );
    assert_near(
        "store in the slow peak",
        slow.path[1].1,
        slow.truth["store_ns"] / slow.truth["handle_ns"],
        0.05,
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn a_recursive_function_counts_its_outermost_calls() {
    let _g = serial();
    let dir = scratch("latency_recursive");
    let bin = workload("lat_recursive");
    let (data, out) = latency(
        &dir,
        "recursive.data",
        &["--func", "descend"],
        &[bin.to_str().unwrap(), "400"],
    );
    let op = operation(&data, "func:descend");
    assert_eq!(op["count"], measured(&out, "calls"), "{op}");
    let outer = measured(&out, "outer_ns") as f64;
    assert_near(
        "time in the outermost calls, ms",
        op["total_ns"].as_f64().unwrap() / 1e6,
        outer / 1e6,
        0.05 * outer / 1e6,
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn softirq_work_inside_a_call_is_its_own_cause() {
    let _g = serial();
    let dir = scratch("latency_softirq");
    let bin = workload("lat_softirq");
    let (data, out) = latency(&dir, "softirq.data", &[], &[bin.to_str().unwrap(), "20000"]);
    assert_eq!(measured(&out, "sent"), 20000, "{out}");
    // Each loopback datagram's delivery (NET_RX) runs inside its sendto().
    // When the machine is busy, some of it is left to ksoftirqd instead,
    // so only a lower bound is certain.
    // Each softirq vector is a cause of its own: this one is NET_RX.
    let causes = explain(&data, "syscall:sendto");
    let softirq: f64 = causes.iter().filter_map(|c| c.get("softirq:net_rx")).sum();
    assert!(softirq > 0.1, "{causes:?}");
    // A call without network work has none.
    let causes = explain(&data, "syscall:getppid");
    let softirq: f64 = causes
        .iter()
        .flat_map(|c| c.iter())
        .filter(|(name, _)| name.starts_with("softirq:"))
        .map(|(_, share)| share)
        .sum();
    assert!(softirq < 0.02, "{causes:?}");
    eprintln!("sendto causes {:?}", explain(&data, "syscall:sendto"));
}

#[test]
#[ignore = "needs root and BPF"]
fn lock_waits_are_an_operation() {
    let _g = serial();
    let dir = scratch("latency_lock");
    let bin = workload("lat_mutex");
    let (data, out) = latency(
        &dir,
        "lock.data",
        &["--lock", "--func", "take_lock"],
        &[bin.to_str().unwrap(), "2000"],
    );
    let contended = measured(&out, "contended") as f64;
    assert!(contended > 60.0, "too little contention to test: {out}");
    // Each contended take waits once; main's pthread_join waits once more.
    let lock = operation(&data, "lock");
    assert_near(
        "lock waits",
        lock["count"].as_u64().unwrap() as f64,
        contended + 1.0,
        0.03 * contended + 3.0,
    );
    // Their time is the contended takes' time, less the take itself.
    let take = operation(&data, "func:take_lock");
    let slow_take = take["peaks"][1]["total_ns"].as_f64().unwrap();
    let waited = lock["total_ns"].as_f64().unwrap();
    assert!(
        waited > 0.9 * slow_take && waited < 1.1 * slow_take,
        "lock {waited} vs slow takes {slow_take}"
    );
    assert_eq!(path_ends(&data, "lock")[0].0, "futex_wait");
}

#[test]
#[ignore = "needs root and BPF"]
fn time_lapse_gives_one_histogram_per_step() {
    let _g = serial();
    let dir = scratch("latency_lapse");
    // Sleeps of 100 ms for 1.2 s: each 250 ms step holds about two.
    let (data, _) = latency(
        &dir,
        "lat.data",
        &["--interval", "250ms"],
        &[
            "sh",
            "-c",
            "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 0.1; done",
        ],
    );
    let r = json(&[
        "latency",
        "report",
        "--json",
        "--time-lapse",
        "500ms",
        "-i",
        data.to_str().unwrap(),
    ]);
    let wait = r["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == "syscall:wait4" && o["comm"] == "sh")
        .unwrap_or_else(|| panic!("no wait4 of sh: {r}"))
        .clone();
    let steps = wait["intervals"].as_array().unwrap();
    assert!(steps.len() >= 2, "{wait}");
    let sum: u64 = steps.iter().map(|s| s["count"].as_u64().unwrap()).sum();
    assert_eq!(sum, wait["count"].as_u64().unwrap());
    assert!(steps
        .windows(2)
        .all(|w| w[1]["start_ns"].as_u64() > w[0]["start_ns"].as_u64()));
    assert_one_line_error(
        &[
            "latency",
            "report",
            "--time-lapse",
            "100ms",
            "-i",
            data.to_str().unwrap(),
        ],
        "at least the recorded interval",
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn bad_functions_are_one_clear_line() {
    let _g = serial();
    let dir = scratch("latency_bad");
    let bin = workload("lat_mutex");
    let out = dir.join("x.data");
    let out = out.to_str().unwrap();
    assert_one_line_error(
        &[
            "latency",
            "-o",
            out,
            "--kfunc",
            "no_such_kernel_function_xyz",
            "--",
            "true",
        ],
        "unknown kernel function 'no_such_kernel_function_xyz'",
    );
    assert_one_line_error(
        &[
            "latency",
            "-o",
            out,
            "--func",
            "no_such_function",
            "--",
            bin.to_str().unwrap(),
            "10",
        ],
        "no function 'no_such_function' in",
    );
    assert_one_line_error(
        &[
            "latency",
            "-o",
            out,
            "--func",
            "never_called",
            "--",
            bin.to_str().unwrap(),
            "10",
        ],
        "func:never_called was never called",
    );
    let stripped = dir.join("lat_mutex_stripped");
    std::fs::copy(&bin, &stripped).unwrap();
    assert!(std::process::Command::new("strip")
        .arg(&stripped)
        .bounded_status()
        .success());
    assert_one_line_error(
        &[
            "latency",
            "-o",
            out,
            "--func",
            "take_lock",
            "--",
            stripped.to_str().unwrap(),
            "10",
        ],
        "stripped",
    );
    assert_one_line_error(
        &[
            "latency",
            "-o",
            out,
            "--func",
            "take_lock",
            "--callees",
            "2",
            "--",
            stripped.to_str().unwrap(),
            "10",
        ],
        "no function 'take_lock' in",
    );
    assert_one_line_error(
        &["latency", "-o", out, "--callees", "2", "--", "true"],
        "--callees needs a user function",
    );
    let not_a_trace = dir.join("not-a-trace");
    std::fs::write(&not_a_trace, "garbage").unwrap();
    assert_one_line_error(
        &[
            "latency",
            "-o",
            out,
            "--func",
            "take_lock",
            "--callees",
            "2",
            "--callees-from",
            not_a_trace.to_str().unwrap(),
            "--",
            bin.to_str().unwrap(),
            "10",
        ],
        "not a holdup trace",
    );
}

/// A function whose first instruction the kernel single-steps (a mov) is
/// named in a note: that trap counts in each of its calls. One that starts
/// with a push is timed as the workload times itself.
#[test]
#[ignore = "needs root and BPF"]
fn a_single_stepped_function_is_named() {
    let _g = serial();
    let dir = scratch("latency_stepped");
    let bin = workload("lat_stepped");
    let (data, out, err) = latency_and_notes(
        &dir,
        "stepped.data",
        &["--func", "stepped", "--func", "spin_body"],
        &[bin.to_str().unwrap(), "2000"],
    );
    let notes: Vec<&str> = err.lines().filter(|l| l.contains("single-steps")).collect();
    assert!(
        notes.len() == 1 && notes[0].contains(" stepped ") && !notes[0].contains("spin_body"),
        "{err}"
    );
    let body = measured(&out, "body_ns") as f64;
    let op = operation(&data, "func:spin_body");
    assert_eq!(op["count"], 2000, "{op}");
    assert_near(
        "time in spin_body, ms",
        op["total_ns"].as_f64().unwrap() / 1e6,
        body / 1e6,
        0.10 * body / 1e6,
    );
}
