//! CPython frames without flags: a pure-Python hot loop is named on its
//! thread's on-CPU samples, and a thread blocked in `time.sleep` shows its
//! Python caller on its blocked samples, on every interpreter version the
//! recorder knows (3.10 to 3.13); a version it does not know is recorded as
//! before, and said once. The interpreters are pyenv's
//! (`~/.pyenv/versions/X/bin/python`); a test whose version is absent says
//! so and passes. Needs root and BPF.

use crate::support::*;
use serde_json::Value;
use std::path::PathBuf;

/// pyenv's interpreter of `version`, if installed.
pub(crate) fn python(version: &str) -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let p = PathBuf::from(home).join(format!(".pyenv/versions/{version}/bin/python"));
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: no CPython {version} at {}", p.display());
        None
    }
}

/// pyenv's CPython `version` recorded running `workloads/runtimes/SCRIPT
/// ARGS`, in scratch directory `name`: the trace and the workload's output;
/// None when that version is absent. The caller holds the serial lock.
pub(crate) fn record_python(
    version: &str,
    name: &str,
    script: &str,
    args: &[&str],
) -> Option<(PathBuf, String)> {
    let py = python(version)?;
    let dir = scratch(name);
    let script = repo_root().join("workloads/runtimes").join(script);
    let mut cmd = vec![py.to_str().unwrap(), script.to_str().unwrap()];
    cmd.extend_from_slice(args);
    Some(record_with_output(&dir, &[], &cmd))
}

fn workload() -> String {
    let p = repo_root().join("workloads/runtimes/py_threads.py");
    p.to_str().unwrap().to_string()
}

/// Weighted samples of `class` of thread `t` whose stack has a frame of the
/// Python function `name` (at any line): the report counts each
/// `name (file.py:LINE)` apart, and a sample has one frame of a function
/// that does not recurse.
fn named_samples(t: &Value, name: &str, class: &str) -> f64 {
    let prefix = format!("{name} (");
    t["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["symbol"].as_str().unwrap_or("").starts_with(&prefix))
        .map(|f| f["total"][class].as_f64().unwrap())
        .sum()
}

/// Python function `name` is on ≥ 90% of thread `t`'s samples of `class`,
/// of which it has `at_least`.
fn named_on_most(t: &Value, name: &str, class: &str, at_least: f64, version: &str) {
    let all = t["samples"][class].as_f64().unwrap();
    let named = named_samples(t, name, class);
    eprintln!("{version}: {name} named on {named} of {all} {class} samples of its thread");
    assert!(all >= at_least, "{}", t["samples"]);
    assert!(named >= 0.9 * all, "{name}: {named} of {all}");
}

pub(crate) fn thread(r: &Value, tid: f64) -> &Value {
    threads(r)
        .iter()
        .find(|t| t["tid"].as_f64() == Some(tid))
        .unwrap_or_else(|| panic!("no thread {tid} in the report"))
}

/// The hot loop `hot` (called by `spinner`) is on ≥ 90% of the spinning
/// thread's on-CPU samples, and `napper`, which sleeps in `time.sleep`, is
/// on ≥ 90% of its sleeping thread's blocked samples, under the native
/// frames of the sleep.
fn frames_are_named(version: &str) {
    if let Some(py) = python(version) {
        frames_are_named_by(&py, version);
    }
}

fn frames_are_named_by(py: &std::path::Path, version: &str) {
    let _serial = serial();
    let dir = scratch(&format!("python_{}", version.replace(' ', "_")));
    let (data, stdout) = record_with_output(&dir, &[], &[py.to_str().unwrap(), &workload(), "1.5"]);
    let r = report(&data);
    // The spinner ran for more than 50 ms, the napper slept for 0.5 s.
    let spinner = thread(&r, printed_value(&stdout, "spinner_tid"));
    named_on_most(spinner, "hot", "cpu", 50.0, version);
    let napper = thread(&r, printed_value(&stdout, "napper_tid"));
    named_on_most(napper, "napper", "other", 500.0, version);

    // The native frames of the sleep stay, under the Python caller.
    let out = run_ok(&[
        "script",
        "-i",
        data.to_str().unwrap(),
        "--tid",
        &napper["tid"].to_string(),
    ]);
    let folded = String::from_utf8_lossy(&out.stdout);
    let under = folded
        .lines()
        .filter(|l| l.contains(";napper (py_threads.py:") && l.contains(";time_sleep;"))
        .count();
    assert!(under > 0, "no time_sleep under napper:\n{folded}");
    let caller_first =
        folded
            .lines()
            .all(|l| match (l.find(";napper ("), l.find(";time_sleep;")) {
                (Some(n), Some(s)) => n < s,
                _ => true,
            });
    assert!(caller_first, "time_sleep is called by napper:\n{folded}");
}

/// The distribution's `python3` (Debian's is stripped, not position
/// independent, with the interpreter in the executable), when it is one of
/// the versions known. Its module bodies are freed after they ran, and
/// their code objects' memory goes to the functions made next: a frame must
/// not be named after the code object that was there before.
#[test]
#[ignore = "needs root and BPF"]
fn the_distributions_python_frames_are_named() {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output();
    let version = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => {
            eprintln!("skipped: no python3");
            return;
        }
    };
    if !["3.10", "3.11", "3.12", "3.13"].contains(&version.as_str()) {
        eprintln!("skipped: python3 is {version}, not 3.10 to 3.13");
        return;
    }
    frames_are_named_by(
        std::path::Path::new("python3"),
        &format!("system {version}"),
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn python_3_10_frames_are_named() {
    frames_are_named("3.10.13");
}

#[test]
#[ignore = "needs root and BPF"]
fn python_3_11_frames_are_named() {
    frames_are_named("3.11.7");
}

#[test]
#[ignore = "needs root and BPF"]
fn python_3_12_frames_are_named() {
    frames_are_named("3.12.1");
}

#[test]
#[ignore = "needs root and BPF"]
fn python_3_13_frames_are_named() {
    frames_are_named("3.13.0");
}

/// CPython 3.9 has no layout here: the recording is made as before (native
/// frames), and its reports say once what is missing.
#[test]
#[ignore = "needs root and BPF"]
fn an_unknown_python_version_is_recorded_natively_and_said() {
    let Some(py) = python("3.9.18") else {
        return;
    };
    let _serial = serial();
    let dir = scratch("python_unknown");
    let (data, _) = record_with_output(&dir, &[], &[py.to_str().unwrap(), &workload(), "0.5"]);
    // The trace says it to every reader.
    let out = run_ok(&["report", "-i", data.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("CPython 3.9"))
        .collect();
    assert_eq!(said.len(), 1, "said once:\n{stderr}");
    assert!(said[0].contains("no frame layout known"), "{}", said[0]);
    let r = report(&data);
    let py_frames = threads(&r)
        .iter()
        .flat_map(|t| t["functions"].as_array().unwrap())
        .filter(|f| f["dso"] == "[python]")
        .count();
    assert_eq!(py_frames, 0);
    assert!(threads(&r).len() >= 3, "the threads are recorded");
}

/// The system calls of a Python thread are made from its Python code: the
/// napper's sleeps (`time.sleep` → `clock_nanosleep`) have `napper` on
/// their user stack, in `holdup syscalls`' slowest invocations.
#[test]
#[ignore = "needs root and BPF"]
fn python_frames_are_on_system_call_stacks() {
    let Some(py) = python("3.12.1") else {
        return;
    };
    let _serial = serial();
    let dir = scratch("python_syscalls");
    let (data, stdout) = record_with_output(
        &dir,
        &["--syscalls"],
        &[py.to_str().unwrap(), &workload(), "1"],
    );
    let napper = printed_value(&stdout, "napper_tid");
    let r = super::syscalls::syscalls_json(&data);
    let sleeps: Vec<&Value> = r["slowest"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["tid"].as_f64() == Some(napper) && i["name"] == "clock_nanosleep")
        .collect();
    let named = sleeps
        .iter()
        .filter(|i| {
            i["user_stack"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f.as_str().unwrap().starts_with("napper (py_threads.py:"))
        })
        .count();
    eprintln!("napper named on {named} of {} sleeps", sleeps.len());
    // It naps 50 ms at a time for 1 s.
    assert!(sleeps.len() >= 15, "{} sleeps", sleeps.len());
    assert!(
        named * 10 >= sleeps.len() * 9,
        "{named} of {}",
        sleeps.len()
    );
}

/// A recursion 50 levels deep spinning at the bottom: its frames take more
/// of the interpreter's data stack than the recorder reads at once (3.11+),
/// so the rest are read one by one; every level is on the spinning stacks.
#[test]
#[ignore = "needs root and BPF"]
fn a_deep_recursion_is_walked_to_its_first_frame() {
    let Some(py) = python("3.12.1") else {
        return;
    };
    let _serial = serial();
    let dir = scratch("python_deep");
    let script = repo_root().join("workloads/runtimes/py_deep.py");
    let (data, _) = record_with_output(
        &dir,
        &[],
        &[py.to_str().unwrap(), script.to_str().unwrap(), "50", "1"],
    );
    let out = run_ok(&["script", "-i", data.to_str().unwrap()]);
    let folded = String::from_utf8_lossy(&out.stdout);
    // down(50) to down(0), under the module's frame; each line is a
    // stack and its weight.
    let spinning: Vec<(usize, f64, bool)> = folded
        .lines()
        .filter(|l| l.contains(";spin (py_deep.py:"))
        .map(|l| {
            let (stack, weight) = l.rsplit_once(' ').unwrap();
            (
                stack.matches(";down (py_deep.py:").count(),
                weight.parse::<f64>().unwrap(),
                stack.contains(";<module> (py_deep.py:"),
            )
        })
        .collect();
    let all: f64 = spinning.iter().map(|s| s.1).sum();
    let whole: f64 = spinning
        .iter()
        .filter(|s| s.0 == 51 && s.2)
        .map(|s| s.1)
        .sum();
    eprintln!("{whole} of {all} spinning samples have the 51 levels under the module");
    assert!(all >= 20.0, "{folded}");
    assert!(whole >= 0.9 * all, "{spinning:?}");
}

/// Functions made at run time one after another, each spinning 50 ms and
/// dropped before the next is made, so that each one's code object takes
/// the memory of the one before (the program counts the addresses reused).
/// The recorder keeps what it learnt of a code object from sample to sample
/// (3.12+, while the interpreter's count of the code objects it made says
/// none was made since): a round named after the code object its address
/// held before would hand its samples to an earlier round. Each round has
/// its own, about 50 of them (at 1 kHz, whatever the load: the stack is on
/// its samples off the CPU too).
fn reused_code_addresses_get_their_own_names(version: &str) {
    let _serial = serial();
    let name = format!("python_reused_{version}");
    let Some((data, stdout)) = record_python(version, &name, "py_reused_code.py", &["20", "50"])
    else {
        return;
    };
    let rounds = printed_value(&stdout, "rounds") as usize;
    let reused = printed_value(&stdout, "reused");
    assert!(reused >= 10.0, "{version}: only {reused} addresses reused");
    eprintln!("{version}: {reused} of {rounds} addresses reused");
    let out = run_ok(&["script", "-i", data.to_str().unwrap()]);
    // The first round starts before the recorder knows the interpreter.
    each_round_has_its_own_name(version, &String::from_utf8_lossy(&out.stdout), rounds, 0.0);
}

/// `rounds` rounds of py_reused_code, each named on about 50 samples in
/// the folded stacks `folded` (the first on at least `first_low`).
fn each_round_has_its_own_name(version: &str, folded: &str, rounds: usize, first_low: f64) {
    let mut per_round = vec![0.0; rounds];
    for l in folded.lines() {
        let (stack, weight) = l.rsplit_once(' ').unwrap();
        // The innermost round on the stack (there is one).
        if let Some((_, rest)) = stack.rsplit_once(";round_") {
            let k: usize = rest.split(' ').next().unwrap().parse().unwrap();
            per_round[k] += weight.parse::<f64>().unwrap();
        }
    }
    eprintln!("{version}: samples by round {per_round:?}");
    for (k, &n) in per_round.iter().enumerate() {
        let low = if k == 0 { first_low } else { 30.0 };
        assert!(
            (low..=80.0).contains(&n),
            "{version}: round_{k} named on {n} samples, not about 50: {per_round:?}"
        );
    }
}

#[test]
#[ignore = "needs root and BPF"]
fn python_3_10_reused_code_addresses_get_their_own_names() {
    reused_code_addresses_get_their_own_names("3.10.13");
}

#[test]
#[ignore = "needs root and BPF"]
fn python_3_11_reused_code_addresses_get_their_own_names() {
    reused_code_addresses_get_their_own_names("3.11.7");
}

#[test]
#[ignore = "needs root and BPF"]
fn python_3_12_reused_code_addresses_get_their_own_names() {
    reused_code_addresses_get_their_own_names("3.12.1");
}

#[test]
#[ignore = "needs root and BPF"]
fn python_3_13_reused_code_addresses_get_their_own_names() {
    reused_code_addresses_get_their_own_names("3.13.0");
}

/// Two hundred forked interpreters alive to the program's end, as a process
/// pool's workers are, and one more running the reused-code rounds. Each
/// child is walked (its sleeps are named after its Python caller), the code
/// objects a child frees are counted (each round keeps its own name), and
/// the recording ends with the program: with a uprobe on the code
/// deallocator per process, their detaches (one grace period each, one at
/// a time) kept `holdup record` running 20 s past a 2 s program.
#[test]
#[ignore = "needs root and BPF"]
fn forked_interpreters_are_walked_and_the_recording_ends_with_them() {
    let _serial = serial();
    let version = "3.12.1";
    let started = std::time::Instant::now();
    let Some((data, stdout)) = record_python(
        version,
        "python_forks",
        "py_forks.py",
        &["200", "3", "20", "50"],
    ) else {
        return;
    };
    let recorded = started.elapsed().as_secs_f64();
    let program = printed_value(&stdout, "workload_s");
    eprintln!("program {program:.2} s, recording {recorded:.2} s");
    assert!(
        recorded < program + 8.0,
        "the recording ended {:.1} s after the program",
        recorded - program
    );
    let out = run_ok(&["script", "-i", data.to_str().unwrap()]);
    let folded = String::from_utf8_lossy(&out.stdout);
    // The children's sleeps, named or not: only they call clock_nanosleep.
    let weight = |l: &str| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap();
    let sleeps: Vec<&str> = folded
        .lines()
        .filter(|l| l.contains("clock_nanosleep"))
        .collect();
    let all: f64 = sleeps.iter().map(|l| weight(l)).sum();
    let named: f64 = sleeps
        .iter()
        .filter(|l| l.contains(";hold ("))
        .map(|l| weight(l))
        .sum();
    eprintln!("hold named on {named} of {all} sleeping samples");
    // 200 children sleeping about 3 s, sampled at 1 kHz.
    assert!(all >= 200.0 * 2000.0, "{all}");
    assert!(named >= 0.95 * all, "{named} of {all}");
    // The child is forked after the recorder knows its parent's interpreter.
    each_round_has_its_own_name(version, &folded, 20, 30.0);
}

/// CPython 3.12 runs CPython 3.11 as a subprocess at once (fork, then exec)
/// for 60 rounds of 50 ms. The child's new interpreter is recognised from
/// its mappings; its fork, which reaches the converter later with the
/// ring's records, must not hand it its parent's interpreter (it did: the
/// child's rounds went unnamed from the first drain on, a second in, 975
/// of 3000 samples named).
#[test]
#[ignore = "needs root and BPF"]
fn a_subprocess_running_another_python_keeps_its_own_interpreter() {
    let _serial = serial();
    let (Some(_), Some(child)) = (python("3.12.1"), python("3.11.7")) else {
        return;
    };
    let rounds = repo_root().join("workloads/runtimes/py_reused_code.py");
    let Some((data, _)) = record_python(
        "3.12.1",
        "python_spawn",
        "py_spawn.py",
        &[
            child.to_str().unwrap(),
            rounds.to_str().unwrap(),
            "60",
            "50",
        ],
    ) else {
        return;
    };
    let out = run_ok(&["script", "-i", data.to_str().unwrap()]);
    each_round_has_its_own_name("3.11.7", &String::from_utf8_lossy(&out.stdout), 60, 0.0);
}
