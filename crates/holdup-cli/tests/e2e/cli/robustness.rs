//! Bad input gets one clear line and a non-zero exit, never a panic or a
//! silently empty result; a command that hangs is killed and described.

use crate::support::robustness::*;
use crate::support::*;
use std::process::Command;
use std::time::Duration;

#[test]
fn garbage_and_missing_traces_are_refused() {
    let dir = scratch("garbage");
    let junk = dir.join("junk.data");
    std::fs::write(&junk, b"this is not a trace, just some text\n").unwrap();
    for cmd in ["report", "flame", "script"] {
        let out = holdup_out(&[cmd, "-i", junk.to_str().unwrap()]);
        let err = one_line_error(&out);
        assert!(err.contains("not a holdup trace"), "{err}");
    }
    let empty = dir.join("empty.data");
    std::fs::write(&empty, b"").unwrap();
    assert!(
        one_line_error(&holdup_out(&["report", "-i", empty.to_str().unwrap()]))
            .contains("not a holdup trace")
    );
    // A missing file: the OS error is said once, whichever command reads it.
    let nope = dir.join("nope.data");
    let nope = nope.to_str().unwrap();
    for args in [
        &["report", "-i", nope][..],
        &["flame", "-i", nope],
        &["script", "-i", nope],
        &["waitgraph", "-i", nope],
        &["causal", "report", "-i", nope],
    ] {
        let err = one_line_error(&holdup_out(args));
        assert_eq!(err.matches("No such file").count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn an_unknown_record_option_is_refused_not_run() {
    for args in [
        &["record", "--no-such-option", "--", "true"][..],
        &["record", "-o", "x.data", "--bogus", "true"],
        &["causal", "run", "--bogus", "--", "true"],
    ] {
        let out = holdup_out(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("unexpected argument '--"), "{args:?}: {err}");
        assert!(!err.contains("cannot run"), "{args:?}: {err}");
    }
}

#[test]
fn bad_arguments_are_refused_clearly() {
    let err = one_line_error(&holdup_out(&["record"]));
    assert!(err.contains("nothing to record"), "{err}");
    let err = one_line_error(&holdup_out(&["record", "-p", "1", "--", "true"]));
    assert!(err.contains("not several"), "{err}");
    // A ring the kernel cannot make is refused by the argument parser,
    // before anything is loaded (it once reached libbpf's own messages).
    let out = holdup_out(&["record", "--ring-mb", "4096", "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("'4096' for '--ring-mb"), "{err}");
    assert!(!err.contains("libbpf"), "{err}");
}

#[test]
fn not_root_is_one_clear_line() {
    if !is_root() {
        // Already unprivileged: the plain call must say so.
        let err = one_line_error(&holdup_out(&["record", "--", "true"]));
        assert!(err.contains("needs root"), "{err}");
        return;
    }
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_holdup"))
        .args(["record", "-o", "/tmp/holdup-nobody.data", "--", "true"])
        .bounded_output();
    let err = one_line_error(&out);
    assert!(err.contains("needs root"), "{err}");
}

/// The tests' own guard: a command that hangs (here a shell and the child
/// it waits for) is killed with its children within the limit, and the
/// failure says what each process was doing.
#[test]
fn a_hung_command_is_killed_and_described() {
    let started = std::time::Instant::now();
    let err = output_within(
        Command::new("sh").args(["-c", "sleep 300 & wait"]),
        Duration::from_millis(500),
    )
    .expect_err("the command should have been stopped");
    assert!(started.elapsed() < Duration::from_secs(20), "{err}");
    assert!(err.contains("still ran after 0.5 s"), "{err}");
    for comm in ["process", " sh ", " sleep "] {
        assert!(err.contains(comm), "no {comm:?} in: {err}");
    }
    assert!(err.contains("wchan"), "{err}");
    // With gdb (the test set-up installs it), the user stacks too.
    let gdb = Command::new("gdb").arg("--version").output();
    if gdb.is_ok_and(|o| o.status.success()) {
        assert!(err.contains("#0 "), "no user stack: {err}");
    }
}
