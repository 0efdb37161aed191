//! `--critical-path` of `holdup report` and `holdup flame`: each wait that
//! another thread ended, replaced by what the chain behind it did.

use holdup_analysis::holder::{critical_folded, critical_paths};
use holdup_analysis::profile::Filter;
use holdup_trace::{features, Trace};
use std::io::Write;

/// The threads the filter keeps, by tid.
fn keeper<'a>(trace: &'a Trace, filter: &'a Filter) -> impl Fn(u32) -> bool + 'a {
    move |tid| {
        let (pid, comm) = trace
            .threads
            .get(&tid)
            .map_or((0, ""), |t| (t.pid, t.comm.as_str()));
        filter.keeps(pid, tid, comm)
    }
}

/// Waits can be followed only through wait segments.
fn needs_segments(trace: &Trace) -> anyhow::Result<()> {
    if trace.features & features::SEGMENTS == 0 {
        anyhow::bail!(
            "the trace was recorded without wait segments (--no-segments): waits cannot be followed to what ended them; record again without that flag"
        );
    }
    Ok(())
}

/// The critical-path table (or its JSON, schema `holdup.critical_path/1`).
pub fn report(
    trace: &Trace,
    filter: &Filter,
    json: bool,
    percent_limit: f64,
    out: &mut impl Write,
) -> anyhow::Result<bool> {
    needs_segments(trace)?;
    let (paths, stats) = critical_paths(trace, &keeper(trace, filter));
    if paths.is_empty() {
        return Ok(false);
    }
    let notes = stats.notes();
    if json {
        let threads: Vec<serde_json::Value> = paths
            .iter()
            .map(|p| {
                serde_json::json!({ "tid": p.tid, "pid": p.pid, "thread": p.thread,
                                    "samples": p.samples, "activities": p.activities })
            })
            .collect();
        let doc = serde_json::json!({ "schema": "holdup.critical_path/1",
                                      "period_ns": trace.header.period_ns,
                                      "duration_ns": trace.duration_ns(),
                                      "notes": notes, "threads": threads });
        serde_json::to_writer(&mut *out, &doc)?;
        writeln!(out)?;
    } else {
        holdup_render::critical::render(out, &paths, &notes, percent_limit)?;
    }
    Ok(true)
}

/// Folded stacks of the critical path, for the flame graph.
pub fn folded(trace: &Trace, filter: &Filter) -> anyhow::Result<Vec<(String, u64)>> {
    needs_segments(trace)?;
    Ok(critical_folded(trace, &keeper(trace, filter)))
}
