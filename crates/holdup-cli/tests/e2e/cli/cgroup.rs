//! `record --cgroup` with a cgroup that does not exist: one line, before
//! anything is recorded.

use crate::support::*;

#[test]
fn a_cgroup_that_does_not_exist_is_one_line() {
    let out = holdup()
        .args([
            "record",
            "--cgroup",
            "/no/such/holdup-cgroup",
            "-o",
            "/dev/null",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no cgroup /no/such/holdup-cgroup"), "{err}");
}
