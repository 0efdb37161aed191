//! Python programs as causal targets, without flags: the Python frames the
//! recorder walks are the targets, in place of the interpreter's own code.
//! Ground truth: a round of `hot()` (60%) and `cold()` (40%), a progress
//! visit each; the prediction for `hot` made 50% faster is checked against
//! the program with hot's work halved. A running program (`-p`) gets its
//! lines as targets; an interpreter whose frames are not walked is said
//! once, and its run goes on with native targets.

use super::python::python;
use crate::support::causal::{predict, target};
use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workload() -> PathBuf {
    repo_root().join("workloads/runtimes/py_hot_cold.py")
}

/// The CPU time of the workload's median round (its work alone, whatever
/// else shares the cores), with hot's work scaled by `hot_scale`.
fn round_cpu_ns(py: &Path, hot_scale: &str) -> f64 {
    let out = Command::new(py)
        .arg(workload())
        .args(["80", "30000", "20000", hot_scale])
        .bounded_output();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    printed_value(&String::from_utf8_lossy(&out.stdout), "round_cpu_median_ns")
}

/// The measured program speedup of halving hot(), from interleaved runs as
/// it is and with hot's work halved. Load elsewhere only ever slows the
/// work: within a run a burst spoils a few rounds (hence the median round),
/// and a run that shares its core with a busy neighbour throughout is slow
/// as a whole (measured: a halved run's median round at 2.21 ms where the
/// others took 1.80 to 1.85), so each side's least disturbed run is its
/// cost. Under a busy suite the mean CPU time of three runs a side once
/// measured 8% where the construction gives 30%.
fn measured_speedup(py: &Path) -> f64 {
    let (mut base, mut half) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..5 {
        base = base.min(round_cpu_ns(py, "1"));
        half = half.min(round_cpu_ns(py, "0.5"));
    }
    eprintln!("median round's CPU time: {base:.0} ns as it is, {half:.0} ns with hot() halved");
    1.0 - half / base
}

/// `causal run` of the workload under `py` (progress: its getppid calls)
/// with `flags`; its stderr, and the profile.
fn causal(py: &Path, dir: &Path, flags: &[&str], rounds: &str) -> (String, PathBuf) {
    let coz = dir.join("profile.coz");
    let coz = coz.to_str().unwrap();
    let out = holdup()
        .args(["causal", "run", "-o", coz, "--progress", "syscall:getppid"])
        .args(flags)
        .arg("--")
        .arg(py)
        .arg(workload())
        .arg(rounds)
        .bounded_output();
    let notes = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{notes}");
    (notes, PathBuf::from(coz))
}

fn report(coz: &Path) -> Value {
    json(&["causal", "report", "--json", "-i", coz.to_str().unwrap()])
}

/// The locations of a profile's sample counts.
fn sampled(coz: &Path) -> Vec<String> {
    std::fs::read_to_string(coz)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("samples\tlocation="))
        .filter_map(|l| l.split('\t').next())
        .map(str::to_string)
        .collect()
}

fn names(report: &Value) -> Vec<String> {
    report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["target"].as_str().unwrap().to_string())
        .collect()
}

/// How far holdup's prediction for `hot` made 50% faster may be from the
/// measured speedup of halving its work: four runs on a loaded two-core
/// machine (load 13) predicted +23%, +34%, +34% and +43% for a measured
/// +30%; one run in about four is then off by more, and a second run is
/// taken.
const TOLERANCE: f64 = 0.12;

#[test]
#[ignore = "needs root and BPF"]
fn a_python_function_is_the_target_and_predicts_halving_it() {
    let _serial = serial();
    let Some(py) = python("3.12.1") else { return };
    let dir = scratch("causal_python");
    let measured = measured_speedup(&py);
    let (hot, cold) = ("py_hot_cold.py:hot", "py_hot_cold.py:cold");
    let mut tries = Vec::new();
    for _ in 0..2 {
        let (notes, coz) = causal(&py, &dir, &["--granularity", "function"], "2500");
        let report = report(&coz);
        let all = names(&report);
        let rank = |name: &str| {
            all.iter()
                .position(|n| n == name)
                .unwrap_or_else(|| panic!("no {name} in {all:?}\n{notes}"))
        };
        assert_eq!(target(&report, hot)["kind"], "function");
        // The interpreter's own code stands for the Python frames: no
        // target of it has more than the few samples taken before they
        // were walked.
        for t in report["targets"].as_array().unwrap() {
            if t["target"].as_str().unwrap().starts_with("libpython") {
                assert!(t["samples"].as_f64().unwrap() < 50.0, "{t}");
            }
        }
        let (at_half, cold_at_half) = (
            predict(target(&report, hot), 0.5),
            predict(target(&report, cold), 0.5),
        );
        eprintln!(
            "hot() halved: predicted {:.1}%, measured {:.1}%; cold() halved: predicted {:.1}%; ranks {} and {}",
            at_half * 100.0,
            measured * 100.0,
            cold_at_half * 100.0,
            rank(hot),
            rank(cold)
        );
        tries.push((at_half, cold_at_half, rank(hot), rank(cold)));
        if rank(hot) < rank(cold)
            && cold_at_half < at_half
            && (at_half - measured).abs() <= TOLERANCE
        {
            return;
        }
    }
    panic!("measured {measured:.3}; (hot, cold) predicted and ranked: {tries:?}");
}

#[test]
#[ignore = "needs root and BPF"]
fn a_running_python_program_has_its_lines_as_targets() {
    let _serial = serial();
    let Some(py) = python("3.11.7") else { return };
    let dir = scratch("causal_python_pid");
    let mut program = Command::new(&py)
        .arg(workload())
        .arg("0")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = program.id().to_string();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let coz = dir.join("profile.coz");
    let coz = coz.to_str().unwrap();
    let out = holdup()
        .args(["causal", "run", "-p", &pid, "--duration", "6", "-o", coz])
        .args(["--progress", "syscall:getppid"])
        .bounded_output();
    program.kill().unwrap();
    program.wait().unwrap();
    let notes = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{notes}");
    let report = json(&["causal", "report", "--json", "-i", coz]);
    // Lines of the script, by its path: hot's loop (its two lines after
    // `x = 0`) has three samples for cold's two.
    let file = workload().display().to_string();
    let source = std::fs::read_to_string(&file).unwrap();
    let def = |f: &str| {
        let at = source
            .lines()
            .position(|l| l == format!("def {f}(n):"))
            .unwrap();
        at as u32 + 1
    };
    let samples = |line: u32| {
        report["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["location"] == format!("{file}:{line}").as_str())
            .map_or(0.0, |t| t["samples"].as_f64().unwrap())
    };
    let (h, c) = (def("hot"), def("cold"));
    let (hot, cold) = (
        samples(h + 2) + samples(h + 3),
        samples(c + 2) + samples(c + 3),
    );
    eprintln!("-p: hot's lines {hot} samples, cold's {cold}");
    assert!(cold > 100.0, "{:?}", names(&report));
    assert_near("hot's share of hot and cold", hot / (hot + cold), 0.6, 0.1);
}

#[test]
#[ignore = "needs root and BPF"]
fn a_python_whose_frames_are_not_walked_keeps_native_targets_and_says_so() {
    let _serial = serial();
    let Some(py) = python("3.9.18") else { return };
    let dir = scratch("causal_python_39");
    let (notes, coz) = causal(&py, &dir, &[], "600");
    let said: Vec<&str> = notes
        .lines()
        .filter(|l| l.contains("CPython 3.9"))
        .collect();
    assert_eq!(said.len(), 1, "{notes}");
    assert!(said[0].contains("Python frames are not targets"), "{notes}");
    // The interpreter's C source lines (pyenv builds it with -g).
    let all = sampled(&coz);
    assert!(!all.iter().any(|n| n.contains(".py")), "{all:?}");
    assert!(
        all.iter()
            .filter(|n| n.ends_with(".c") || n.contains(".c:"))
            .count()
            > 3,
        "{all:?}"
    );
}
