//! Helpers shared by the `robustness` end-to-end tests with and without root.

use crate::support::*;
use std::process::Output;

/// stderr as text; asserts the failure is one line, says `holdup: error:`
/// and is not a panic.
#[track_caller]
pub fn one_line_error(out: &Output) -> String {
    assert!(!out.status.success(), "should fail: {out:?}");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "panic: {err}");
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("holdup: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "one error line expected: {err}");
    err
}

pub fn holdup_out(args: &[&str]) -> Output {
    holdup().args(args).bounded_output()
}
