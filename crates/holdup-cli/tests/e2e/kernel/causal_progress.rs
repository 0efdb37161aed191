//! Progress points of `holdup causal run` counted outside the program: a
//! system call counted in BPF (no trap) counts exactly the program's calls;
//! a point nobody visits ends the run in two seconds with the closest
//! names; a uprobe point whose traps cost the program much is warned about,
//! with a caller visited less often to count instead.

use crate::support::*;
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

/// The sum of each progress point's deltas over the experiments of a
/// COZ profile, by point name.
pub(crate) fn deltas(coz: &Path) -> HashMap<String, u64> {
    let mut sums = HashMap::new();
    for record in std::fs::read_to_string(coz).unwrap().lines() {
        let fields: HashMap<&str, &str> = record
            .split('\t')
            .filter_map(|f| f.split_once('='))
            .collect();
        if let (Some(name), Some(delta)) = (fields.get("name"), fields.get("delta")) {
            *sums.entry(name.to_string()).or_insert(0) += delta.parse::<u64>().unwrap();
        }
    }
    sums
}

#[test]
#[ignore = "needs root and BPF"]
fn a_system_call_point_counts_the_programs_calls_only() {
    let _serial = serial();
    let dir = scratch("causal_syscall_point");
    let bin = workload("causal_fsync");
    let coz = dir.join("profile.coz");
    // One pwrite64 per iteration of each worker (SYNCS=1), and one
    // COZ_PROGRESS "iteration": the two points must agree, whatever the
    // rest of the machine writes meanwhile.
    let out = holdup()
        .args(["causal", "run", "--experiment-ms", "50", "-o"])
        .arg(&coz)
        .args(["--progress", "syscall:pwrite64", "--"])
        .arg(&bin)
        .args([dir.to_str().unwrap(), "600", "1", "1"])
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("progress point syscall:pwrite64: a visit costs ~")
            && err.contains("counted in BPF"),
        "{err}"
    );
    let sums = deltas(&coz);
    let (calls, iterations) = (sums["syscall:pwrite64"], sums["iteration"]);
    assert!(iterations >= 100, "{sums:?}");
    // Counters are read a moment apart at each experiment's ends.
    assert_near(
        "pwrite64 calls per iteration",
        calls as f64 / iterations as f64,
        1.0,
        0.03,
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn a_point_nobody_visits_ends_the_run_at_two_seconds() {
    let _serial = serial();
    let dir = scratch("causal_unvisited_point");
    let bin = workload_with("causal_barrier", &["-DNO_PROGRESS"]);
    let coz = dir.join("profile.coz");
    let t0 = Instant::now();
    // Some 30 s of rounds, none of which writes.
    let out = holdup()
        .args(["causal", "run", "-o"])
        .arg(&coz)
        .args(["--progress", "syscall:pwrite64", "--"])
        .arg(&bin)
        .args(["3000", "8", "5"])
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let error: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(error.len(), 1, "{err}");
    assert!(
        error[0].contains("syscall:pwrite64: no visits in the first 2 s")
            && error[0].contains("closest: ")
            && error[0].contains("pwritev"),
        "{err}"
    );
    assert!(t0.elapsed().as_secs() < 15, "took {:?}", t0.elapsed());
    // The profile written so far is kept.
    assert!(coz.exists());
}

#[test]
#[ignore = "needs root and BPF"]
fn a_uprobe_point_that_costs_the_program_much_is_warned_about() {
    let _serial = serial();
    let dir = scratch("causal_costly_point");
    let bin = workload_with("causal_barrier", &["-DNO_PROGRESS"]);
    // Rounds of 30 µs; round_start is a bare `ret`, single-stepped: its
    // visits cost the program more than its work. The run outlasts the
    // check made two seconds in, on a quiet machine too.
    let out = holdup()
        .args(["causal", "run", "-o"])
        .arg(dir.join("profile.coz"))
        .args(["--progress", "round_start", "--"])
        .arg(&bin)
        .args(["100000", "0.02", "0.01"])
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("progress point round_start: a visit costs ~") && err.contains("single-step"),
        "{err}"
    );
    assert!(
        err.contains("warning: progress point round_start:")
            && err.contains("of the program's CPU time"),
        "{err}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn a_costly_point_is_warned_about_with_a_rarer_caller() {
    let _serial = serial();
    let dir = scratch("causal_rarer_caller");
    let bin = workload("causal_callers");
    // visit() is called once per 2 µs of work, from inner(), which
    // outer() calls a thousand times: a trap per visit costs the program
    // far above the 5% that is warned about (a trap is ~0.5 µs where the
    // kernel emulates the probed instruction, more where it single-steps
    // it), a trap per visit of outer() next to nothing.
    let out = holdup()
        .args(["causal", "run", "-o"])
        .arg(dir.join("profile.coz"))
        .args(["--progress", "visit", "--"])
        .arg(&bin)
        .args(["5", "2"])
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let warning = err
        .lines()
        .find(|l| l.contains("warning: progress point visit:"))
        .unwrap_or_else(|| panic!("no warning: {err}"));
    assert!(
        warning.contains("its caller outer (") && warning.contains("--progress outer,"),
        "{warning}"
    );
}
