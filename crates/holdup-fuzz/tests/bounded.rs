//! A bounded fuzz run of every target (part of the test suite), and the
//! inputs past runs found (`tests/crashers/TARGET/`), replayed. One test
//! function for the run: the allocation cap counts the whole process.

use holdup_fuzz::{check, fuzz, Config, TARGETS};
use std::path::Path;
use std::time::Duration;

#[test]
fn no_input_panics_hangs_or_allocates_without_bound() {
    // HOLDUP_FUZZ_SECONDS in all, shared by the targets.
    let secs: u64 = std::env::var("HOLDUP_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let each = Duration::from_secs(secs).div_f64(TARGETS.len() as f64);
    let crash_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-crashes");
    let mut failed = Vec::new();
    for target in TARGETS {
        let s = fuzz(&Config {
            max_inputs: u64::MAX,
            max_time: Some(each),
            seed: 0x5eed,
            crash_dir: Some(crash_dir.clone()),
            ..Config::new(target)
        });
        eprintln!(
            "fuzz {}: {} inputs in {:.1} s, {} parsed, peak live memory {} KiB",
            target.name,
            s.inputs,
            s.elapsed.as_secs_f64(),
            s.parsed,
            s.peak_live_bytes >> 10
        );
        assert!(
            s.inputs >= 100,
            "{}: too few inputs: {}",
            target.name,
            s.inputs
        );
        assert!(
            s.parsed * 5 >= s.inputs,
            "{}: the mutator rarely makes an input the parser accepts ({} of {})",
            target.name,
            s.parsed,
            s.inputs
        );
        for c in &s.crashes {
            eprintln!(
                "fuzz {}: input {} ({} B, kept in {}) panics at {}: {}",
                target.name,
                c.index,
                c.input.len(),
                crash_dir.display(),
                c.location,
                c.message
            );
        }
        if !s.crashes.is_empty() {
            failed.push(target.name);
        }
    }
    assert!(failed.is_empty(), "inputs of {failed:?} panic");
}

/// Every input a fuzz run found a bug with, run through its target again:
/// no panic, and done within 10 s (some were hangs).
#[test]
fn crashers_found_before_pass() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/crashers");
    let mut replayed = 0;
    for target in TARGETS {
        let Ok(files) = std::fs::read_dir(dir.join(target.name)) else {
            continue;
        };
        for f in files.flatten() {
            let input = std::fs::read(f.path()).unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || tx.send(check(target, &input).map(|_| ())));
            let result = rx.recv_timeout(Duration::from_secs(10));
            assert_eq!(
                result,
                Ok(Ok(())),
                "{}: hangs or panics",
                f.path().display()
            );
            replayed += 1;
        }
    }
    assert!(replayed >= 5, "only {replayed} crashers found");
}
