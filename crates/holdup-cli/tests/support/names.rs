//! Helpers shared by the `names` end-to-end tests with and without root.

use crate::support::*;
use std::path::PathBuf;

/// The workload, built as `name` (tests run in parallel).
pub fn overloads(name: &str) -> PathBuf {
    let out_dir = repo_root().join("target/workloads");
    std::fs::create_dir_all(&out_dir).unwrap();
    let src = repo_root().join("workloads/overloads.cpp");
    cxx(&src, &out_dir.join(name), &["-O2"])
}
