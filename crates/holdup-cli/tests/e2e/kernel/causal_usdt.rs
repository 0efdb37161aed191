//! USDT probes as progress points of `holdup causal run`
//! (`--progress usdt:BINARY:PROVIDER:NAME`): a uprobe on each probe's nop
//! counts exactly its visits, the semaphore of a guarded probe is raised
//! while it is counted, and a probe the binary lacks is refused with the
//! closest ones.

use super::causal_progress::deltas;
use crate::support::*;

#[test]
#[ignore = "needs root and BPF"]
fn a_usdt_point_counts_each_visit_and_raises_its_semaphore() {
    let _serial = serial();
    let dir = scratch("causal_usdt_point");
    let bin = workload("causal_usdt");
    let coz = dir.join("profile.coz");
    let tick = format!("usdt:{}:holdup_test:tick", bin.display());
    let guarded = format!("usdt:{}:holdup_test:guarded", bin.display());
    // Each iteration visits tick once and guarded twice (at two sites),
    // the latter only while its semaphore is raised.
    let out = holdup()
        .args(["causal", "run", "--experiment-ms", "50", "-o"])
        .arg(&coz)
        .args(["--progress", &tick, "--progress", &guarded, "--"])
        .arg(&bin)
        .args(["3000", "0.2"])
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("progress point {tick}: a visit costs ~"))
            && err.contains("a uprobe's trap on a USDT probe's nop"),
        "{err}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("guarded visits: 12000 of 6000 iterations"),
        "the semaphore was not raised all along: {stdout}"
    );
    let sums = deltas(&coz);
    let iterations = sums["iteration"];
    assert!(iterations >= 1000, "{sums:?}");
    // Counters are read a moment apart at each experiment's ends.
    for (point, per_iteration) in [(&tick, 1.0), (&guarded, 2.0)] {
        assert_near(
            &format!("{point} visits per iteration"),
            sums[point.as_str()] as f64 / iterations as f64,
            per_iteration,
            0.03,
        );
    }
}

#[test]
#[ignore = "needs root and BPF"]
fn a_usdt_probe_the_binary_lacks_is_refused_with_the_closest() {
    let bin = workload("causal_usdt");
    let out = holdup()
        .args(["causal", "run", "-o", "/dev/null", "--progress"])
        .arg(format!("usdt:{}:holdup_test:tock", bin.display()))
        .arg("--")
        .arg(&bin)
        .arg("10")
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("no USDT probe holdup_test:tock in")
            && err.contains("closest: ")
            && err.contains("holdup_test:tick"),
        "{err}"
    );
    // A binary with no probes at all, and a spec without its binary.
    let plain = workload("causal_barrier");
    for (spec, said) in [
        (
            format!("usdt:{}:holdup_test:tick", plain.display()),
            "has no USDT probes",
        ),
        (
            "usdt:holdup_test:tick".to_string(),
            "usdt:BINARY:PROVIDER:NAME",
        ),
    ] {
        let out = holdup()
            .args([
                "causal",
                "run",
                "-o",
                "/dev/null",
                "--progress",
                &spec,
                "--",
            ])
            .arg(&bin)
            .arg("10")
            .bounded_output();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(said), "{spec}: {err}");
        assert_eq!(
            err.lines().filter(|l| l.contains("rror")).count(),
            1,
            "{err}"
        );
    }
}
