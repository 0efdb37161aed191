//! `holdup agent`'s settings: bad endpoints, compressions, OTLP environment
//! variables and cgroups are one-line errors before anything is recorded.

use crate::support::*;

#[test]
fn bad_endpoints_and_settings_are_one_line_errors() {
    for (args, env, says) in [
        (
            vec!["--endpoint", "ftp://collector:4318"],
            None,
            "not an http:// URL",
        ),
        (vec!["--endpoint", "http://"], None, "no host"),
        (
            vec!["--compression", "lz4"],
            None,
            "compression 'lz4' is not gzip or none",
        ),
        (
            vec![],
            Some(("OTEL_EXPORTER_OTLP_HEADERS", "api-key")),
            "OTEL_EXPORTER_OTLP_HEADERS: 'api-key' is not KEY=VALUE",
        ),
        (
            vec![],
            Some(("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")),
            "not an http:// URL",
        ),
        (
            vec!["--cgroup", "/nonexistent/cgroup"],
            None,
            "cgroup /nonexistent/cgroup",
        ),
    ] {
        let mut cmd = holdup();
        cmd.arg("agent").args(&args).args(["--duration", "1"]);
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let out = cmd.bounded_output();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
