//! `holdup causal` without root: the report of a hand-made profile against
//! its golden files, and `causal -a`'s bad input. The accuracy tests are in
//! `kernel/causal.rs`.

use crate::support::causal::*;
use crate::support::*;

/// `-p` and `-a` refuse what they cannot profile in one line each.
#[test]
fn attach_bad_input_is_one_clear_line() {
    let _turn = turn();
    for (args, says) in [
        (
            vec!["-p", "999999999", "--progress", "main"],
            "no process with pid 999999999",
        ),
        (vec!["-p", "12x"], "-p takes process ids"),
        (vec!["-a", "--duration", "1"], "need a progress point"),
    ] {
        let out = holdup()
            .args(["causal", "run", "-o", "/dev/null"])
            .args(&args)
            .bounded_output();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert!(
            lines.len() == 1 && lines[0].contains(says),
            "{args:?}: {err}"
        );
    }
}

/// `causal report` on a small profile made by construction (line a.c:10
/// critical: 0.6 × its speedup; b.c:20 with slack; too few experiments
/// on subclass:io), text and JSON pinned by golden files.
#[test]
fn report_matches_the_golden_files() {
    let golden = repo_root().join("crates/holdup-cli/tests/causal_golden");
    let coz = golden.join("small.coz");
    let coz = coz.to_str().unwrap();
    let text = run_ok(&["causal", "report", "-i", coz]);
    assert_golden(&golden, "small.txt", &String::from_utf8_lossy(&text.stdout));
    let js = run_ok(&["causal", "report", "--json", "-i", coz]);
    assert_golden(&golden, "small.json", &String::from_utf8_lossy(&js.stdout));
    let report = json(&["causal", "report", "--json", "-i", coz]);
    assert_near(
        "a.c:10 at 50%",
        predict(target(&report, "a.c:10"), 0.5),
        0.30,
        0.005,
    );
    assert_near(
        "b.c:20 at 50%",
        predict(target(&report, "b.c:20"), 0.5),
        0.0,
        0.005,
    );
}
