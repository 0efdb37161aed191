//! `holdup latency report`, `diff` and `explain`: a latency file read,
//! analysed and printed.

use super::{DiffArgs, ExplainArgs, ReportArgs};
use anyhow::bail;
use holdup_analysis::latency as analysis;
use holdup_trace::latency::{read_latency, LatencyData};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

fn load(path: &Path) -> anyhow::Result<LatencyData> {
    let data = read_latency(path)?;
    if data.lost_events > 0 {
        let why = if data.dropped.is_empty() {
            "a kernel map was full".to_string()
        } else {
            let d: Vec<(&str, u64)> = data.dropped.iter().map(|(w, n)| (w.as_str(), *n)).collect();
            holdup_trace::dropped_text(&d)
        };
        eprintln!(
            "holdup: warning: {}: {} events were not counted ({why}); counts are lower bounds",
            path.display(),
            data.lost_events
        );
    }
    Ok(data)
}

pub(super) fn report(r: ReportArgs) -> anyhow::Result<ExitCode> {
    let data = load(&r.input)?;
    let lapse = match r.time_lapse {
        None => None,
        Some(d) => {
            let interval = Duration::from_nanos(data.interval_ns.max(1));
            if d < interval {
                bail!(
                    "--time-lapse must be at least the recorded interval ({} ms)",
                    interval.as_millis()
                );
            }
            Some((d.as_nanos() / interval.as_nanos()) as u64)
        }
    };
    let mut ops = analysis::operations(&data, lapse);
    if let Some(f) = &r.op {
        ops.retain(|o| o.op.contains(f.as_str()));
        if ops.is_empty() {
            bail!("no operation matching '{f}' in {}", r.input.display());
        }
    }
    let mut out = std::io::stdout().lock();
    if r.json {
        serde_json::to_writer(&mut out, &holdup_render::latency::to_json(&data, &ops))?;
        writeln!(out)?;
    } else {
        out.write_all(holdup_render::latency::render(&data, &ops).as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn diff(d: DiffArgs) -> anyhow::Result<ExitCode> {
    let (a, b) = (load(&d.a)?, load(&d.b)?);
    let diffs = analysis::diff(&a, &b);
    let mut out = std::io::stdout().lock();
    if d.json {
        serde_json::to_writer(&mut out, &holdup_render::latency::diff_to_json(&diffs))?;
        writeln!(out)?;
    } else {
        let name = |p: &Path| p.display().to_string();
        out.write_all(
            holdup_render::latency::render_diff(&name(&d.a), &name(&d.b), &diffs).as_bytes(),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn explain(e: ExplainArgs) -> anyhow::Result<ExitCode> {
    let data = load(&e.input)?;
    let ops = analysis::operations(&data, None);
    let Some(op) = ops
        .iter()
        .find(|o| o.op == e.op && e.pid.is_none_or(|p| p == o.pid))
    else {
        bail!(
            "no operation {}{} in {} (holdup latency report lists them)",
            e.op,
            e.pid.map_or(String::new(), |p| format!(" of pid {p}")),
            e.input.display()
        );
    };
    let Some(mut peaks) = analysis::explain(op, &data) else {
        bail!(
            "{} was recorded without off-CPU causes (by an older holdup); record it again",
            e.input.display()
        );
    };
    if let Some(n) = e.peak {
        if n == 0 || n > peaks.len() {
            bail!(
                "{} has {} peak(s); --peak {n} does not exist",
                op.op,
                peaks.len()
            );
        }
        peaks = vec![peaks.swap_remove(n - 1)];
    }
    let mut out = std::io::stdout().lock();
    if e.json {
        let v = holdup_render::latency::explain_to_json(&data, op, &peaks);
        serde_json::to_writer(&mut out, &v)?;
        writeln!(out)?;
    } else {
        out.write_all(holdup_render::latency::render_explain(op, &peaks).as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}
