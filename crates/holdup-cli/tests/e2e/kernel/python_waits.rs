//! What CPython threads wait for, from their Python frames: a thread
//! taking a `threading.Lock` another thread keeps waits in contention,
//! held by that thread; the main thread in `join()` waits for a signal;
//! two threads spinning in pure Python wait for the GIL, a lock of its own
//! kind, as long as they measure themselves. One recording of
//! `workloads/runtimes/py_waits.py` per interpreter version (pyenv's; an
//! absent version says so and passes). Needs root and BPF.

use super::python::{record_python, thread};
use crate::support::*;
use serde_json::Value;

/// Share of `part` in `whole` (0 when `whole` is).
fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part / whole
    } else {
        0.0
    }
}

fn count(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or(0.0)
}

/// The contender's lock time is ≥ 90% contention, and its mutex sites are
/// ≥ 90% held by the holder.
fn contention_held_by_the_holder(r: &Value, stdout: &str, version: &str) {
    let contender = thread(r, printed_value(stdout, "contender_tid"));
    let holder = printed_value(stdout, "holder_tid");
    let lock = count(&contender["samples"], "lock");
    let mutex = count(&contender["lock_split"], "mutex");
    eprintln!(
        "{version}: contender lock {lock}, contention {mutex} ({:.1}%), split {}",
        100.0 * share(mutex, lock),
        contender["lock_split"]
    );
    // The lock is held 200 ms of every 205 for 1.5 s.
    assert!(lock >= 1000.0, "{}", contender["samples"]);
    assert!(mutex >= 0.9 * lock, "{}", contender["lock_split"]);
    held_by(contender, "mutex", &[holder], version);
}

/// The sites of thread `t` waiting for a lock of `kind` are ≥ 90% held by
/// the threads `holders`, of the waits that had a waker (a wait still on
/// when the thread or the recording ended has none); returns their samples.
fn held_by(t: &Value, kind: &str, holders: &[f64], version: &str) -> f64 {
    let sites: Vec<&Value> = t["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["lock_kind"] == kind)
        .collect();
    let wakers: Vec<(&str, f64)> = sites
        .iter()
        .flat_map(|s| s["wakers"].as_array().unwrap())
        .map(|w| (w["name"].as_str().unwrap(), count(w, "samples")))
        .collect();
    let woken: f64 = wakers.iter().map(|w| w.1).sum();
    let by_holder: f64 = wakers
        .iter()
        .filter(|(name, _)| holders.iter().any(|h| name.ends_with(&format!(":{h}"))))
        .map(|w| w.1)
        .sum();
    let site_samples: f64 = sites.iter().map(|s| count(s, "samples")).sum();
    eprintln!(
        "{version}: {kind} of {} ({site_samples} samples) held by {holders:?}: {by_holder} of {woken} woken ({:.1}%); {wakers:?}",
        t["tid"],
        100.0 * share(by_holder, woken)
    );
    assert!(woken >= 0.9 * site_samples, "{wakers:?} of {site_samples}");
    assert!(by_holder >= 0.9 * woken, "{wakers:?}");
    site_samples
}

/// The main thread, in `join()` all along, waits ≥ 90% for a signal.
fn join_is_a_signal(r: &Value, stdout: &str, version: &str) {
    let main = thread(r, printed_value(stdout, "main_tid"));
    let lock = count(&main["samples"], "lock");
    let split = &main["lock_split"];
    let signal = count(split, "signal") + count(split, "idle");
    eprintln!(
        "{version}: main lock {lock}, signal {signal} ({:.1}%), split {split}",
        100.0 * share(signal, lock)
    );
    assert!(lock >= 2000.0, "{}", main["samples"]);
    assert!(signal >= 0.9 * lock, "{split}");
}

/// Each spinner's GIL share is within 5 points of what it measured, and
/// the GIL was held by the other spinner (or, while it started them, the
/// main thread): the timed waits the interval's timer ended too.
fn gil_share_as_measured(r: &Value, stdout: &str, version: &str) {
    let main = printed_value(stdout, "main_tid");
    for (name, other) in [("spin_a", "spin_b"), ("spin_b", "spin_a")] {
        let t = thread(r, printed_value(stdout, &format!("{name}_tid")));
        let other = printed_value(stdout, &format!("{other}_tid"));
        let measured = printed_value(stdout, &format!("{name}_gil_share"));
        let gil = count(&t["lock_split"], "gil");
        let reported = t["gil_share"].as_f64().unwrap_or(0.0);
        eprintln!(
            "{version}: {name} GIL share {reported:.3} ({gil} samples), measured {measured:.3}; {}",
            t["samples"]
        );
        assert!(
            (reported - measured).abs() <= 0.05,
            "{name}: reported {reported:.3}, measured {measured:.3}"
        );
        let gil_sites = held_by(t, "gil", &[other, main], version);
        assert_eq!(gil_sites, gil, "the GIL's sites add up to its share");
    }
}

fn waits_of(version: &str) {
    let _serial = serial();
    let name = format!("python_waits_{version}");
    let Some((data, stdout)) = record_python(version, &name, "py_waits.py", &["1.5"]) else {
        return;
    };
    let r = report(&data);
    contention_held_by_the_holder(&r, &stdout, version);
    join_is_a_signal(&r, &stdout, version);
    gil_share_as_measured(&r, &stdout, version);
}

#[test]
#[ignore = "needs root and BPF"]
fn python_3_11_waits() {
    waits_of("3.11.7");
}

#[test]
#[ignore = "needs root and BPF"]
fn python_3_12_waits() {
    waits_of("3.12.1");
}

#[test]
#[ignore = "needs root and BPF"]
fn python_3_13_waits() {
    waits_of("3.13.0");
}
