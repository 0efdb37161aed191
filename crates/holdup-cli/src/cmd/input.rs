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
    let (lost, dropped) =
        holdup_trace::split_lost(trace.lost.iter().map(|(w, &n)| (w.as_str(), n)));
    if lost > 0 {
        let what: Vec<String> = trace
            .lost
            .iter()
            .filter(|(w, n)| **n > 0 && holdup_trace::lost_cause(w).is_none())
            .map(|(w, n)| format!("{n} {w}"))
            .collect();
        eprintln!(
            "holdup: warning: {lost} events were lost while recording ({}); counts are lower bounds (try a larger --ring-mb)",
            what.join(", ")
        );
    }
    if !dropped.is_empty() {
        eprintln!(
            "holdup: warning: the recorder dropped {} while recording; counts are lower bounds",
            holdup_trace::dropped_text(&dropped)
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
