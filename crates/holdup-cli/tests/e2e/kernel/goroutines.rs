//! Goroutines' blocked time (`record --goroutines`): a goroutine parked in
//! the Go scheduler is no OS wait, yet its time shows on a row of its own,
//! named by its start function and classified by its wait reason. The
//! workload (`workloads/runtimes/goroutines.go`) times its own waits; plain
//! and stripped builds both. Needs root and BPF.

use crate::support::runtimes::{n, source};
use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether this machine's Go is one the recorder knows the layout of
/// (1.21 to 1.26); said when it is not.
fn known_go() -> bool {
    let out = Command::new(super::runtimes::go())
        .args(["env", "GOVERSION"])
        .bounded_output();
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let minor = version.strip_prefix("go1.").and_then(|v| {
        v.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse::<u32>()
            .ok()
    });
    let known = matches!(minor, Some(21..=26));
    if !known {
        eprintln!(
            "SKIPPED: goroutines are followed in Go 1.21 to 1.26, this machine has {version:?}"
        );
    }
    known
}

/// The workload built into `dir`, stripped (`-s -w`: no symbol table, no
/// DWARF; the pclntab stays) or not.
fn build(dir: &Path, stripped: bool) -> PathBuf {
    let bin = dir.join("goroutines");
    let mut cmd = Command::new(super::runtimes::go());
    cmd.arg("build");
    if stripped {
        cmd.arg("-ldflags=-s -w");
    }
    let status = cmd
        .arg("-o")
        .arg(&bin)
        .arg(source("goroutines.go"))
        .bounded_status();
    assert!(status.success(), "go build");
    bin
}

/// The row of goroutines started by `function`.
fn row<'a>(r: &'a Value, function: &str) -> &'a Value {
    r["goroutines"]["rows"]
        .as_array()
        .expect("goroutine rows")
        .iter()
        .find(|row| row["function"] == function)
        .unwrap_or_else(|| panic!("no row of {function}: {}", r["goroutines"]))
}

fn reason_samples(row: &Value, reason: &str) -> f64 {
    row["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["name"] == reason)
        .map(|r| n(&r["samples"]))
        .sum()
}

fn waits_are_on_their_goroutines_rows(name: &str, stripped: bool) {
    if !known_go() {
        return;
    }
    let _serial = serial();
    let dir = scratch(name);
    let bin = build(&dir, stripped);
    let (data, stdout) =
        record_with_output(&dir, &["--goroutines"], &[bin.to_str().unwrap(), "1.5"]);
    let r = report(&data);
    let period_s = n(&r["period_ns"]) / 1e9;

    // The contender's own timing of its Lock() is the truth.
    let waited = printed_value(&stdout, "contender_waited_s");
    let c = row(&r, "main.contender");
    let contention = n(&c["samples"]["contention"]) * period_s;
    let mutex = reason_samples(c, "sync.Mutex.Lock") * period_s;
    eprintln!(
        "contender waited {waited:.3} s: {contention:.3} s contention on its row, {mutex:.3} s sync.Mutex.Lock; {}",
        c
    );
    assert!(waited > 1.0, "{stdout}");
    assert!(mutex >= 0.8 * waited, "{mutex} of {waited}");
    assert!(
        contention <= 1.05 * waited + 0.01,
        "{contention} of {waited}"
    );
    // The goroutine that released the mutex readied it: the holder.
    assert_eq!(c["wakers"][0]["name"], "main.holder", "{c}");

    // A channel receive is a signal, not contention.
    let chan = printed_value(&stdout, "chan_waited_s");
    let w = row(&r, "main.chanwaiter");
    let signal = n(&w["samples"]["signal"]) * period_s;
    eprintln!("channel waiter waited {chan:.3} s: {signal:.3} s signal; {w}");
    assert!(signal >= 0.8 * chan, "{signal} of {chan}");
    assert_eq!(n(&w["samples"]["contention"]), 0.0, "{w}");
    assert!(reason_samples(w, "chan receive") > 0.0, "{w}");
}

#[test]
#[ignore = "needs root and BPF"]
fn a_goroutine_waiting_for_a_held_mutex_is_contention_on_its_own_row() {
    waits_are_on_their_goroutines_rows("goroutines_plain", false);
}

#[test]
#[ignore = "needs root and BPF"]
fn a_stripped_go_binary_has_its_goroutines_followed_from_its_pclntab() {
    waits_are_on_their_goroutines_rows("goroutines_stripped", true);
}

#[test]
#[ignore = "needs root and BPF"]
fn goroutines_of_a_program_that_is_not_go_are_said_missing_once() {
    let dir = scratch("goroutines_not_go");
    // A Go program that starts while the recording runs, outside it: the
    // recorder sees every exec on the machine, but must neither probe nor
    // count it. The recorded command runs once the recorder is attached,
    // and says so with a file.
    let ready = dir.join("recording");
    let outsider = known_go().then(|| build(&dir, false)).map(|bin| {
        let ready = ready.clone();
        std::thread::spawn(move || {
            let since = std::time::Instant::now();
            while !ready.exists() && since.elapsed().as_secs() < 60 {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Command::new(bin).arg("0.3").bounded_output()
        })
    });
    let script = format!("touch '{}'; sleep 1.5", ready.display());
    let (data, _) = record_with_output(&dir, &["--goroutines"], &["/bin/sh", "-c", &script]);
    if let Some(outside) = outsider {
        let out = outside.join().unwrap();
        assert!(out.status.success(), "the outside Go program failed");
    }
    let r = report(&data);
    assert!(r.get("goroutines").is_none(), "{r}");
    // The trace says it to every reader, once.
    let out = run_ok(&["report", "-i", data.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = stderr.matches("no Go program was recorded").count();
    assert_eq!(said, 1, "{stderr}");
}
