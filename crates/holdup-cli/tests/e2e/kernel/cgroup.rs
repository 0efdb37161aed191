//! `record --cgroup`: only the tasks of one cgroup (v2) and those below it
//! are recorded, decided by the programs; a cgroup that does not exist or
//! goes away is said in one line (a path that does not exist: cli/cgroup.rs).

use crate::support::cgroups::{cgroup2_mount, Cgroups};
use crate::support::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A fresh cgroup `name/child` under the v2 root, removed on drop (its
/// processes must be gone by then).
struct TestCgroup {
    top: PathBuf,
    child: PathBuf,
    _dirs: Cgroups,
}

impl TestCgroup {
    fn new(name: &str) -> Self {
        let top = cgroup2_mount().join(format!("{name}-{}", std::process::id()));
        let child = top.join("child");
        let _dirs = Cgroups::make(vec![top.clone(), child.clone()]);
        Self { top, child, _dirs }
    }
}

/// `bin ARGS` started inside cgroup `dir` (moved there before it execs).
fn spawn_in(dir: &Path, bin: &Path, args: &str) -> Child {
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec {} {args}",
        dir.display(),
        bin.display()
    );
    Command::new("sh").args(["-c", &script]).spawn().unwrap()
}

#[test]
#[ignore = "needs root and BPF"]
fn only_the_cgroups_tasks_are_recorded() {
    let _serial = serial();
    let dir = scratch("cgroup-only");
    let cg = TestCgroup::new("holdup-e2e-cg");
    let bin = workload("half_sleeper");
    // 80 rounds of 10 ms on-CPU + 10 ms asleep: 1.6 s each.
    let mut inside = spawn_in(&cg.child, &bin, "80");
    let mut outside = Command::new(&bin).arg("80").spawn().unwrap();
    let data = dir.join("holdup.data");
    // The parent cgroup is named: its child's tasks are below it.
    let top = format!("/{}", cg.top.file_name().unwrap().to_str().unwrap());
    run_ok(&[
        "record",
        "--cgroup",
        &top,
        "--duration",
        "1",
        "-o",
        data.to_str().unwrap(),
    ]);
    inside.wait().unwrap();
    outside.wait().unwrap();
    let r = report(&data);
    let total = |t: &serde_json::Value| -> f64 {
        ["cpu", "io", "lock", "sched", "other"]
            .iter()
            .map(|c| t["samples"][c].as_f64().unwrap())
            .sum()
    };
    let pids: Vec<u64> = threads(&r)
        .iter()
        .filter(|t| total(t) > 0.0)
        .map(|t| t["pid"].as_u64().unwrap())
        .collect();
    assert!(!pids.is_empty(), "the cgroup's process was recorded");
    assert!(
        pids.iter().all(|&p| p == inside.id() as u64),
        "only the process in the cgroup ({}) has samples, not {} (outside): {pids:?}",
        inside.id(),
        outside.id()
    );
    // Its worker's whole second is there, on-CPU and blocked (how it
    // splits depends on the load beside it).
    let worker = threads(&r)
        .iter()
        .find(|t| t["samples"]["cpu"].as_f64().unwrap() > 0.0)
        .expect("the worker thread");
    assert_near("worker's samples (ms)", total(worker), 1000.0, 200.0);
}

#[test]
#[ignore = "needs root and BPF"]
fn a_removed_cgroup_ends_the_recording_in_one_line() {
    let dir = scratch("cgroup-gone");
    let cg = TestCgroup::new("holdup-e2e-gone");
    let data = dir.join("holdup.data");
    let rec = holdup()
        .args(["record", "--cgroup"])
        .arg(&cg.child)
        .args(["--duration", "30", "-o", data.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the recorder is up, a process runs there for 0.6 s; once it is
    // gone the cgroup can go.
    std::thread::sleep(Duration::from_millis(2000));
    let mut tenant = spawn_in(&cg.child, &workload("half_sleeper"), "30");
    tenant.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::remove_dir(&cg.child).unwrap();
    let out = rec.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "record failed: {err}");
    assert_eq!(
        err.lines().filter(|l| l.contains("was removed")).count(),
        1,
        "one line says the cgroup went away: {err}"
    );
    // The trace is complete: every verb reads it.
    run_ok(&["report", "-i", data.to_str().unwrap()]);
}
