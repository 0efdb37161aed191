//! `holdup.report/1`: the per-thread profile as JSON, written as it goes.

use holdup_analysis::profile::{
    ClassCounts, FunctionStats, Idle, LockSplit, Profile, Tag, ThreadProfile,
};
use holdup_analysis::stacks::LockKind;
use serde::Serialize;

#[derive(Serialize)]
struct JsonThread<'a> {
    pid: u32,
    tid: u32,
    comm: &'a str,
    lifetime_ns: u64,
    samples: ClassCounts,
    lock_split: LockSplit,
    /// The GIL waits' share of the thread's samples (0 to 1), for the
    /// threads of a Python process that waited for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    gil_share: Option<f64>,
    idle: Idle,
    functions: &'a [FunctionStats],
    sites: Vec<JsonSite<'a>>,
}

#[derive(Serialize)]
struct JsonCount<'a> {
    name: &'a str,
    samples: u64,
}

/// A blocked row: where the application waited, heaviest first.
#[derive(Serialize)]
struct JsonSite<'a> {
    site: &'a str,
    dso: &'a str,
    class: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    lock_kind: Option<&'static str>,
    samples: u64,
    wait_reasons: Vec<JsonCount<'a>>,
    /// For a mutex, the holder that released it.
    wakers: Vec<JsonCount<'a>>,
    /// What the threads that ended the waits did meanwhile, down the chain.
    #[serde(skip_serializing_if = "Option::is_none")]
    while_held: Option<&'a holdup_analysis::holder::RowHeld>,
}

fn json_sites(t: &ThreadProfile) -> Vec<JsonSite<'_>> {
    t.rows
        .iter()
        .filter_map(|r| match r.tag {
            Tag::Blocked(class) => Some(JsonSite {
                site: &r.symbol,
                dso: &r.dso,
                class: class.name(),
                lock_kind: r.lock_kind.map(LockKind::name),
                samples: r.weight,
                wait_reasons: r
                    .wait_reasons
                    .iter()
                    .map(|(name, samples)| JsonCount {
                        name,
                        samples: *samples,
                    })
                    .collect(),
                wakers: r
                    .wakers
                    .iter()
                    .map(|(name, samples)| JsonCount {
                        name,
                        samples: *samples,
                    })
                    .collect(),
                while_held: r.while_held.as_deref(),
            }),
            _ => None,
        })
        .collect()
}

#[derive(Serialize)]
struct JsonReport<'a> {
    schema: &'static str,
    period_ns: u64,
    duration_ns: u64,
    lost_events: u64,
    /// What the recorder dropped, by name: `{"samples (no thread state)": 12}`.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    dropped: std::collections::BTreeMap<&'a str, u64>,
    threads: Vec<JsonThread<'a>>,
    /// Goroutines' waits by start function (recorded with --goroutines).
    #[serde(skip_serializing_if = "holdup_analysis::goroutines::Goroutines::is_empty")]
    goroutines: &'a holdup_analysis::goroutines::Goroutines,
}

fn json_report(p: &Profile) -> JsonReport<'_> {
    JsonReport {
        schema: "holdup.report/1",
        period_ns: p.period_ns,
        duration_ns: p.duration_ns,
        lost_events: p.lost_events,
        dropped: p.dropped.iter().map(|(w, n)| (w.as_str(), *n)).collect(),
        threads: p
            .threads
            .iter()
            .map(|t| JsonThread {
                pid: t.pid,
                tid: t.tid,
                comm: &t.comm,
                lifetime_ns: t.lifetime_ns,
                samples: t.samples,
                lock_split: t.lock_split,
                gil_share: (t.lock_split.gil > 0)
                    .then(|| t.lock_split.gil as f64 / t.samples.total() as f64),
                idle: t.idle,
                functions: &t.functions,
                sites: json_sites(t),
            })
            .collect(),
        goroutines: &p.goroutines,
    }
}

/// `holdup.report/1`, exactly as docs/design.md lists it (plus extra fields).
pub fn to_json(p: &Profile) -> serde_json::Value {
    serde_json::to_value(json_report(p)).expect("report serializes")
}

/// Write `holdup.report/1` without building it in memory first.
pub fn write_json(p: &Profile, out: impl std::io::Write) -> serde_json::Result<()> {
    serde_json::to_writer(out, &json_report(p))
}
