//! What a recording lost, by name in the trace: records the kernel side did
//! not write (the ring buffer was full, a thread's state could not be
//! allocated, a table was full), mapping events the perf buffers dropped,
//! and records the drainer could not parse.
//!
//! Counts are cumulative, and each goes into the trace whenever it changed
//! since the chunk before: a recording killed with SIGKILL, or stopped by a
//! full disk, still shows what it lost up to its last chunk.

use holdup_bpf::records::*;
use holdup_bpf::Lost as RecorderLost;
use holdup_trace::{Lost, Record, Writer};
use std::collections::BTreeMap;
use std::io::{self, Write};

/// Record kinds by the name of what they carry.
const KINDS: [(&str, &[u32]); 7] = [
    ("samples", &[REC_SAMPLE]),
    ("wait segments", &[REC_SEGMENT]),
    ("task events", &[REC_FORK, REC_EXEC, REC_COMM, REC_EXIT]),
    ("block requests", &[REC_BIO_ISSUE, REC_BIO_DONE]),
    ("system calls", &[REC_SYSCALL, REC_SYSCALL_STACK]),
    ("python code objects", &[REC_PY_CODE]),
    ("wakers' stacks", &[REC_WAKER_STACK, REC_WAKER_USTACK]),
];

/// Causes, as the trace names them: what a full ring buffer lost has no
/// cause in its name; what the recorder dropped has its cause in
/// parentheses (see `holdup_trace::Lost::cause`).
const CAUSES: [(u32, &str); 4] = [
    (LOST_RING_FULL, ""),
    (LOST_NO_STATE, " (no thread state)"),
    (LOST_TABLE_FULL, " (totals table full)"),
    (LOST_STACK_TABLE, " (stack table full)"),
];

/// Every count, by its name in the trace (zeros included).
pub fn named(lost: &RecorderLost, unparsable: u64, mapping_events: u64) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for (cause, suffix) in CAUSES {
        for (what, kinds) in KINDS {
            let n = kinds.iter().map(|&k| lost.get(cause, k)).sum();
            out.push((format!("{what}{suffix}"), n));
        }
    }
    out.push(("mapping events".into(), mapping_events));
    out.push(("unparsable records".into(), unparsable));
    out
}

/// The counts written to the trace so far.
#[derive(Default)]
pub struct Written(BTreeMap<String, u64>);

impl Written {
    /// Write a record for every count that changed since the last call.
    pub fn write_changes<W: Write>(
        &mut self,
        counts: Vec<(String, u64)>,
        w: &mut Writer<W>,
    ) -> io::Result<()> {
        for (what, count) in counts {
            let before = self.0.get(&what).copied().unwrap_or(0);
            if count != before {
                w.write(&Record::Lost(Lost {
                    what: what.clone(),
                    count,
                }))?;
                self.0.insert(what, count);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_named_by_kind_and_cause() {
        let mut lost = RecorderLost::default();
        lost.counts[LOST_RING_FULL as usize][REC_SAMPLE as usize] = 3;
        lost.counts[LOST_RING_FULL as usize][REC_EXIT as usize] = 2;
        lost.counts[LOST_RING_FULL as usize][REC_FORK as usize] = 1;
        lost.counts[LOST_NO_STATE as usize][REC_SAMPLE as usize] = 12;
        lost.counts[LOST_NO_STATE as usize][REC_SEGMENT as usize] = 4;
        lost.counts[LOST_TABLE_FULL as usize][REC_SYSCALL as usize] = 5;
        let named: BTreeMap<String, u64> = named(&lost, 7, 8)
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect();
        let want: BTreeMap<String, u64> = [
            ("samples", 3),
            ("task events", 3),
            ("samples (no thread state)", 12),
            ("wait segments (no thread state)", 4),
            ("system calls (totals table full)", 5),
            ("mapping events", 8),
            ("unparsable records", 7),
        ]
        .into_iter()
        .map(|(w, n)| (w.to_string(), n))
        .collect();
        assert_eq!(named, want);
        for what in named.keys() {
            let l = Lost {
                what: what.clone(),
                count: 1,
            };
            assert_eq!(
                l.cause().is_some(),
                what.contains("(no") || what.contains("(totals")
            );
        }
    }

    #[test]
    fn only_changed_counts_are_written_again() {
        let header = holdup_trace::Header::default();
        let mut w = Writer::new(Vec::new(), &header, 0).unwrap();
        let mut written = Written::default();
        let counts = |a, b| vec![("samples".to_string(), a), ("wait segments".to_string(), b)];
        written.write_changes(counts(0, 0), &mut w).unwrap();
        written.write_changes(counts(2, 0), &mut w).unwrap();
        written.write_changes(counts(2, 1), &mut w).unwrap();
        written.write_changes(counts(5, 1), &mut w).unwrap();
        let bytes = w.finish().unwrap();
        let mut r = holdup_trace::Reader::new(&bytes[..], "t").unwrap();
        let mut seen = Vec::new();
        r.for_each(|rec| {
            if let Record::Lost(l) = rec {
                seen.push((l.what, l.count));
            }
        })
        .unwrap();
        let s = |w: &str, n| (w.to_string(), n);
        assert_eq!(
            seen,
            vec![s("samples", 2), s("wait segments", 1), s("samples", 5)]
        );
    }
}
