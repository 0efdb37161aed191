//! Reading a trace for any command: warnings for damage and lost events,
//! and the recorder's notes, are printed once, here, so that no command
//! hides them.

use holdup_trace::Trace;
use std::path::Path;

/// Load a trace; a damaged tail or lost events are reported on stderr.
pub fn load_trace(path: &Path) -> anyhow::Result<Trace> {
    let trace = Trace::load(path).map_err(anyhow::Error::new)?;
    if let Some(d) = &trace.damage {
        eprintln!("holdup: warning: {}: {d}", path.display());
    }
    if trace.finish.is_none() && trace.damage.is_none() {
        eprintln!(
            "holdup: warning: {}: the recording did not finish cleanly (recorder killed?); symbols may be missing",
            path.display()
        );
    }
    let lost = trace.lost_total();
    if lost > 0 {
        let what: Vec<String> = trace.lost.iter().map(|(w, n)| format!("{n} {w}")).collect();
        eprintln!(
            "holdup: warning: {lost} events were lost while recording ({}); counts are lower bounds (try a larger --ring-mb)",
            what.join(", ")
        );
    }
    for note in &trace.notes {
        eprintln!("holdup: note: {note}");
    }
    if trace.samples.is_empty() && trace.segments.is_empty() {
        anyhow::bail!("{}: the trace holds no samples", path.display());
    }
    Ok(trace)
}
