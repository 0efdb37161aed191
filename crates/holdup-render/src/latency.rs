//! `holdup latency report` and `diff`: histograms drawn like OSprof and
//! bcc (`nsecs : count | bar |`) with their peaks, and JSON
//! (`holdup.latency/1`, DESIGN.md; the diff's own `holdup.latency-diff/1`).

use holdup_analysis::latency::{
    bucket_hi, bucket_lo, Histogram, OpDiff, Operation, Peak, PeakCauses, PeakChange,
};
use holdup_trace::latency::LatencyData;
use serde_json::{json, Value};
use std::fmt::Write;

const BAR: usize = 40;
const SHADES: &[u8] = b" .:-=+*#%@";

/// `850 ns`, `3.2 µs`, `12.3 ms`, `1.234 s`.
pub fn human_ns(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.1} ms", f / 1e6)
    } else {
        format!("{:.3} s", f / 1e9)
    }
}

fn nonzero_range(count: &[u64]) -> Option<(usize, usize)> {
    Some((
        count.iter().position(|&c| c > 0)?,
        count.iter().rposition(|&c| c > 0)?,
    ))
}

fn mean(h: &Histogram) -> u64 {
    h.total_ns() / h.total_count().max(1)
}

fn peak_line(p: &Peak, h: &Histogram) -> String {
    format!(
        "peak {}: {} .. {}, {} calls ({:.1}%), {:.1}% of the time",
        p.index,
        human_ns(p.lo_ns()),
        human_ns(p.hi_ns()),
        p.count,
        100.0 * p.count as f64 / h.total_count().max(1) as f64,
        100.0 * p.share
    )
}

fn histogram(out: &mut String, h: &Histogram, peaks: &[Peak]) {
    let Some((lo, hi)) = nonzero_range(&h.count) else {
        return;
    };
    let max = h.count[lo..=hi].iter().copied().max().unwrap_or(1).max(1);
    let _ = writeln!(out, "{:>25} : {:<9} distribution", "nsecs", "count");
    for s in lo..=hi {
        let c = h.count[s];
        let stars = ((c as u128 * BAR as u128).div_ceil(max as u128)) as usize;
        let mark = peaks
            .iter()
            .find(|p| p.mode_slot == s)
            .map(|p| format!(" peak {}", p.index))
            .unwrap_or_default();
        let range = format!("{} -> {}", bucket_lo(s), bucket_hi(s) - 1);
        let _ = writeln!(
            out,
            "{range:>25} : {c:<9} |{:<BAR$}|{mark}",
            "*".repeat(stars)
        );
    }
}

/// One row of shades per time step, one column per bucket.
fn time_lapse(out: &mut String, o: &Operation, interval_ns: u64) {
    let Some((lo, hi)) = nonzero_range(&o.hist.count) else {
        return;
    };
    let _ = writeln!(
        out,
        "  time-lapse: one row per step, one column per bucket from {} to {} (darker: more calls)",
        human_ns(bucket_lo(lo)),
        human_ns(bucket_hi(hi))
    );
    for (first, h) in &o.steps {
        let max = h.count.iter().copied().max().unwrap_or(0).max(1);
        let row: String = (lo..=hi)
            .map(|s| {
                let c = h.count.get(s).copied().unwrap_or(0);
                // c ≤ max: the product fits in 128 bits, the level in the shades.
                let level = (c as u128 * (SHADES.len() as u128 - 1)).div_ceil(max as u128) as usize;
                SHADES[level] as char
            })
            .collect();
        let peaks = holdup_analysis::latency::find_peaks(h).len();
        let _ = writeln!(
            out,
            "  {:>9} |{row}| {} calls, {peaks} peak{}",
            format!("{:.1} s", *first as f64 * interval_ns as f64 / 1e9),
            h.total_count(),
            if peaks == 1 { "" } else { "s" }
        );
    }
}

/// The text report.
pub fn render(data: &LatencyData, ops: &[Operation]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# holdup latency: {}{} over {}, {} lost events{}",
        if data.command.is_empty() {
            ""
        } else {
            "command "
        },
        if data.command.is_empty() {
            "recording".to_string()
        } else {
            data.command.join(" ")
        },
        human_ns(data.duration_ns),
        data.lost_events,
        crate::report::dropped_line(data.dropped.iter().map(|(w, n)| (w.as_str(), *n)))
            .map_or(String::new(), |d| format!("; {d}"))
    );
    for o in ops {
        let _ = writeln!(
            out,
            "\n{}  {}[{}]  {} calls, {} total, mean {}",
            o.op,
            o.comm,
            o.pid,
            o.hist.total_count(),
            human_ns(o.hist.total_ns()),
            human_ns(mean(&o.hist))
        );
        histogram(&mut out, &o.hist, &o.peaks);
        for p in &o.peaks {
            let _ = writeln!(out, "  {}", peak_line(p, &o.hist));
        }
        if !o.steps.is_empty() {
            time_lapse(&mut out, o, data.interval_ns);
        }
    }
    out
}

fn buckets_json(h: &Histogram) -> Value {
    Value::Array(
        h.count
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(s, &c)| json!({ "lo_ns": bucket_lo(s), "hi_ns": bucket_hi(s), "count": c }))
            .collect(),
    )
}

fn peak_json(p: &Peak) -> Value {
    json!({ "index": p.index, "lo_ns": p.lo_ns(), "hi_ns": p.hi_ns(), "count": p.count,
            "share": p.share, "total_ns": p.ns })
}

/// `holdup latency report --json`: schema `holdup.latency/1`.
pub fn to_json(data: &LatencyData, ops: &[Operation]) -> Value {
    let operations: Vec<Value> = ops
        .iter()
        .map(|o| {
            let mut v = json!({
                "op": o.op, "pid": o.pid, "comm": o.comm,
                "count": o.hist.total_count(), "total_ns": o.hist.total_ns(),
                "buckets": buckets_json(&o.hist),
                "peaks": o.peaks.iter().map(peak_json).collect::<Vec<_>>(),
            });
            if !o.steps.is_empty() {
                let steps: Vec<Value> = o
                    .steps
                    .iter()
                    .map(|(first, h)| {
                        json!({
                            "start_ns": first.saturating_mul(data.interval_ns),
                            "count": h.total_count(), "total_ns": h.total_ns(),
                            "buckets": buckets_json(h),
                            "peaks": holdup_analysis::latency::find_peaks(h)
                                .iter().map(peak_json).collect::<Vec<_>>(),
                        })
                    })
                    .collect();
                v["intervals"] = Value::Array(steps);
            }
            v
        })
        .collect();
    let mut v = json!({
        "schema": "holdup.latency/1",
        "duration_ns": data.duration_ns,
        "interval_ns": data.interval_ns,
        "lost_events": data.lost_events,
        "command": data.command,
        "operations": operations,
    });
    if !data.dropped.is_empty() {
        v["dropped"] = json!(data.dropped);
    }
    v
}

fn change_line(c: &PeakChange) -> String {
    let range = |p: &Peak| format!("{} .. {}", human_ns(p.lo_ns()), human_ns(p.hi_ns()));
    match c {
        PeakChange::Appeared(p) => {
            format!("peak {} appeared: {}, {} calls", p.index, range(p), p.count)
        }
        PeakChange::Vanished(p) => {
            format!("peak {} vanished: {}, {} calls", p.index, range(p), p.count)
        }
        PeakChange::Moved { from, to } => format!(
            "peak {} moved: {} → {} (now peak {}, {} → {} calls)",
            from.index,
            range(from),
            range(to),
            to.index,
            from.count,
            to.count
        ),
    }
}

/// The text of `holdup latency diff`.
pub fn render_diff(a: &str, b: &str, diffs: &[OpDiff]) -> String {
    let mut out = format!("# holdup latency diff: {a} → {b}; EMD in buckets (factors of two)\n");
    let _ = writeln!(
        out,
        "{:>6}  {:<28} {:<16} {:^19}  mean",
        "EMD", "operation", "comm", "calls"
    );
    for d in diffs {
        let emd = d.emd.map_or_else(
            || {
                if d.a.total_count() == 0 {
                    "new".into()
                } else {
                    "gone".into()
                }
            },
            |e| format!("{e:.2}"),
        );
        let _ = writeln!(
            out,
            "{emd:>6}  {:<28} {:<16} {:>8} → {:<8}  {} → {}",
            d.op,
            d.comm,
            d.a.total_count(),
            d.b.total_count(),
            human_ns(mean(&d.a)),
            human_ns(mean(&d.b))
        );
        for c in &d.changes {
            let _ = writeln!(out, "{:>8}{}", "", change_line(c));
        }
    }
    out
}

/// `holdup latency diff --json`: schema `holdup.latency-diff/1`.
pub fn diff_to_json(diffs: &[OpDiff]) -> Value {
    let ops: Vec<Value> = diffs
        .iter()
        .map(|d| {
            let changes: Vec<Value> = d
                .changes
                .iter()
                .map(|c| match c {
                    PeakChange::Appeared(p) => json!({ "change": "appeared", "to": peak_json(p) }),
                    PeakChange::Vanished(p) => {
                        json!({ "change": "vanished", "from": peak_json(p) })
                    }
                    PeakChange::Moved { from, to } => {
                        json!({ "change": "moved", "from": peak_json(from), "to": peak_json(to) })
                    }
                })
                .collect();
            json!({
                "op": d.op, "comm": d.comm, "emd": d.emd,
                "count_a": d.a.total_count(), "count_b": d.b.total_count(),
                "total_ns_a": d.a.total_ns(), "total_ns_b": d.b.total_ns(),
                "changes": changes,
            })
        })
        .collect();
    json!({ "schema": "holdup.latency-diff/1", "operations": ops })
}

/// The text of `holdup latency explain`.
pub fn render_explain(o: &Operation, peaks: &[PeakCauses]) -> String {
    let mut out = format!(
        "{}  {}[{}]  {} calls, {} total\n",
        o.op,
        o.comm,
        o.pid,
        o.hist.total_count(),
        human_ns(o.hist.total_ns())
    );
    for pc in peaks {
        let _ = writeln!(out, "  {}", peak_line(&pc.peak, &o.hist));
        for (cause, ns, share) in &pc.causes {
            let _ = writeln!(
                out,
                "    {:>5.1}%  {cause:<11} {:>10} per call",
                100.0 * share,
                human_ns(ns / pc.peak.count.max(1))
            );
        }
        let path: Vec<String> = pc
            .path
            .iter()
            .map(|s| match s.largest_in {
                Some(n) => format!(
                    "{} ({:.0}%, largest in {n} of {} calls)",
                    s.frame,
                    100.0 * s.share,
                    pc.peak.count
                ),
                None => format!("{} ({:.0}%)", s.frame, 100.0 * s.share),
            })
            .collect();
        let _ = writeln!(out, "    path: {}", path.join(" → "));
    }
    out
}

/// `holdup latency explain --json`: `holdup.latency/1` with `paths`.
pub fn explain_to_json(data: &LatencyData, o: &Operation, peaks: &[PeakCauses]) -> Value {
    let mut v = to_json(data, std::slice::from_ref(o));
    v["paths"] = Value::Array(
        peaks
            .iter()
            .map(|pc| {
                json!({
                    "peak": pc.peak.index,
                    "path": pc.path.iter()
                        .map(|s| {
                            let mut v = json!({ "frame": s.frame, "share": s.share });
                            if let Some(n) = s.largest_in {
                                v["largest_in"] = json!(n);
                            }
                            v
                        })
                        .collect::<Vec<_>>(),
                    "causes": pc.causes.iter()
                        .map(|(cause, ns, share)| json!({ "cause": cause, "total_ns": ns, "share": share }))
                        .collect::<Vec<_>>(),
                })
            })
            .collect(),
    );
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_says_what_was_dropped_and_why() {
        let mut data = LatencyData {
            command: vec!["./app".into()],
            duration_ns: 1_000_000_000,
            lost_events: 3,
            ..Default::default()
        };
        data.dropped
            .insert("calls (histogram table full)".into(), 1);
        data.dropped.insert(
            "system-call waits (no kernel stack for their site)".into(),
            2,
        );
        let text = render(&data, &[]);
        assert!(
            text.lines().next().unwrap().ends_with(
                "3 lost events; dropped: 1 calls (histogram table full), 2 system-call waits (no kernel stack for their site)"
            ),
            "{text}"
        );
        let j = to_json(&data, &[]);
        assert_eq!(j["lost_events"], 3);
        assert_eq!(j["dropped"]["calls (histogram table full)"], 1);
        data.dropped.clear();
        data.lost_events = 0;
        assert!(render(&data, &[])
            .lines()
            .next()
            .unwrap()
            .ends_with("0 lost events"));
        assert!(to_json(&data, &[]).get("dropped").is_none());
    }
}
