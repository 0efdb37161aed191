//! A bounded fuzz run (part of the test suite) and the inputs past runs
//! found, kept as regression tests. One test function: the allocation cap
//! counts the whole process.

use holdup_fuzz::{check, fuzz, Config};
use std::time::Duration;

/// A valid trace header followed by `rest`.
fn header_then(rest: &[u8]) -> Vec<u8> {
    let json = b"{}";
    let mut b = holdup_trace::file::MAGIC.to_vec();
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&(json.len() as u32).to_le_bytes());
    b.extend_from_slice(json);
    b.extend_from_slice(&crc32fast::hash(json).to_le_bytes());
    b.extend_from_slice(rest);
    b
}

/// Inputs that once made a reader or an analysis misbehave.
fn regressions() -> Vec<(&'static str, Vec<u8>)> {
    let mut huge_chunk = 0x4b4e_4843u32.to_le_bytes().to_vec();
    huge_chunk.extend_from_slice(&(200u32 << 20).to_le_bytes());
    huge_chunk.extend_from_slice(&[0; 8]);
    let mut huge_header = holdup_trace::file::MAGIC.to_vec();
    huge_header.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
    huge_header.extend_from_slice(&(16u32 << 20).to_le_bytes());
    huge_header.extend_from_slice(b"{}");
    vec![
        // A 12-byte chunk header claiming 200 MiB: the reader allocated
        // the claimed length before reading.
        ("chunk length", header_then(&huge_chunk)),
        // A header claiming 16 MiB of JSON in a 30-byte file.
        ("header length", huge_header),
    ]
}

#[test]
fn no_input_panics_hangs_or_allocates_without_bound() {
    for (what, input) in regressions() {
        assert_eq!(check(&input), None, "{what}");
    }
    let secs = std::env::var("HOLDUP_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let s = fuzz(&Config {
        max_inputs: u64::MAX,
        max_time: Some(Duration::from_secs(secs)),
        seed: 0x5eed,
        ..Default::default()
    });
    eprintln!(
        "fuzz: {} inputs in {:.1} s, {} read as traces, peak live memory {} KiB",
        s.inputs,
        s.elapsed.as_secs_f64(),
        s.traces_read,
        s.peak_live_bytes >> 10
    );
    assert!(s.inputs >= 1_000, "too few inputs: {}", s.inputs);
    assert!(
        s.traces_read * 5 >= s.inputs,
        "the mutator rarely makes a readable trace"
    );
    for c in &s.crashes {
        eprintln!(
            "fuzz: input {} panics at {}: {}: {:?}",
            c.index, c.location, c.message, c.input
        );
    }
    assert!(s.crashes.is_empty(), "{} inputs panic", s.crashes.len());
}

/// Found by a long run (seeds 2 and 1, inputs 571270 and 3905555): the
/// wait-for graph's sweep (`Sweep::run_until`) span and did not finish.
/// Bucket limits computed as `(cur + 1) << shift` wrapped for times near
/// the end of the clock's range, so the last events never left the heap;
/// and (a real trace, mutated) finishing stepped through every empty bucket
/// of a gap of years.
#[test]
fn waitgraph_sweep_finishes_on_fuzzed_traces() {
    for input in [
        &include_bytes!("../regressions/waitgraph-sweep-hang.bin")[..],
        &include_bytes!("../regressions/waitgraph-sweep-hang-2.bin")[..],
        &include_bytes!("../regressions/waitgraph-sweep-hang-3.bin")[..],
    ] {
        let input = input.to_vec();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(check(&input)).unwrap());
        let result = rx.recv_timeout(Duration::from_secs(10));
        assert_eq!(result, Ok(None), "hangs or panics");
    }
}
