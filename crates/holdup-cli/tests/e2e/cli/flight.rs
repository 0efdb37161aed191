//! `record --flight --trigger-latency`: specs that name no system call or
//! no function are one-line errors before anything is recorded.

use crate::support::*;

#[test]
fn bad_trigger_specs_are_one_line_errors() {
    let bin = workload("flight_stall");
    let bin = bin.to_str().unwrap();
    let no_function = format!("{bin}:no_such_function:40");
    let no_binary = "/nonexistent/app:handle_request:40".to_string();
    for (spec, command, says) in [
        ("read", true, "wants SYSCALL:MS"),
        ("read:soon", true, "wants SYSCALL:MS"),
        ("read:-3", true, "wants SYSCALL:MS"),
        (":40", true, "wants SYSCALL:MS"),
        (
            "no_such_call:40",
            true,
            "no system call named 'no_such_call'",
        ),
        (&no_function, true, "no_such_function"),
        (&no_binary, true, "no such file /nonexistent/app"),
        ("func:handle_request:40", false, "needs a command or -p PID"),
    ] {
        let mut cmd = holdup();
        cmd.args(["record", "--flight", "5", "--trigger-latency", spec])
            .args(["-o", "/dev/null"]);
        if command {
            cmd.args(["--", bin, "1"]);
        } else {
            cmd.args(["-a", "--duration", "1"]);
        }
        let out = cmd.bounded_output();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{spec}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{spec}: {stderr}");
        assert!(stderr.contains(says), "{spec}: {stderr}");
    }
}
