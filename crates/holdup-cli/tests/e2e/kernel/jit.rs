//! Generated code by name: the JVM, V8 and CPython write what they
//! compiled into perf maps or jitdump files, and holdup names the frames
//! of that code from them. Each workload (`workloads/jit/`) spins in one
//! hot function and times its own thread's CPU time in the loop: that
//! many on-CPU samples of the thread must carry the function's name.

use crate::support::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Folded-stack frames that end a blocked stack (not on a CPU).
const BLOCKED: [&str; 4] = [
    "[I] io wait",
    "[L] lock wait",
    "[S] runqueue",
    "[B] blocked",
];

/// Per thread (`comm-tid`): its on-CPU samples, and those with a frame
/// whose name contains `hot`.
fn named_samples(data: &Path, hot: &str) -> HashMap<String, (u64, u64)> {
    let out = run_ok(&["script", "--per-thread", "-i", data.to_str().unwrap()]);
    let mut threads: HashMap<String, (u64, u64)> = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        let frames: Vec<&str> = stack.split(';').collect();
        if BLOCKED.contains(frames.last().unwrap()) {
            continue;
        }
        let t = threads.entry(frames[0].to_string()).or_default();
        t.0 += n;
        if frames[1..].iter().any(|f| f.contains(hot)) {
            t.1 += n;
        }
    }
    threads
}

/// Record `cmd` (a workload printing `hot_cpu_s` and its `pid`), and
/// return the share of the hot thread's CPU time in the loop that samples
/// named `hot` cover, holdup's stderr and the program's pid.
fn named_share(dir: &Path, cmd: &[&str], envs: &[(&str, &str)], hot: &str) -> (f64, String, u32) {
    let data = dir.join("holdup.data");
    let out = holdup()
        .args(["record", "-o", data.to_str().unwrap(), "--"])
        .args(cmd)
        .envs(envs.iter().copied())
        .current_dir(dir)
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{cmd:?}: {err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let hot_cpu = printed_value(&stdout, "hot_cpu_s");
    let threads = named_samples(&data, hot);
    // The runtimes leave their maps in /tmp.
    let pid = printed_value(&stdout, "pid") as u32;
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    let _ = std::fs::remove_file(format!("/tmp/jit-{pid}.dump"));
    let (thread, &(cpu, named)) = threads.iter().max_by_key(|(_, &(_, named))| named).unwrap();
    // Samples of 1 ms each (holdup's default period).
    let share = named as f64 / 1000.0 / hot_cpu;
    eprintln!(
        "{cmd:?}: {thread}: {named} of {cpu} on-CPU samples name {hot}; the loop took {hot_cpu:.3} s of CPU: {:.1}%",
        100.0 * share
    );
    (share, err, pid)
}

/// The hot function named ≥ 90% of its loop's time, from the maps the
/// program wrote, of which holdup says nothing more (other processes, as
/// a JVM running jcmd, may have no maps).
#[track_caller]
fn assert_named((share, err, pid): (f64, String, u32)) {
    assert!(
        (0.9..1.1).contains(&share),
        "the hot function names {:.1}% of its loop's CPU time: {err}",
        100.0 * share
    );
    assert!(err.contains(" of generated code from "), "{err}");
    assert!(!err.contains(&format!("process {pid} ")), "{err}");
}

fn workload_file(name: &str) -> String {
    repo_root()
        .join("workloads/jit")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

/// `~/.pyenv/versions/3.MINOR*/bin/python`.
fn python(minor: u32) -> PathBuf {
    let versions = Path::new(&std::env::var("HOME").unwrap()).join(".pyenv/versions");
    let prefix = format!("3.{minor}.");
    std::fs::read_dir(&versions)
        .ok()
        .into_iter()
        .flatten()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path().join("bin/python"))
        .unwrap_or_else(|| {
            panic!(
                "no CPython 3.{minor} under {} (scripts/deps builds it with pyenv)",
                versions.display()
            )
        })
}

#[test]
#[ignore = "needs root and BPF"]
fn a_programs_own_map_is_kept_after_it_vanished_and_its_bad_lines_counted() {
    let _serial = serial();
    let dir = scratch("jit_own_map");
    let bin = workload("jit_map");
    // The map goes away after 2 s: holdup read it while recording.
    let (share, err, pid) = named_share(
        &dir,
        &[bin.to_str().unwrap(), "2", "0.5"],
        &[],
        "generated_spin",
    );
    assert!(!Path::new(&format!("/tmp/perf-{pid}.map")).exists());
    assert_named((share, err.clone(), pid));
    // Two malformed lines, and a last one never finished.
    assert!(
        err.contains("1 name of generated code from 1 JIT map (3 malformed or cut lines skipped)"),
        "{err}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn hotspot_names_its_compiled_methods_at_exit_and_through_jcmd() {
    let _serial = serial();
    let dir = scratch("jit_java");
    let status = Command::new("javac")
        .args(["-d", dir.to_str().unwrap(), &workload_file("Hot.java")])
        .bounded_status();
    assert!(status.success(), "javac");
    let cp = dir.to_str().unwrap();
    let flags = [
        "-XX:+PreserveFramePointer",
        "-XX:+UnlockDiagnosticVMOptions",
    ];
    // The map written as the JVM exits.
    let mut cmd = vec!["java"];
    cmd.extend(flags);
    cmd.extend(["-XX:+DumpPerfMapAtExit", "-cp", cp, "Hot", "2"]);
    assert_named(named_share(&dir, &cmd, &[], "Hot.spinHot"));
    // The map written while it runs, by jcmd.
    let mut cmd = vec!["java"];
    cmd.extend(flags);
    cmd.extend(["-cp", cp, "Hot", "2", "jcmd"]);
    assert_named(named_share(&dir, &cmd, &[], "Hot.spinHot"));
}

#[test]
#[ignore = "needs root and BPF"]
fn v8_names_its_functions_from_a_perf_map_or_a_jitdump() {
    let _serial = serial();
    let dir = scratch("jit_node");
    let hot = workload_file("hot.js");
    assert_named(named_share(
        &dir,
        &["node", "--perf-basic-prof", &hot, "2"],
        &[],
        "spinHot",
    ));
    // --perf-prof writes jit-PID.dump in the working directory.
    assert_named(named_share(
        &dir,
        &[
            "node",
            "--perf-prof",
            "--interpreted-frames-native-stack",
            &hot,
            "2",
        ],
        &[],
        "spinHot",
    ));
    // Without either: nothing names the code, and holdup says which flag
    // would, once, and so does every report of the trace.
    let (share, err, _) = named_share(&dir, &["node", &hot, "0.5"], &[], "spinHot");
    assert_eq!(share, 0.0);
    let hint = "ran generated code that no perf map or jitdump names";
    assert_eq!(err.matches(hint).count(), 1, "{err}");
    assert!(
        err.contains("(node)") && err.contains("--perf-basic-prof"),
        "{err}"
    );
    let data = dir.join("holdup.data");
    let report = holdup()
        .args(["report", "-i", data.to_str().unwrap()])
        .bounded_output();
    let said = String::from_utf8_lossy(&report.stderr);
    assert_eq!(said.matches(hint).count(), 1, "{said}");
}

#[test]
#[ignore = "needs root and BPF"]
fn cpython_names_its_functions_with_x_perf_and_x_perf_jit() {
    let _serial = serial();
    let dir = scratch("jit_python");
    let hot = workload_file("hot.py");
    let py312 = python(12);
    assert_named(named_share(
        &dir,
        &[py312.to_str().unwrap(), &hot, "2"],
        &[("PYTHONPERFSUPPORT", "1")],
        "py::spin_hot",
    ));
    // 3.13's -X perf_jit writes a jitdump.
    let py313 = python(13);
    assert_named(named_share(
        &dir,
        &[py313.to_str().unwrap(), "-X", "perf_jit", &hot, "2"],
        &[],
        "py::spin_hot",
    ));
}
