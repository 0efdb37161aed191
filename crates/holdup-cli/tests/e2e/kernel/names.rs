//! Functions named as people type them: `ns::Cls::work` for the C++
//! overloads `ns::Cls::work(int)` and `ns::Cls::work(double) const`,
//! `ns::twice` for the template's instantiations, on a program whose calls
//! are known by construction (`workloads/overloads.cpp`: CALLS calls of
//! `work(int)` and of each `twice`, none of `work(double)`).

use crate::support::names::*;
use crate::support::*;
use std::path::Path;

/// The calls of each operation of a `holdup latency` file.
fn counts(data: &Path) -> Vec<(String, u64)> {
    let r = json(&["latency", "report", "--json", "-i", data.to_str().unwrap()]);
    r["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["op"].as_str().unwrap().to_string(),
                o["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
#[ignore = "needs root and BPF"]
fn latency_times_every_overload_of_a_demangled_name() {
    let _serial = serial();
    let dir = scratch("names_overloads");
    let bin = overloads("overloads");
    let data = dir.join("lat.data");
    let out = run_ok(&[
        "latency",
        "-o",
        data.to_str().unwrap(),
        "--func",
        "ns::Cls::work",
        "--func",
        &format!("{}:ns::twice", bin.display()),
        "--",
        bin.to_str().unwrap(),
        "3000",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--func ns::Cls::work: 2 functions answer to it (overloads or instantiations), each timed: ns::Cls::work(int); ns::Cls::work(double) const"),
        "{err}"
    );
    assert!(
        err.contains(":ns::twice: 2 functions answer to it"),
        "{err}"
    );
    // The overload never called has no operation, and is no error: its
    // sibling was called.
    let mut got = counts(&data);
    got.sort();
    let want = [
        ("func:_ZN2ns3Cls4workEi", 3000),
        ("func:_ZN2ns5twiceIiEET_S1_", 3000),
        ("func:_ZN2ns5twiceIlEET_S1_", 3000),
    ]
    .map(|(o, n)| (o.to_string(), n));
    assert_eq!(got, want);
    // A miss fails at once and names the closest functions.
    let out = holdup()
        .args([
            "latency",
            "-o",
            data.to_str().unwrap(),
            "--func",
            "ns::Cls::wrok",
            "--",
        ])
        .arg(&bin)
        .arg("10")
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("closest: ns::Cls::work"), "{err}");
}
