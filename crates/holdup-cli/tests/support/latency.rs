//! Helpers shared by the `latency` end-to-end tests with and without root.

use crate::support::*;

/// One line on stderr, a non-zero exit, no panic.
#[track_caller]
pub fn assert_one_line_error(args: &[&str], says: &str) {
    let out = holdup().args(args).bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("holdup: error"))
        .collect();
    assert_eq!(lines.len(), 1, "{args:?}: {err}");
    assert!(lines[0].contains(says), "{args:?}: {err}");
}
