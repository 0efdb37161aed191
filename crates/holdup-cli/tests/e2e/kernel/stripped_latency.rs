//! `holdup latency --func` on a stripped binary: the function is named
//! only by its debug file, found by build-id in the recorder's cache (where
//! a debuginfod server's answer is kept), and the uprobes go to the offset
//! that file gives, since the kernel cannot look a name up there.

use crate::support::debug_split::{build_id, private_cache, split};
use crate::support::*;

#[test]
#[ignore = "needs root and BPF"]
fn a_function_of_a_stripped_binary_is_timed_through_its_debug_file() {
    use std::os::unix::fs::PermissionsExt;
    let _serial = serial();
    let dir = scratch("stripped_latency");
    let bin = split(&workload("stripped_work"), &dir);
    let cache = private_cache(&dir);
    let fetched = cache.join("holdup/debuginfod");
    std::fs::create_dir_all(&fetched).unwrap();
    std::fs::set_permissions(cache.join("holdup"), PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::copy(
        dir.join("served/work.debug"),
        fetched.join(format!("{}.debug", build_id(&bin))),
    )
    .unwrap();

    // The workload naps NAPS times, 1.5 ms each.
    const NAPS: u64 = 200;
    let data = dir.join("naps.latency");
    let out = holdup()
        .args([
            "latency",
            "-o",
            data.to_str().unwrap(),
            "--func",
            "nap",
            "--",
        ])
        .arg(&bin)
        .args(["0.05", &NAPS.to_string()])
        .env("XDG_CACHE_HOME", &cache)
        .env_remove("DEBUGINFOD_URLS")
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let printed = printed_value(&String::from_utf8_lossy(&out.stdout), "naps");
    assert_eq!(printed, NAPS as f64);

    let r = json(&["latency", "report", "--json", "-i", data.to_str().unwrap()]);
    let op = r["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == "func:nap")
        .unwrap_or_else(|| panic!("no func:nap in {r}"));
    assert_eq!(op["count"].as_u64(), Some(NAPS), "{op}");
    // A nap sleeps 1.5 ms: the bucket of 1.05..2.1 ms, but for the calls a
    // busy machine wakes late.
    let calls_from = |from: fn(u64) -> bool| -> u64 {
        op["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| from(b["lo_ns"].as_u64().unwrap()))
            .map(|b| b["count"].as_u64().unwrap())
            .sum()
    };
    let in_bucket = calls_from(|lo| lo == 1 << 20);
    let late = calls_from(|lo| lo > 1 << 20);
    eprintln!("func:nap: {in_bucket} of {NAPS} calls in 1.05..2.1 ms, {late} later");
    assert!(in_bucket as f64 >= 0.8 * NAPS as f64, "{op}");
    assert_eq!(
        in_bucket + late,
        NAPS,
        "no call shorter than its sleep: {op}"
    );
}
