//! `holdup record --syscalls` and `holdup syscalls` on workloads whose answer
//! is known by construction or measured by the workload itself, recorded on
//! the real kernel.

use crate::support::*;
use serde_json::Value;
use std::path::Path;

pub(crate) fn syscalls_json(data: &Path) -> Value {
    json(&[
        "syscalls",
        "--json",
        "--slowest",
        "1000000",
        "-i",
        data.to_str().unwrap(),
    ])
}

/// The process that ran `comm`.
fn process<'a>(r: &'a Value, comm: &str) -> &'a Value {
    r["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["comm"] == comm)
        .unwrap_or_else(|| panic!("no process {comm} in {r:#}"))
}

fn call<'a>(p: &'a Value, name: &str) -> &'a Value {
    p["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no call {name} in {p:#}"))
}

/// The kept invocations of one call made from a site starting with `site`.
fn invocations<'a>(r: &'a Value, name: &str, site: &str) -> Vec<&'a Value> {
    r["slowest"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["name"] == name && i["site"].as_str().is_some_and(|s| s.starts_with(site)))
        .collect()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
#[ignore = "needs root and BPF"]
fn cold_opens_block_on_io_warm_ones_do_not_and_counts_are_exact() {
    let _g = serial();
    let dir = scratch("syscalls_open");
    let files = dir.join("files");
    let bin = workload("sys_open");
    // Every invocation kept: per-site counts are exact too.
    let (data, out) = record_with_output(
        &dir,
        &["--syscalls", "--syscall-sample", "1"],
        &[
            bin.to_str().unwrap(),
            files.to_str().unwrap(),
            "200",
            "10000",
        ],
    );
    let n = printed_value(&out, "cold_opens") as u64;
    assert_eq!(n, 200);
    assert_eq!(printed_value(&out, "warm_opens") as u64, 200);
    let r = syscalls_json(&data);
    assert_eq!(r["schema"], "holdup.syscalls/1");
    let p = process(&r, "sys_open");
    // Exact, from the in-kernel totals.
    assert_eq!(u(&call(p, "getppid")["count"]), 10000);
    let open = call(p, "openat");
    let sites = open["sites"].as_array().unwrap();
    let site_count = |prefix: &str| -> u64 {
        sites
            .iter()
            .filter(|s| s["site"].as_str().unwrap().starts_with(prefix))
            .map(|s| u(&s["count"]))
            .sum()
    };
    assert_eq!(site_count("cold_open (sys_open.c:"), n);
    assert_eq!(site_count("warm_open (sys_open.c:"), n);

    let cold = invocations(&r, "openat", "cold_open (sys_open.c:");
    let warm = invocations(&r, "openat", "warm_open (sys_open.c:");
    assert_eq!((cold.len() as u64, warm.len() as u64), (n, n));
    let on_io: Vec<&&Value> = cold
        .iter()
        .filter(|i| u(&i["blocked_ns"]["io"]) > 0)
        .collect();
    assert!(!on_io.is_empty(), "no cold open waited for the disk");
    for i in &on_io {
        let reason = i["reason"]
            .as_str()
            .expect("a blocked open has a wait reason");
        assert!(!reason.starts_with("0x"), "unsymbolized reason {reason}");
    }
    assert!(
        warm.iter().all(|i| u(&i["blocked_ns"]["io"]) == 0),
        "a warm open waited for the disk"
    );
    // The call's I/O time by reason adds up to the io time of its invocations.
    let io_total: u64 = open["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| u(&x["blocked_ns"]))
        .sum();
    let io_of_invocations: u64 = invocations(&r, "openat", "")
        .iter()
        .map(|i| {
            u(&i["blocked_ns"]["io"]) + u(&i["blocked_ns"]["lock"]) + u(&i["blocked_ns"]["other"])
        })
        .sum();
    assert_eq!(io_total, io_of_invocations);
    assert!(
        u(&open["blocked_ns"]["io"])
            >= on_io.iter().map(|i| u(&i["blocked_ns"]["io"])).sum::<u64>()
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn major_faults_count_in_the_read_that_took_them_and_nowhere_else() {
    let _g = serial();
    let dir = scratch("syscalls_mmapread");
    let bin = workload("sys_mmapread");
    let (data, out) = record_with_output(
        &dir,
        &["--syscalls"],
        &[bin.to_str().unwrap(), dir.to_str().unwrap(), "256"],
    );
    let read_major = printed_value(&out, "read_major") as u64;
    let touch_major = printed_value(&out, "touch_major") as u64;
    assert!(
        read_major >= 200,
        "the workload faulted only {read_major} pages in"
    );
    assert!(touch_major >= 200);
    let r = syscalls_json(&data);
    let p = process(&r, "sys_mmapread");
    let pread = call(p, "pread64");
    assert_eq!(u(&pread["page_faults"]["major"]), read_major);
    let kept = invocations(&r, "pread64", "read_into_mapping (sys_mmapread.c:");
    assert_eq!(kept.len(), 1);
    assert_eq!(u(&kept[0]["page_faults"]["major"]), read_major);
    // The faults of the program's own accesses belong to no system call.
    let all: u64 = p["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| u(&c["page_faults"]["major"]))
        .sum();
    assert_eq!(all, read_major);
}

#[test]
#[ignore = "needs root and BPF"]
fn readers_of_one_pipe_sleep_in_pipe_read_and_are_woken_by_the_writer() {
    let _g = serial();
    let dir = scratch("syscalls_pipe");
    let bin = workload("sys_pipe");
    let (data, out) = record_with_output(
        &dir,
        &["--syscalls"],
        &[bin.to_str().unwrap(), "2", "200", "2000"],
    );
    let wall = printed_value(&out, "read_wall_ns");
    let r = syscalls_json(&data);
    let p = process(&r, "writer");
    let read = call(p, "read");
    // The readers' reads, as they timed them, plus a few of the loader's.
    assert_near(
        "read total (ms)",
        u(&read["total_ns"]) as f64 / 1e6,
        wall / 1e6,
        wall / 1e6 * 0.05 + 1.0,
    );
    let other = u(&read["blocked_ns"]["other"]) as f64;
    assert!(other > 0.8 * wall, "readers slept {other} of {wall} ns");
    let reasons = read["reasons"].as_array().unwrap();
    // `pipe_read`, `anon_pipe_read` from Linux 6.16.
    let reason = reasons[0]["reason"].as_str().unwrap();
    assert!(reason.ends_with("pipe_read"), "{reasons:#?}");
    let slept = invocations(&r, "read", "read_one (sys_pipe.c:");
    assert!(slept.len() >= 150, "{} reads kept", slept.len());
    let by_writer = slept
        .iter()
        .filter(|i| {
            i["waker"]
                .as_str()
                .is_some_and(|w| w.starts_with("writer:"))
        })
        .count();
    assert!(
        by_writer * 10 >= slept.len() * 9,
        "{by_writer} of {} woken by the writer",
        slept.len()
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn no_completed_call_is_lost_when_processes_fork_exit_and_exec() {
    let _g = serial();
    let dir = scratch("syscalls_forkexec");
    let bin = workload("sys_forkexec");
    let (data, out) =
        record_with_output(&dir, &["--syscalls"], &[bin.to_str().unwrap(), "3", "1000"]);
    let mut want: Vec<u64> = out
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(k, _)| k.ends_with("_getppid"))
        .map(|(_, v)| v.parse().unwrap())
        .collect();
    assert_eq!(want.len(), 4, "{out}");
    let r = syscalls_json(&data);
    let mut got: Vec<u64> = r["processes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["calls"].as_array().unwrap())
        .filter(|c| c["name"] == "getppid")
        .map(|c| u(&c["count"]))
        .collect();
    want.sort();
    got.sort();
    // Each child's calls under its own pid; the exec'd program's under the
    // parent's.
    assert_eq!(got, want);
}

#[test]
#[ignore = "needs root and BPF"]
fn in_band_results_are_the_reports_for_the_same_calls() {
    let _g = serial();
    let dir = scratch("syscalls_inband");
    let bin = workload("sys_inband");
    let (data, out) = record_with_output(
        &dir,
        &["--syscalls", "--inband"],
        &[bin.to_str().unwrap(), dir.to_str().unwrap(), "256"],
    );
    let inband: Vec<(u64, u64, u64)> = out
        .lines()
        .filter_map(|l| l.strip_prefix("inband "))
        .map(|l| {
            let v: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
            (v[0], v[1], v[2])
        })
        .collect();
    assert_eq!(inband.len() as f64, printed_value(&out, "inband_reads"));
    assert_eq!(inband.len(), 16, "{out}");
    let r = syscalls_json(&data);
    let reported: Vec<(u64, u64, u64)> = invocations(&r, "pread64", "read_chunk (sys_inband.c:")
        .iter()
        .map(|i| {
            (
                u(&i["wall_ns"]),
                u(&i["blocked_ns"]["io"]),
                u(&i["page_faults"]["major"]),
            )
        })
        .collect();
    // Every read faulted, so every one is in the report: the same numbers.
    for x in &inband {
        assert!(x.2 > 0, "a read without major faults: {x:?}");
        assert!(reported.contains(x), "{x:?} not among {reported:?}");
    }
}
