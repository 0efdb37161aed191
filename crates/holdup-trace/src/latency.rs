//! The latency file written by `holdup latency`: log2 histograms per
//! operation, process and time interval, as the kernel aggregated them.
//!
//! Layout: magic `HOLDUPLT`, format version (u16 major, u16 minor), body
//! length (u64), CRC-32 of the body (u32), then the body: one JSON object
//! ([`LatencyData`]). Integers are little-endian. The histograms are small
//! and written once at the end, so a self-describing body is enough; the
//! length and checksum turn a truncated or damaged file into a clear error.

pub mod causes;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

pub const MAGIC: &[u8; 8] = b"HOLDUPLT";
pub const MAJOR: u16 = 1;
pub const MINOR: u16 = 6;
const HEADER_BYTES: usize = 8 + 2 + 2 + 8 + 4;
/// Refuse bodies beyond this (a corrupt length must not allocate gigabytes).
const MAX_BODY: u64 = 1 << 30;
/// The counts of a file, and its times, add up to less than this: then any
/// sum an analysis makes of them, even over two files (a diff), fits in 64
/// bits. A real recording is nowhere near (2^62 ns is 146 years).
const MAX_TOTAL: u128 = 1 << 62;

/// What one `holdup latency` run recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyData {
    pub holdup_version: String,
    pub command: Vec<String>,
    /// Unix time of the start, ns.
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    /// Width of one time-lapse interval.
    pub interval_ns: u64,
    /// Events not counted (a kernel table was full, a thread's state or a
    /// wait's stack could not be had): the sum of `dropped`.
    pub lost_events: u64,
    /// The same by what and why (`calls (histogram table full)`, format
    /// 1.6; empty before, and when nothing was lost).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dropped: BTreeMap<String, u64>,
    /// The operations asked for by name (kernel and user functions), so a
    /// report can tell one that never ran from one never asked for.
    pub requested: Vec<String>,
    pub histograms: Vec<IntervalHistogram>,
    /// The call paths timed below each root operation (DARC's ftree,
    /// format 1.2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fnodes: Vec<CallPath>,
    /// Where system calls blocked, per bucket (format 1.3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wait_sites: Vec<WaitSite>,
    /// Callee times inside root calls, per bucket of the root (format 1.2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub callees: Vec<CalleeTime>,
    /// The name of each `cause_ns` column (format 1.4): `iowait`,
    /// `futex_wait`, `preempted`, `blocked`, then those interrupts that took
    /// time: `irq:timer`, `irq:NAME` (a device interrupt's handler),
    /// `irq:other`, `softirq:NAME`. An older file is given the columns its
    /// format had ([`CAUSES_BEFORE_1_4`]) when read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<String>,
    /// With `--decision-ops N`: the recording ended once each peak of
    /// every root had N calls (format 1.5; 0 otherwise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub decision_ops: u64,
}

/// The off-CPU time the calls of `op` (a system call) of process `pid` in
/// bucket `slot` spent blocked with `cause` (one of [`CAUSES`]) at one
/// kernel stack: `frames`, leaf first, the scheduler's own left out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitSite {
    pub op: String,
    pub pid: u32,
    pub slot: u32,
    pub cause: String,
    pub frames: Vec<String>,
    pub count: u64,
    pub ns: u64,
}

/// A call path below root operation `op`: node `id`, where function
/// `func` is called by the function of node `parent` (the root's node has
/// none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallPath {
    pub op: String,
    pub id: u32,
    pub parent: Option<u32>,
    pub func: String,
}

/// The time call path `fnode` took inside the calls of operation `op` of
/// process `pid` whose latency fell in bucket `slot` of `op`'s histogram
/// (DARC's next levels below a peak).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CalleeTime {
    pub op: String,
    pub pid: u32,
    pub fnode: u32,
    pub slot: u32,
    pub calls: u64,
    pub ns: u64,
    /// Of `ns`, off-CPU time by cause ([`CAUSES`]).
    pub cause_ns: Vec<u64>,
    /// Calls of `op` in which this path took longer than each of its
    /// siblings and than its caller's own time: DARC's maxcount (format
    /// 1.5; 0 before).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub largest: u64,
    /// Calls of `op` in which this path's own time was longer than each
    /// of its timed callees' (format 1.5).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub own_largest: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One operation of one process in one interval.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntervalHistogram {
    /// `syscall:read`, `kfunc:vfs_read`, `func:do_lookup`, `block:vda`.
    pub op: String,
    pub pid: u32,
    pub comm: String,
    pub interval: u32,
    /// Calls per bucket; bucket `s` holds latencies in `[2^s, 2^(s+1))` ns
    /// (bucket 0 also holds 0 ns, the last is open-ended).
    pub count: Vec<u64>,
    /// Time spent in the calls of each bucket, ns.
    pub ns: Vec<u64>,
    /// Of `ns`, the time the calls spent off-CPU, by cause ([`CAUSES`]),
    /// per bucket (format 1.1; empty when not recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cause_ns: Vec<Vec<u64>>,
}

/// The columns of `cause_ns` in a file older than format 1.4, which does
/// not name them in [`LatencyData::causes`]: the off-CPU causes (format
/// 1.1, those four only), then time taken by hard interrupts (the local
/// timer included) and by softirqs while the thread was on a CPU (format
/// 1.3).
pub const CAUSES_BEFORE_1_4: [&str; 6] = [
    causes::IOWAIT,
    causes::FUTEX_WAIT,
    causes::PREEMPTED,
    causes::BLOCKED,
    "irq",
    "softirq",
];

/// The off-CPU causes, the first columns of every file with causes.
pub const OFF_CPU_CAUSES: usize = causes::OFF_CPU.len();

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LatencyFileError {
    #[error("{path}: not a holdup latency file (bad magic)")]
    NotALatencyFile { path: String },
    #[error("{path}: latency file version {major}.{minor} is newer than this holdup understands ({MAJOR}.x); upgrade holdup")]
    Version {
        path: String,
        major: u16,
        minor: u16,
    },
    #[error("{path}: truncated latency file ({have} of {want} bytes)")]
    Truncated { path: String, have: u64, want: u64 },
    #[error("{path}: corrupt latency file ({why})")]
    Corrupt { path: String, why: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// Write `data` to `w` in the latency file format.
pub fn write_latency(mut w: impl Write, data: &LatencyData) -> std::io::Result<()> {
    let body = serde_json::to_vec(data)?;
    let mut head = Vec::with_capacity(HEADER_BYTES);
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&MAJOR.to_le_bytes());
    head.extend_from_slice(&MINOR.to_le_bytes());
    head.extend_from_slice(&(body.len() as u64).to_le_bytes());
    head.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    w.write_all(&head)?;
    w.write_all(&body)?;
    w.flush()
}

/// Parse a latency file's bytes; `path` only names it in errors.
pub fn parse_latency(bytes: &[u8], path: &str) -> Result<LatencyData, LatencyFileError> {
    let path = path.to_string();
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(LatencyFileError::NotALatencyFile { path });
    }
    if bytes.len() < HEADER_BYTES {
        return Err(LatencyFileError::Truncated {
            path,
            have: bytes.len() as u64,
            want: HEADER_BYTES as u64,
        });
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]);
    let (major, minor) = (u16_at(8), u16_at(10));
    if major != MAJOR {
        return Err(LatencyFileError::Version { path, major, minor });
    }
    let len = u64::from_le_bytes(bytes[12..20].try_into().unwrap());
    let crc = u32::from_le_bytes(bytes[20..24].try_into().unwrap());
    if len > MAX_BODY {
        return Err(LatencyFileError::Corrupt {
            path,
            why: format!("body length {len}"),
        });
    }
    let want = HEADER_BYTES as u64 + len;
    if (bytes.len() as u64) < want {
        return Err(LatencyFileError::Truncated {
            path,
            have: bytes.len() as u64,
            want,
        });
    }
    let body = &bytes[HEADER_BYTES..want as usize];
    if crc32fast::hash(body) != crc {
        return Err(LatencyFileError::Corrupt {
            path,
            why: "checksum mismatch".into(),
        });
    }
    let mut data: LatencyData =
        serde_json::from_slice(body).map_err(|e| LatencyFileError::Corrupt {
            path: path.clone(),
            why: e.to_string(),
        })?;
    if data.causes.is_empty() {
        let width = data
            .histograms
            .iter()
            .map(|h| h.cause_ns.len())
            .chain(data.callees.iter().map(|c| c.cause_ns.len()))
            .find(|&w| w > 0)
            .unwrap_or(0);
        if ![0, OFF_CPU_CAUSES, CAUSES_BEFORE_1_4.len()].contains(&width) {
            return Err(LatencyFileError::Corrupt {
                path,
                why: format!("{width} cause columns"),
            });
        }
        data.causes = CAUSES_BEFORE_1_4[..width]
            .iter()
            .map(|c| c.to_string())
            .collect();
    }
    let width = data.causes.len();
    if let Some(h) = data.histograms.iter().find(|h| {
        h.count.len() != h.ns.len()
            || h.count.len() > 64
            || ![0, width].contains(&h.cause_ns.len())
            || h.cause_ns.iter().any(|c| c.len() != h.count.len())
    }) {
        return Err(LatencyFileError::Corrupt {
            path,
            why: format!("histogram of {} has inconsistent buckets", h.op),
        });
    }
    if let Some(what) = beyond_totals(&data) {
        return Err(LatencyFileError::Corrupt {
            path,
            why: format!("its {what} add up to more than any recording holds"),
        });
    }
    if let Some(c) = data
        .callees
        .iter()
        .find(|c| c.cause_ns.len() != width || c.slot >= 64)
    {
        return Err(LatencyFileError::Corrupt {
            path,
            why: format!(
                "callee time of node {} in {} is inconsistent",
                c.fnode, c.op
            ),
        });
    }
    Ok(data)
}

/// Which of the file's counts or times, if any, add up to [`MAX_TOTAL`] or
/// more.
fn beyond_totals(d: &LatencyData) -> Option<&'static str> {
    let sum = |values: &mut dyn Iterator<Item = u64>| values.map(u128::from).sum::<u128>();
    let counts = sum(&mut d.histograms.iter().flat_map(|h| h.count.iter().copied()))
        + sum(&mut d
            .callees
            .iter()
            .flat_map(|c| [c.calls, c.largest, c.own_largest]))
        + sum(&mut d.wait_sites.iter().map(|w| w.count));
    let times = sum(&mut d
        .histograms
        .iter()
        .flat_map(|h| h.ns.iter().chain(h.cause_ns.iter().flatten()).copied()))
        + sum(&mut d
            .callees
            .iter()
            .flat_map(|c| std::iter::once(c.ns).chain(c.cause_ns.iter().copied())))
        + sum(&mut d.wait_sites.iter().map(|w| w.ns))
        + u128::from(d.duration_ns);
    if counts >= MAX_TOTAL {
        Some("counts")
    } else if times >= MAX_TOTAL {
        Some("times")
    } else {
        None
    }
}

/// Read a latency file.
pub fn read_latency(path: &Path) -> Result<LatencyData, LatencyFileError> {
    let name = path.display().to_string();
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|source| LatencyFileError::Io {
            path: name.clone(),
            source,
        })?;
    parse_latency(&bytes, &name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> LatencyData {
        LatencyData {
            holdup_version: "0.1.0".into(),
            command: vec!["./app".into()],
            duration_ns: 2_000_000_000,
            interval_ns: 1_000_000_000,
            requested: vec!["func:f".into()],
            histograms: vec![IntervalHistogram {
                op: "syscall:read".into(),
                pid: 7,
                comm: "app".into(),
                interval: 1,
                count: vec![0, 3, 1],
                ns: vec![0, 7, 5],
                cause_ns: vec![
                    vec![0, 1, 0],
                    vec![0; 3],
                    vec![0, 0, 2],
                    vec![0; 3],
                    vec![0; 3],
                    vec![1, 0, 0],
                ],
            }],
            fnodes: vec![CallPath {
                op: "func:f".into(),
                id: 1,
                parent: Some(0),
                func: "g".into(),
            }],
            wait_sites: vec![WaitSite {
                op: "syscall:read".into(),
                pid: 7,
                slot: 2,
                cause: "iowait".into(),
                frames: vec!["folio_wait_bit_common".into(), "filemap_read".into()],
                count: 1,
                ns: 3,
            }],
            callees: vec![CalleeTime {
                op: "func:f".into(),
                pid: 7,
                fnode: 1,
                slot: 2,
                calls: 1,
                ns: 4,
                cause_ns: vec![0, 0, 1, 0, 0, 0],
                largest: 3,
                own_largest: 1,
            }],
            decision_ops: 20,
            lost_events: 2,
            dropped: [("calls (histogram table full)".to_string(), 2)]
                .into_iter()
                .collect(),
            causes: [
                "iowait",
                "futex_wait",
                "preempted",
                "blocked",
                "irq:timer",
                "softirq:net_rx",
            ]
            .map(String::from)
            .to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn round_trip() {
        let mut buf = Vec::new();
        write_latency(&mut buf, &sample()).unwrap();
        assert_eq!(parse_latency(&buf, "x").unwrap(), sample());
    }

    #[test]
    fn older_files_get_the_cause_columns_of_their_format() {
        // Format 1.3: six unnamed columns.
        let mut old = sample();
        old.causes.clear();
        let mut buf = Vec::new();
        write_latency(&mut buf, &old).unwrap();
        let read = parse_latency(&buf, "x").unwrap();
        assert_eq!(read.causes, CAUSES_BEFORE_1_4);
        assert_eq!(CAUSES_BEFORE_1_4[..OFF_CPU_CAUSES], causes::OFF_CPU);
        // Format 1.1: the four off-CPU causes.
        old.histograms[0].cause_ns.truncate(OFF_CPU_CAUSES);
        old.fnodes.clear();
        old.callees.clear();
        old.wait_sites.clear();
        let mut buf = Vec::new();
        write_latency(&mut buf, &old).unwrap();
        let read = parse_latency(&buf, "x").unwrap();
        assert_eq!(read.causes, causes::OFF_CPU);
        assert_eq!(read.histograms, old.histograms);
        old.histograms[0].cause_ns.truncate(3);
        let mut buf = Vec::new();
        write_latency(&mut buf, &old).unwrap();
        assert!(parse_latency(&buf, "x").is_err());
    }

    #[test]
    fn columns_that_do_not_match_their_names_are_an_error() {
        let mut bad = sample();
        bad.causes.pop();
        let mut buf = Vec::new();
        write_latency(&mut buf, &bad).unwrap();
        let e = parse_latency(&buf, "x").unwrap_err().to_string();
        assert!(e.contains("inconsistent"), "{e}");
    }

    #[test]
    fn counts_or_times_no_recording_holds_are_an_error() {
        for (what, change) in [
            (
                "counts",
                &(|d: &mut LatencyData| d.histograms[0].count[1] = u64::MAX)
                    as &dyn Fn(&mut LatencyData),
            ),
            ("times", &|d: &mut LatencyData| d.callees[0].ns = 1 << 62),
            ("times", &|d: &mut LatencyData| {
                d.histograms.push(d.histograms[0].clone());
                d.histograms[0].ns[2] = 1 << 61;
                d.histograms[1].ns[2] = 1 << 61;
            }),
        ] {
            let mut bad = sample();
            change(&mut bad);
            let mut buf = Vec::new();
            write_latency(&mut buf, &bad).unwrap();
            let e = parse_latency(&buf, "x").unwrap_err().to_string();
            assert!(e.contains(&format!("its {what} add up")), "{e}");
        }
    }

    #[test]
    fn every_cut_and_flip_is_an_error_not_a_panic() {
        let mut buf = Vec::new();
        write_latency(&mut buf, &sample()).unwrap();
        for cut in 0..buf.len() {
            let e = parse_latency(&buf[..cut], "x").unwrap_err().to_string();
            assert!(
                e.contains("truncated") || e.contains("not a holdup latency file"),
                "{cut}: {e}"
            );
        }
        for at in HEADER_BYTES..buf.len() {
            let mut bad = buf.clone();
            bad[at] ^= 0x20;
            assert!(parse_latency(&bad, "x").is_err(), "flip at {at}");
        }
        let e = parse_latency(b"HOLDUP\0\0xxxxxxxxxxxxxxxxxxxxxx", "x").unwrap_err();
        assert!(e.to_string().contains("not a holdup latency file"));
    }
}
