//! End-to-end tests of `holdup causal`: predictions checked against
//! measured speedups.
//!
//! Each accuracy test profiles a workload from `workloads/causal_*.c`, then
//! runs the workload again with the work of the target reduced (fewer spin
//! iterations, fewer reads, more cores) and measures how much faster it got.
//! The top-ranked target must be the one that matters, and the predicted
//! program speedup at the measured line speedup must be within ±10 points
//! of the measured program speedup.
//!
//! The machine is shared (2 cores, builds running next to the tests), so
//! timings are medians of several runs taken right before and after the
//! profile, and the profile runs long enough (~30 s) for a few hundred
//! experiments.

use crate::support::causal::*;
use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Build a workload (they include ../include/holdup.h by relative path).
/// Every run does the same work: the spin loop is calibrated once, here,
/// and handed to all runs (a run that calibrated itself while the machine
/// was busy would do less work than the others).
fn build(name: &str, extra: &[&str]) -> PathBuf {
    static CALIBRATED: OnceLock<()> = OnceLock::new();
    CALIBRATED.get_or_init(|| {
        // The test binaries were just built: hundreds of MB of dirty pages
        // that the kernel writes back some 30 s later, in the middle of
        // the first experiments (extra runqueue and disk time that the
        // plain runs measured afterwards do not have). Written now, first.
        unsafe { libc::sync() };
        let misc = workload_with("causal_misc", &[]);
        let out = Command::new(misc).arg("calibrate").bounded_output();
        let per_ms = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(
            per_ms.parse::<u64>().is_ok(),
            "calibration printed {per_ms:?}"
        );
        std::env::set_var("CAUSAL_ITERS_PER_MS", per_ms);
    });
    workload_with(name, extra)
}

/// The line of `workloads/<name>.c` marked `/* target: <marker> */`.
fn line_of(name: &str, marker: &str) -> String {
    let src = std::fs::read_to_string(repo_root().join(format!("workloads/{name}.c"))).unwrap();
    let tag = format!("/* target: {marker} */");
    let n = src
        .lines()
        .position(|l| l.contains(&tag))
        .unwrap_or_else(|| panic!("no {tag} in {name}.c"))
        + 1;
    format!("{name}.c:{n}")
}

/// `key=value` numbers of one run.
type Values = Vec<(String, f64)>;

fn run_workload(bin: &Path, args: &[&str]) -> Values {
    let out = Command::new(bin).args(args).bounded_output();
    assert!(
        out.status.success(),
        "{} failed: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    printed_fields(&String::from_utf8_lossy(&out.stdout))
}

fn medians(runs: &[Vec<(String, f64)>]) -> Vec<(String, f64)> {
    runs[0]
        .iter()
        .map(|(k, _)| {
            let mut v: Vec<f64> = runs.iter().map(|r| field(r, k)).collect();
            v.sort_by(f64::total_cmp);
            (k.clone(), v[v.len() / 2])
        })
        .collect()
}

/// Time the program as it is and with the target's work reduced, without
/// the profiler: `n` interleaved pairs, medians of each, so that load from
/// elsewhere on the machine falls on both sides alike.
fn compare(bin: &Path, base: &[&str], faster: &[&str], n: usize) -> (Values, Values) {
    let (mut b, mut f) = (Vec::new(), Vec::new());
    for _ in 0..n {
        b.push(run_workload(bin, base));
        f.push(run_workload(bin, faster));
    }
    (medians(&b), medians(&f))
}

/// `holdup causal run` then `holdup causal report --json`.
fn profile(dir: &Path, extra: &[&str], cmd: &[&str]) -> Value {
    profile_and_notes(dir, extra, cmd).0
}

/// `profile`, and what `causal run` printed on stderr.
fn profile_and_notes(dir: &Path, extra: &[&str], cmd: &[&str]) -> (Value, String) {
    let coz = dir.join("profile.coz");
    let mut args = vec!["causal", "run", "-o", coz.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(cmd);
    // What the workload measured of itself under the profiler: when a
    // prediction is off, it tells whether the machine (a disk's latency)
    // drifted between the profile and the timed runs.
    let run = run_ok(&args);
    eprintln!(
        "profiled run: {}",
        String::from_utf8_lossy(&run.stdout).trim()
    );
    let report = run_ok(&["causal", "report", "-i", coz.to_str().unwrap()]);
    eprintln!("{}", String::from_utf8_lossy(&report.stdout));
    (
        json(&["causal", "report", "--json", "-i", coz.to_str().unwrap()]),
        String::from_utf8_lossy(&run.stderr).into_owned(),
    )
}

fn top_target(report: &Value) -> String {
    report["targets"][0]["target"].as_str().unwrap().to_string()
}

/// `expected` ranks first. One exception: on a machine busy with other
/// work, runqueue waits are real and "more cores" (subclass:sched) may
/// rightly rank above every line; then `expected` must still be the best
/// line.
fn assert_top(report: &Value, expected: &str) {
    let top = top_target(report);
    if top == expected {
        return;
    }
    assert_eq!(top_line(report), expected, "the best line target");
    assert_eq!(
        top, "subclass:sched",
        "top target is {top}, expected {expected}"
    );
    eprintln!("note: the machine was busy: subclass:sched ranks above {expected}");
}

fn top_line(report: &Value) -> String {
    report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["kind"] == "line")
        .map(|t| t["target"].as_str().unwrap().to_string())
        .unwrap()
}

/// The prediction at the measured line speedup is within ±10 points of the
/// measured program speedup. `measure` returns (line speedup, program
/// speedup) from fresh runs; it is called a second time if the first
/// measurement disagrees, since a burst of load elsewhere on the machine
/// can spoil one set of runs.
fn check_prediction(
    what: &str,
    report: &Value,
    target_name: &str,
    measure: impl Fn() -> (f64, f64),
) {
    let t = target(report, target_name);
    let mut seen = Vec::new();
    for _ in 0..2 {
        let (line_speedup, actual) = measure();
        let predicted = predict(t, line_speedup);
        eprintln!(
            "{what}: {target_name} sped up {:.0}%: predicted program speedup {:.1}%, measured {:.1}%",
            line_speedup * 100.0,
            predicted * 100.0,
            actual * 100.0
        );
        if (predicted - actual).abs() <= 0.10 {
            return;
        }
        seen.push((line_speedup, predicted, actual));
    }
    let (_, predicted, actual) = seen[seen.len() - 1];
    assert_near(
        &format!("{what}: predicted vs measured program speedup (tries: {seen:?})"),
        predicted,
        actual,
        0.10,
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn barrier_compute_critical_line() {
    let _turn = turn();
    let dir = scratch("causal_barrier");
    let bin = build("causal_barrier", &[]);
    let b = bin.to_str().unwrap();
    // Round: main thread 8 ms (critical), worker 5 ms.
    let report = profile(&dir, &[], &[b, "3500", "8", "5"]);
    let a = line_of("causal_barrier", "a");
    assert_top(&report, &a);
    check_prediction("barrier", &report, &a, || barrier_measure(&bin));
    // The other thread's line has slack: no speedup to speak of.
    let b_line = target(&report, &line_of("causal_barrier", "b"));
    assert!(predict(b_line, 0.5) < 0.10, "{b_line}");
}

#[test]
#[ignore = "needs root and BPF"]
fn barrier_odirect_reads_critical() {
    let _turn = turn();
    with_second_try(barrier_odirect_reads_critical_once);
}

fn barrier_odirect_reads_critical_once() {
    let dir = scratch("causal_odirect");
    let bin = build("causal_odirect", &[]);
    let b = bin.to_str().unwrap();
    let d = dir.to_str().unwrap();
    // Round: main thread computes 0.5 ms, worker reads 20 × 256 KiB (2.5 to
    // 10 ms: disks differ, and a virtio disk's latency drifts by minutes).
    // The reads stay critical at half as many, by a wide margin, whatever
    // the drift between the profile and the timed runs: the measured
    // speedup is the reads' own.
    let rounds = odirect_rounds(&bin, d);
    let report = profile(&dir, &[], &[b, d, &rounds, "20", "0.5"]);
    let read = line_of("causal_odirect", "read");
    // The reads, as a line or as "a faster disk", rank first; COZ, which
    // sees on-CPU samples only, cannot see them at all.
    if top_target(&report) != "subclass:io" {
        assert_top(&report, &read);
    }
    assert_eq!(top_line(&report), read);
    check_prediction("odirect", &report, &read, || {
        let (base, faster) = compare(&bin, &[d, "200", "20", "0.5"], &[d, "200", "10", "0.5"], 5);
        // The reads' own time tells how much faster they got.
        (
            1.0 - field(&faster, "read_ns") / field(&base, "read_ns"),
            1.0 - field(&faster, "round_ns") / field(&base, "round_ns"),
        )
    });
    check_prediction("faster disk", &report, "subclass:io", || {
        faster_disk(&bin, d)
    });
}

#[test]
#[ignore = "needs root and BPF"]
fn barrier_mixed_compute_close_to_blocked_io() {
    let _turn = turn();
    let dir = scratch("causal_mixed");
    let bin = build("causal_mixed", &[]);
    let b = bin.to_str().unwrap();
    let d = dir.to_str().unwrap();
    // Round: the main thread computes 3 ms (critical); the worker computes
    // 0.8 ms, writes 4 KiB and reads 8 × 512 B with O_DIRECT, mostly blocked
    // and close behind. Only the line is profiled: the mixed case is about
    // the delays the blocked worker owes, not about ranking.
    let a = line_of("causal_mixed", "a");
    let report = profile(&dir, &["--line", &a], &[b, d, "3000", "3", "0.8", "8"]);
    check_prediction("mixed", &report, &a, || {
        let (base, faster) = compare(
            &bin,
            &[d, "300", "3", "0.8", "8"],
            &[d, "300", "1.5", "0.8", "8"],
            3,
        );
        (
            0.5,
            1.0 - field(&faster, "round_ns") / field(&base, "round_ns"),
        )
    });
}

#[test]
#[ignore = "needs root and BPF"]
fn lock_critical_section() {
    let _turn = turn();
    let dir = scratch("causal_lock");
    let bin = build("causal_lock", &[]);
    let b = bin.to_str().unwrap();
    // 2 ms inside the mutex, 1 ms outside: the mutex is the bottleneck.
    let report = profile(&dir, &[], &[b, "5000", "2", "1"]);
    let cs = line_of("causal_lock", "cs");
    assert_top(&report, &cs);
    check_prediction("lock", &report, &cs, || {
        let (base, faster) = compare(&bin, &["400", "2", "1"], &["400", "1", "1"], 5);
        (
            0.5,
            1.0 - field(&faster, "iteration_ns") / field(&base, "iteration_ns"),
        )
    });
}

/// A cache function that takes a contended mutex around µs of work, as
/// RocksDB's cache shard does: much of what the contention costs is the
/// handoff (the waiter woken, then waiting for a CPU, and the futex calls),
/// which shrinks with the time the lock is held. The function's target
/// counts it; the prediction for halving the work under the lock is checked
/// against really halving it.
#[test]
#[ignore = "needs root and BPF"]
fn contended_lookup_function_with_its_handoffs() {
    let _turn = turn();
    let dir = scratch("causal_shards");
    let bin = build("causal_shards", &[]);
    let b = bin.to_str().unwrap();
    // Two workers, each op: 1 µs outside, lookup() 2 µs and release()
    // 0.5 µs under one mutex: the mutex is the bottleneck, and stays it
    // with lookup() halved. (With 1 µs halved, 1 µs under the lock
    // against 1 µs outside, the faster program ran now contended, now
    // not: 27% or 41% faster from one run to the next.)
    let args = |ops: &'static str, lookup: &'static str| [ops, lookup, "0.5", "1", "1", "2"];
    let mut cmd = vec![b];
    cmd.extend(args("5000000", "2"));
    let report = profile(
        &dir,
        &[
            "--granularity",
            "function",
            "--line",
            "causal_shards:lookup",
        ],
        &cmd,
    );
    check_prediction("contended lookup", &report, "causal_shards:lookup", || {
        let (base, faster) = compare(&bin, &args("300000", "2"), &args("300000", "1"), 3);
        (0.5, 1.0 - field(&faster, "op_ns") / field(&base, "op_ns"))
    });
}

#[test]
#[ignore = "needs root and BPF"]
fn pool_oversubscribed_more_cores() {
    let _turn = turn();
    let dir = scratch("causal_pool");
    let bin = build("causal_pool", &[]);
    let b = bin.to_str().unwrap();
    // 4 workers pinned to one core, 2 ms of work each per round.
    let attempt = || {
        let report = profile(&dir, &[], &[b, "3500", "1", "2"]);
        assert_eq!(
            top_target(&report),
            "subclass:sched",
            "more cores beat any one line"
        );
        check_prediction("pool", &report, "subclass:sched", || {
            let (one, two) = compare(&bin, &["250", "1", "2"], &["250", "2", "2"], 5);
            // What a second core did to the runqueue time is the "line speedup".
            (
                1.0 - field(&two, "runq_ns") / field(&one, "runq_ns"),
                1.0 - field(&two, "round_ns") / field(&one, "round_ns"),
            )
        });
    };
    // The runqueue curve is steep and follows the machine's load during the
    // profile (one full-suite run predicted +60% where +46% was measured;
    // the same test alone, +52% against +47%): a miss profiles once more,
    // and two misses fail.
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(attempt)).is_err() {
        eprintln!("note: the prediction missed; profiling once more");
        attempt();
    }
}

/// The round time of causal_barrier when line a's 8 ms are halved.
fn barrier_measure(bin: &Path) -> (f64, f64) {
    let (base, faster) = compare(bin, &["250", "8", "5"], &["250", "4", "5"], 5);
    (
        0.5,
        1.0 - field(&faster, "round_ns") / field(&base, "round_ns"),
    )
}

/// Sum of a field over the profile's records of one progress point.
fn point_total(coz: &Path, name: &str, field: &str) -> u64 {
    let text = std::fs::read_to_string(coz).unwrap();
    let name_field = format!("name={name}");
    let prefix = format!("{field}=");
    text.lines()
        .filter(|l| l.split('\t').any(|f| f == name_field))
        .filter_map(|l| l.split('\t').find_map(|f| f.strip_prefix(prefix.as_str())))
        .map(|v| v.parse::<u64>().unwrap())
        .sum()
}

#[test]
#[ignore = "needs root and BPF"]
fn progress_points_without_recompiling() {
    let _turn = turn();
    let dir = scratch("causal_probe");
    let plain = build("causal_barrier", &["-DNO_PROGRESS"]);
    let marked = build("causal_barrier", &[]);
    let a = line_of("causal_barrier", "a");
    let fixed = ["--line", a.as_str()];
    // The binary without a progress macro: a uprobe counts round_done.
    let args = [&fixed[..], &["--progress", "round_done"]].concat();
    let probed = profile(&dir, &args, &[plain.to_str().unwrap(), "1800", "8", "5"]);
    assert_eq!(probed["progress_points"], serde_json::json!(["round_done"]));
    let with_macro = profile(&dir, &fixed, &[marked.to_str().unwrap(), "1800", "8", "5"]);
    assert_eq!(with_macro["progress_points"], serde_json::json!(["round"]));
    let (p, m) = (
        predict(target(&probed, &a), 0.5),
        predict(target(&with_macro, &a), 0.5),
    );
    eprintln!(
        "line a at 50%: predicted {:.1}% with a uprobe, {:.1}% with the macro",
        p * 100.0,
        m * 100.0
    );
    // Each against the program's measured speedup: two profiles' noise
    // would add up in a comparison of one with the other.
    check_prediction("uprobe progress", &probed, &a, || barrier_measure(&plain));
    check_prediction("macro progress", &with_macro, &a, || {
        barrier_measure(&marked)
    });

    // A source line counts as often as the function it calls, and a
    // latency pair sees every round begin and end.
    let src = std::fs::read_to_string(repo_root().join("workloads/causal_barrier.c")).unwrap();
    let n = src
        .lines()
        .position(|l| l.contains("round_done(); /* progress: round */"))
        .unwrap()
        + 1;
    let line = format!("causal_barrier.c:{n}");
    let args = [
        &fixed[..],
        &[
            "--experiment-ms",
            "100",
            "--progress",
            "round_done",
            "--progress",
            &line,
        ],
        &["--latency", "round_start,round_done"],
    ]
    .concat();
    let (short, notes) =
        profile_and_notes(&dir, &args, &[plain.to_str().unwrap(), "300", "4", "2"]);
    assert!(short["experiments"].as_u64().unwrap() >= 5, "{short}");
    // round_start is a bare `ret`, which the kernel single-steps: a costly
    // probe, and said so; round_done starts with a push, the line with a
    // call.
    let costly: Vec<&str> = notes
        .lines()
        .filter(|l| l.contains("single-step"))
        .collect();
    assert!(
        costly.len() == 1 && costly[0].contains("its start round_start:"),
        "{notes}"
    );
    let coz = dir.join("profile.coz");
    let by_function = point_total(&coz, "round_done", "delta");
    let by_line = point_total(&coz, &line, "delta");
    assert!(by_function >= 20, "round_done counted {by_function} visits");
    assert_near(
        "visits of the line vs of the function",
        by_line as f64,
        by_function as f64,
        0.05 * by_function as f64,
    );
    let arrivals = point_total(&coz, "round_start,round_done", "arrivals");
    let departures = point_total(&coz, "round_start,round_done", "departures");
    assert_near(
        "latency arrivals vs departures",
        arrivals as f64,
        departures as f64,
        0.05 * arrivals as f64 + 2.0,
    );
    assert_near(
        "latency arrivals vs rounds",
        arrivals as f64,
        by_function as f64,
        0.05 * by_function as f64 + 2.0,
    );
}

/// `--system`: the bottleneck line is in the reader, a process the command
/// forks; the writer (the command itself) has slack. One domain for both
/// processes, progress counted by the reader's macro in it.
#[test]
#[ignore = "needs root and BPF"]
fn system_pipe_reader_line_across_processes() {
    let _turn = turn();
    let dir = scratch("causal_procpipe");
    let bin = build("causal_procpipe", &[]);
    // Per item: reader 2 ms on line r and 1 ms on line o, writer 0.5 ms.
    // Experiments on line r only (every process finds it by FILE:LINE).
    let r = line_of("causal_procpipe", "r");
    let report = profile(
        &dir,
        &["--system", "--line", &r],
        &[bin.to_str().unwrap(), "6000"],
    );
    assert_eq!(report["progress_points"], serde_json::json!(["item"]));
    assert!(report["experiments"].as_u64().unwrap() >= 50, "{report}");
    check_prediction("pipe reader", &report, &r, || {
        let (base, faster) = compare(&bin, &["600"], &["600", "1"], 5);
        (
            0.5,
            1.0 - field(&faster, "item_ns") / field(&base, "item_ns"),
        )
    });
    // Each process wrote the sample counts of its lines, named with the
    // binary: the reader's line r and the writer's line w.
    let text = std::fs::read_to_string(dir.join("profile.coz")).unwrap();
    let samples = |marker: &str| -> u64 {
        let (file, line) = line_of("causal_procpipe", marker)
            .rsplit_once(':')
            .map(|(f, l)| (f.to_string(), l.to_string()))
            .unwrap();
        let suffix = format!("/{file}:{line}");
        text.lines()
            .filter(|l| l.starts_with("samples\tlocation=causal_procpipe:/"))
            .filter(|l| l.split('\t').nth(1).is_some_and(|f| f.ends_with(&suffix)))
            .filter_map(|l| {
                l.split('\t')
                    .find_map(|f| f.strip_prefix("count="))
                    .and_then(|c| c.parse::<u64>().ok())
            })
            .sum()
    };
    let (reader, writer) = (samples("r"), samples("w"));
    assert!(
        reader > writer && writer > 0,
        "samples: reader's line {reader}, writer's line {writer}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn system_process_target_predicts_a_faster_reader_process() {
    let _turn = turn();
    let bin = build("causal_procpipe", &[]);
    let bin = bin.to_str().unwrap();
    // Per item: the reader process works 3 ms, the writer 0.5 ms. The
    // whole reader made faster speeds the program up as much (until the
    // writer limits it); a faster writer gives nothing.
    let reader = profile(
        &scratch("causal_process_reader"),
        &["--system", "--process", "reader"],
        &[bin, "3000"],
    );
    assert!(reader["experiments"].as_u64().unwrap() >= 30, "{reader}");
    let t = target(&reader, "process:reader");
    assert_eq!(t["kind"], "process", "{t}");
    check_prediction("reader process", &reader, "process:reader", || {
        // Both of the reader's lines at half their time.
        let (base, faster) = compare(Path::new(bin), &["600"], &["600", "1", "0.5"], 5);
        (
            0.5,
            1.0 - field(&faster, "item_ns") / field(&base, "item_ns"),
        )
    });
    let writer = profile(
        &scratch("causal_process_writer"),
        &["--system", "--process", "writer"],
        &[bin, "3000"],
    );
    // Nothing measurable, or little: the highest point of a flat curve
    // with two or three experiments a point wanders (+12% in a run whose
    // every interval held 0).
    let w = target(&writer, "process:writer");
    let best = w["max_program_speedup"].as_f64().unwrap();
    assert!(
        (w["no_measurable_effect"] == true || best < 0.1)
            && best < t["max_program_speedup"].as_f64().unwrap(),
        "a faster writer: {w}"
    );
    // A name no process has is an error, not a flat curve.
    let dir = scratch("causal_process_none");
    let out = holdup()
        .args(["causal", "run", "-o"])
        .arg(dir.join("none.coz"))
        .args(["--system", "--process", "reder", "--", bin, "600"])
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("holdup: error"))
        .collect();
    assert!(
        said.len() == 1 && said[0].contains("--process reder: no process of that name"),
        "{err}"
    );
}

/// Copies of programs where another user can run them (the repository may
/// be in a private home), removed at the end.
struct Public(PathBuf);

impl Public {
    fn new(test: &str) -> Public {
        let dir = std::env::temp_dir().join(format!("holdup-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        chmod(&dir, 0o755);
        Public(dir)
    }

    fn copy(&self, bin: &Path) -> PathBuf {
        let to = self.0.join(bin.file_name().unwrap());
        std::fs::copy(bin, &to).unwrap();
        chmod(&to, 0o755);
        to
    }
}

impl Drop for Public {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
}

/// A program whose processes run as another user (a server that drops
/// root, a launcher using runuser) is profiled as a whole: they inherit
/// what the others do, and the profile records they send reach the output.
#[test]
#[ignore = "needs root and BPF"]
fn system_processes_of_another_user_are_profiled() {
    let _turn = turn();
    let dir = scratch("causal_other_user");
    let public = Public::new("other-user");
    let bin = public.copy(&build("causal_procpipe", &[]));
    let report = profile(
        &dir,
        &["--system", "--process", "reader"],
        &[
            "runuser",
            "-u",
            "nobody",
            "--",
            bin.to_str().unwrap(),
            "1500",
        ],
    );
    assert!(report["experiments"].as_u64().unwrap() >= 10, "{report}");
    let t = target(&report, "process:reader");
    assert!(
        predict(t, 0.5) > 0.2,
        "the reader process is the bottleneck: {t}"
    );
    assert_private(&dir.join("profile.coz"));
}

fn assert_private(path: &Path) {
    use std::os::unix::fs::MetadataExt;
    let mode = std::fs::metadata(path).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o600, "{} has mode {mode:o}", path.display());
}

/// `holdup causal run --system --process reader -o COZ -- CMD` within
/// `limit`: how long it took, and its output.
fn timed_system_run(
    coz: &Path,
    cmd: &[&str],
    limit: std::time::Duration,
) -> (std::time::Duration, std::process::Output) {
    let mut run = holdup();
    run.args(["causal", "run", "-o"])
        .arg(coz)
        .args(["--system", "--process", "reader", "--"])
        .args(cmd);
    let t0 = std::time::Instant::now();
    let out = output_within(&mut run, limit).unwrap_or_else(|e| panic!("{e}"));
    (t0.elapsed(), out)
}

/// Root runs `--system` next to an unprivileged user who looks for anything
/// of the run to write to or connect to (new entries in /tmp, /var/tmp and
/// /dev/shm, named sockets, the program's open files) and uses it: forged
/// delays in a shared file once made every thread of the program sleep for
/// minutes. The user finds only the decoys planted here (so it does look),
/// and the program takes about as long as undisturbed.
#[test]
#[ignore = "needs root and BPF"]
fn system_run_offers_nothing_to_another_user() {
    use std::io::BufRead as _;
    use std::time::Duration;
    let _turn = turn();
    let dir = scratch("causal_intruder");
    let public = Public::new("intruder");
    let intruder = public.copy(&workload("causal_intruder"));
    let bin = build("causal_procpipe", &[]);
    let cmd = [bin.to_str().unwrap(), "500"];
    let coz = dir.join("profile.coz");
    let (quiet, _) = timed_system_run(&coz, &cmd, COMMAND_LIMIT);

    let mut spy = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&intruder)
        .args(["600", "reader", "writer"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = std::io::BufReader::new(spy.stdout.take().unwrap()).lines();
    assert_eq!(said.next().unwrap().unwrap(), "ready");
    let decoy_file = public.0.join("decoy");
    std::fs::write(&decoy_file, b"").unwrap();
    chmod(&decoy_file, 0o666);
    let decoy_socket = public.0.join("decoy.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&decoy_socket).unwrap();
    chmod(&decoy_socket, 0o666);

    let (attacked, out) = timed_system_run(&coz, &cmd, quiet * 3 + Duration::from_secs(30));
    // A last round of looking, then what it got.
    std::thread::sleep(Duration::from_millis(200));
    spy.kill().unwrap();
    spy.wait().unwrap();
    let mut found: Vec<String> = said.map_while(Result::ok).collect();
    found.sort();
    let decoys = [&decoy_file, &decoy_socket].map(|p| format!("got {}", p.display()));
    assert_eq!(
        found, decoys,
        "what another user could write to or connect to"
    );
    let notes = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{notes}");
    eprintln!(
        "undisturbed {:.2} s, next to the user {:.2} s",
        quiet.as_secs_f64(),
        attacked.as_secs_f64()
    );
    assert!(
        attacked <= quiet * 2 + Duration::from_secs(3),
        "the run took {attacked:?} next to the user, {quiet:?} undisturbed\n{notes}"
    );
    let report = json(&["causal", "report", "--json", "-i", coz.to_str().unwrap()]);
    assert!(report["experiments"].as_u64().unwrap() >= 5, "{report}");
    assert_private(&coz);
}

/// A process of the program gone bad (one that runs as another user, say)
/// tries to truncate the shared domain, which would make every other
/// process fault on its mapping, then writes 0xff over all of it every
/// millisecond: the truncation is refused, and no value read back makes a
/// thread sleep or crash, so the program runs in about its undisturbed time.
#[test]
#[ignore = "needs root and BPF"]
fn system_domain_damaged_by_a_process_of_the_program_does_not_stall_it() {
    use std::time::Duration;
    let _turn = turn();
    let dir = scratch("causal_forger");
    let intruder = workload("causal_intruder");
    let bin = build("causal_procpipe", &[]);
    let coz = dir.join("profile.coz");
    let (quiet, _) = timed_system_run(&coz, &[bin.to_str().unwrap(), "500"], COMMAND_LIMIT);
    let forged = [
        "sh",
        "-c",
        "\"$0\" forge 3 & exec \"$1\" 500",
        intruder.to_str().unwrap(),
        bin.to_str().unwrap(),
    ];
    let (damaged, out) = timed_system_run(&coz, &forged, quiet * 3 + Duration::from_secs(30));
    let said = String::from_utf8_lossy(&out.stdout);
    let notes = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("truncation refused"), "{said}\n{notes}");
    assert!(
        said.contains("item_ns="),
        "the program did not finish: {said}\n{notes}"
    );
    assert!(!notes.contains("killed by"), "{notes}");
    eprintln!(
        "undisturbed {:.2} s, with the domain damaged {:.2} s",
        quiet.as_secs_f64(),
        damaged.as_secs_f64()
    );
    assert!(
        damaged <= quiet * 2 + Duration::from_secs(3),
        "the run took {damaged:?} with the domain damaged, {quiet:?} undisturbed\n{notes}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn system_prefork_pool_ranks_the_shared_lock_line_first() {
    let _turn = turn();
    let dir = scratch("causal_prefork");
    let bin = build("causal_prefork", &[]);
    let b = bin.to_str().unwrap();
    // Two worker processes; per request 0.5 ms of a worker's own work
    // (line p), then 1.5 ms in a lock all workers share (line c): the
    // lock line is the bottleneck. Experiments on the lines every process
    // offers, in one domain. The waits for the lock make the lock call a
    // candidate too and take about a quarter of the experiments: the run
    // is long enough that the lock line still has some 70.
    let report = profile(&dir, &["--system"], &[b, "20000"]);
    let name = |marker: &str| format!("causal_prefork:{}", line_of("causal_prefork", marker));
    let (c, p) = (name("c"), name("p"));
    assert_top(&report, &c);
    check_prediction("pool lock line", &report, &c, || {
        let (base, faster) = compare(&bin, &["1500"], &["1500", "2", "0.5", "0.75"], 5);
        (
            0.5,
            1.0 - field(&faster, "request_ns") / field(&base, "request_ns"),
        )
    });
    // The workers' own line has slack: less than the lock line at any speedup.
    let (tc, tp) = (target(&report, &c), target(&report, &p));
    assert!(
        predict(tp, 0.5) + 0.15 < predict(tc, 0.5),
        "own line {tp}\nlock line {tc}"
    );
}

/// `-p`: processes already running, with nothing loaded into them, and
/// core-level delays (SCOZ). The bottleneck line is in the reader of a
/// pipe; progress is counted with a uprobe on the reader's progress line.
#[test]
#[ignore = "needs root and BPF"]
fn attach_pipe_reader_line_with_core_level_delays() {
    let _turn = turn();
    let dir = scratch("causal_attach_pipe");
    let bin = build("causal_procpipe", &[]);
    let mut child = Command::new(&bin)
        .arg("8000")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The writer forks the reader at once: both are given, as to `perf -p`.
    let pid = child.id();
    let children = format!("/proc/{pid}/task/{pid}/children");
    let reader = (0..200)
        .find_map(|_| {
            let kids = std::fs::read_to_string(&children).unwrap_or_default();
            let kid = kids.split_whitespace().next().map(str::to_string);
            if kid.is_none() {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            kid
        })
        .expect("the reader process");
    let r = format!("causal_procpipe:{}", line_of("causal_procpipe", "r"));
    let progress = "item_done".to_string();
    let coz = dir.join("profile.coz");
    let pids = format!("{pid},{reader}");
    run_ok(&[
        "causal",
        "run",
        "-o",
        coz.to_str().unwrap(),
        "-p",
        &pids,
        "--progress",
        &progress,
        "--line",
        &line_of("causal_procpipe", "r"),
    ]);
    assert!(child.wait().unwrap().success());
    let report = json(&["causal", "report", "--json", "-i", coz.to_str().unwrap()]);
    eprintln!("{report}");
    assert!(report["experiments"].as_u64().unwrap() >= 50, "{report}");
    check_prediction("pipe reader, -p", &report, &r, || {
        let (base, faster) = compare(&bin, &["600"], &["600", "1"], 5);
        (
            0.5,
            1.0 - field(&faster, "item_ns") / field(&base, "item_ns"),
        )
    });
}

/// `-a` on a kernel-heavy program: four lines each make one system call
/// that walks a path 200 directories deep. The kernel's path walk is one
/// function under all four lines, so it predicts more than each of them.
/// The prediction for it is checked against the program run with half the
/// depth, read at the speedup that gave the walk.
#[test]
#[ignore = "needs root and BPF"]
fn attach_kernel_function_under_several_lines_predicts_more_than_each() {
    let _turn = turn();
    with_second_try(attach_kernel_function_under_several_lines_once);
}

fn attach_kernel_function_under_several_lines_once() {
    let dir = scratch("causal_attach_kernel");
    let bin = build("causal_lookup", &[]);
    let (b, d) = (bin.to_str().unwrap(), dir.to_str().unwrap());
    let progress = format!("{b}:round_done");
    let report = profile(
        &dir,
        &["-a", "--experiment-ms", "50", "--progress", &progress],
        &[b, d, "1000000", "2", "200"],
    );
    let targets = report["targets"].as_array().unwrap();
    let walk_target = targets
        .iter()
        .find(|t| t["target"] == "kernel:link_path_walk")
        .unwrap_or_else(|| panic!("no path walk: {report}"));
    // Not by rank: the ranking follows the highest point each curve
    // reached, which depends on how far its experiments went (a caller
    // that contains the walk for three of the lines once drew a 100%
    // experiment and ranked above it). Compared at 50% with each line below.
    let walk = predict(walk_target, 0.5);
    // Our own instrumentation is no target: the progress uprobe's trap
    // and what it calls, and BPF programs.
    for t in targets {
        let name = t["target"].as_str().unwrap();
        assert!(
            ![
                "kernel:handle_swbp",
                "kernel:handler_chain",
                "kernel:find_active_uprobe",
                "kernel:bpf_prog_"
            ]
            .iter()
            .any(|p| name.starts_with(p)),
            "{name}"
        );
    }
    // The handlers' spins preempt the program: that wait is the delay,
    // not runqueue time (else subclass:sched would grow with every delay).
    let samples = |name: &str| {
        targets
            .iter()
            .find(|t| t["target"] == name)
            .map_or(0, |t| t["samples"].as_u64().unwrap())
    };
    // Counted as runqueue time, the delays (each experiment's speedup times
    // its target's samples) would be a large share of the walk's samples;
    // other load on the machine gives a few percent.
    let sched = samples("subclass:sched");
    assert!(
        sched * 10 < samples("kernel:link_path_walk"),
        "subclass:sched has {sched} samples"
    );
    // Each line alone gives less than the function under all of them.
    for marker in ["stat", "access", "open", "readlink"] {
        let name = format!("causal_lookup:{}", line_of("causal_lookup", marker));
        if let Some(t) = report["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["target"] == name)
        {
            assert!(predict(t, 0.5) < walk, "{t}");
        }
    }
    check_prediction("path walk", &report, "kernel:link_path_walk", || {
        let (base, faster) = compare(
            &bin,
            &[d, "40000", "2", "200"],
            &[d, "40000", "2", "100"],
            5,
        );
        // Half the depth takes more than half of the walk away (its deeper
        // components cost more: 7.5 µs against 6.0 for the first hundred
        // here), and predicted at 50% the walk was 10 points short. The
        // walk's time is the round's beyond a lookup one directory deep.
        let shallow: Vec<Values> = (0..5)
            .map(|_| run_workload(&bin, &[d, "40000", "2", "1"]))
            .collect();
        let [deep, half, floor] =
            [&base, &faster, &medians(&shallow)].map(|v| field(v, "round_ns"));
        ((deep - half) / (deep - floor), 1.0 - half / deep)
    });
}

/// `-a --subclass io`: the reads of the O_DIRECT barrier program, as "a
/// faster disk", with core-level delays; checked as the thread-level test
/// checks the reads' line.
#[test]
#[ignore = "needs root and BPF"]
fn attach_faster_disk_predicts_the_reads() {
    let _turn = turn();
    let dir = scratch("causal_attach_io");
    let bin = build("causal_odirect", &[]);
    let (b, d) = (bin.to_str().unwrap(), dir.to_str().unwrap());
    let progress = "round_done";
    let rounds = odirect_rounds(&bin, d);
    let report = profile(
        &dir,
        &[
            "-a",
            "--subclass",
            "io",
            "--progress",
            &format!("{b}:{progress}"),
        ],
        &[b, d, &rounds, "20", "0.5"],
    );
    assert!(report["experiments"].as_u64().unwrap() >= 30, "{report}");
    check_prediction("faster disk, -a", &report, "subclass:io", || {
        faster_disk(&bin, d)
    });
}

/// Rounds of `causal_odirect` (20 reads of 256 KiB, 0.5 ms of compute) for
/// about 17 s unprofiled: the same disk ran a round in 2 ms one minute and
/// 7 ms the next, and 2 500 fixed rounds gave 26 experiments at 2 ms. At
/// most 6 000, as the disk may slow down again between this timing and the
/// profile.
fn odirect_rounds(bin: &Path, dir: &str) -> String {
    let round_ns = field(&run_workload(bin, &[dir, "100", "20", "0.5"]), "round_ns");
    ((17e9 / round_ns) as u64).clamp(2_500, 6_000).to_string()
}

/// (disk speedup, program speedup) of `causal_odirect` on a disk twice as
/// fast: half the reads, with the CPU time of the other half still burned,
/// so that only the waiting changes (the reads' own CPU time is about a
/// fifth of their time on a virtio disk, and a faster disk keeps it).
fn faster_disk(bin: &Path, dir: &str) -> (f64, f64) {
    let (base, faster) = compare(
        bin,
        &[dir, "200", "20", "0.5"],
        &[dir, "200", "10", "0.5", "20"],
        5,
    );
    (
        1.0 - field(&faster, "read_wait_ns") / field(&base, "read_wait_ns"),
        1.0 - field(&faster, "round_ns") / field(&base, "round_ns"),
    )
}

/// SCOZ's own check against COZ: on multithreaded programs of the
/// validation suite, the system-wide mode ranks the same target first as
/// the thread-level mode, with a prediction within ±10 points.
#[test]
#[ignore = "needs root and BPF"]
fn system_mode_ranks_what_the_thread_mode_ranks() {
    let _turn = turn();
    for (name, args, marker) in [
        ("causal_barrier", ["3500", "8", "5"], "a"),
        ("causal_lock", ["5000", "2", "1"], "cs"),
    ] {
        let bin = build(name, &[]);
        let mut cmd = vec![bin.to_str().unwrap()];
        cmd.extend(args);
        let thread = profile(&scratch(&format!("{name}_thread")), &[], &cmd);
        let system = profile(&scratch(&format!("{name}_system")), &["--system"], &cmd);
        let line = line_of(name, marker);
        // --system names a line with its binary.
        let system_line = format!("{name}:{line}");
        assert_eq!(top_line(&thread), line, "thread mode, {name}");
        assert_eq!(top_line(&system), system_line, "system mode, {name}");
        for report in [&thread, &system] {
            let top = top_target(report);
            assert!(
                top == line || top == system_line || top == "subclass:sched",
                "{name}: {top} ranks first"
            );
        }
        let (t, s) = (
            predict(target(&thread, &line), 0.5),
            predict(target(&system, &system_line), 0.5),
        );
        eprintln!(
            "{name}: {line} at 50%: thread mode {:.1}%, system mode {:.1}%",
            100.0 * t,
            100.0 * s
        );
        assert_near(&format!("{name}: system vs thread mode at 50%"), s, t, 0.10);
    }
}

#[test]
#[ignore = "needs root and BPF"]
fn a_program_that_unloads_libraries_is_not_crashed() {
    let _turn = turn();
    let dir = scratch("causal_dlclose");
    let bin = build("causal_dlclose", &["-ldl"]);
    // The library is unloaded about every half millisecond, with samples
    // from inside it queued: before the runtime took dlclose in hand, two
    // runs in three died reading the unwind tables of an unloaded library.
    for _ in 0..3 {
        let report = profile(&dir, &[], &[bin.to_str().unwrap(), "2000"]);
        assert!(report["experiments"].as_u64().unwrap() > 0, "{report}");
    }
}

/// The runtime wraps the lock calls (a free lock is taken at once, a held
/// one waited for): what the C library answers reaches the program as it
/// is, a dead owner's robust mutex and a relock by the owner included.
#[test]
#[ignore = "needs root and BPF"]
fn lock_calls_answer_under_the_runtime_as_without_it() {
    let _turn = turn();
    let dir = scratch("causal_lockresults");
    let bin = build("causal_lockresults", &[]);
    let coz = dir.join("profile.coz");
    let bin = bin.to_str().unwrap();
    let plain = Command::new(bin).arg("300").bounded_output();
    let profiled = run_ok(&[
        "causal",
        "run",
        "-o",
        coz.to_str().unwrap(),
        "--",
        bin,
        "1500",
    ]);
    let want = "robust=EOWNERDEAD errorcheck=EDEADLK recursive=0 rdlock=0";
    for (how, out) in [("plain", &plain), ("profiled", &profiled)] {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with(want), "{how}: {text}");
    }
}

#[test]
#[ignore = "needs root and BPF"]
fn progress_point_that_does_not_exist_is_one_clear_error() {
    // Its build (and the first build's calibration) would run beside
    // another test's experiments, whose curves it would disturb.
    let _turn = turn();
    let bin = build("causal_barrier", &["-DNO_PROGRESS"]);
    for (opt, spec, says) in [
        (
            "--progress",
            "no_such_function",
            "no function 'no_such_function'",
        ),
        ("--progress", "causal_barrier.c:1", "has no code"),
        ("--latency", "round_start", "BEGIN,END"),
    ] {
        let out = holdup()
            .args(["causal", "run", "-o", "/dev/null", opt, spec, "--"])
            .arg(&bin)
            .arg("10")
            .bounded_output();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(err.contains(says) && err.lines().count() == 1, "{err}");
    }
}

#[test]
#[ignore = "needs root and BPF"]
fn no_progress_point_says_what_to_do() {
    let _turn = turn();
    let dir = scratch("causal_noprogress");
    let bin = build("causal_misc", &[]);
    let coz = dir.join("profile.coz");
    let out = holdup()
        .args([
            "causal",
            "run",
            "-o",
            coz.to_str().unwrap(),
            "--",
            bin.to_str().unwrap(),
            "noprogress",
            "1500",
        ])
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("COZ_PROGRESS") && err.contains("--end-to-end"),
        "{err}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn crash_keeps_experiments_done_so_far() {
    let _turn = turn();
    let dir = scratch("causal_crash");
    let bin = build("causal_misc", &[]);
    let coz = dir.join("profile.coz");
    let out = holdup()
        .args([
            "causal",
            "run",
            "-o",
            coz.to_str().unwrap(),
            "--",
            bin.to_str().unwrap(),
            "crash",
            "3000",
        ])
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGSEGV), "{err}");
    assert!(
        err.contains("keeps the") && err.contains("experiments done so far"),
        "{err}"
    );
    let report = json(&["causal", "report", "--json", "-i", coz.to_str().unwrap()]);
    assert_eq!(report["schema"], "holdup.causal/1");
    assert!(report["experiments"].as_u64().unwrap() >= 3, "{report}");
    assert_eq!(report["progress_points"][0], "ms");
}

#[test]
#[ignore = "needs root and BPF"]
fn coz_header_and_end_to_end() {
    let _turn = turn();
    let dir = scratch("causal_cozh");
    // Programs built against COZ's own coz.h work unmodified.
    let cozh = Path::new("/usr/include/coz.h").exists();
    let bin = if cozh {
        build("causal_barrier", &["-DUSE_COZ_H"])
    } else {
        build("causal_barrier", &[])
    };
    if !cozh {
        eprintln!("coz.h not installed (apt coz-profiler): testing holdup.h only");
    }
    let b = bin.to_str().unwrap();
    let report = profile(&dir, &["--experiment-ms", "100"], &[b, "400", "4", "2"]);
    assert_eq!(report["progress_points"][0], "round");
    assert!(report["experiments"].as_u64().unwrap() >= 5, "{report}");
    // --end-to-end: program completion is the progress point, one
    // experiment per run.
    let e2e = profile(&dir, &["--end-to-end", "--runs", "3"], &[b, "40", "4", "2"]);
    assert_eq!(e2e["progress_points"][0], "end-to-end");
    assert_eq!(e2e["experiments"], 3);
}
