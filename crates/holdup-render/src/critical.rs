//! `holdup report --critical-path`: per thread, where its time finally
//! went once every wait another thread ended is followed down its chain.

use holdup_analysis::holder::{Activity, CriticalPath};
use std::io::{self, Write};

/// `keeper:12` for a thread's own activity; `waiter [L] → relay [B] →
/// feeder:14` for one reached through waits.
fn chain(a: &Activity) -> String {
    if a.via.is_empty() {
        return format!("{} (own)", a.thread);
    }
    let mut s = String::new();
    for v in &a.via {
        s.push_str(&format!("{} {} → ", v.thread, v.class.tag()));
    }
    s.push_str(&a.thread);
    s
}

fn what(a: &Activity) -> String {
    let site = a.site.clone().unwrap_or_else(|| "(no sample)".into());
    match (a.state, &a.woken_by) {
        ("interrupt" | "woken_from_outside", Some(w)) => format!("{site} (woken by {w})"),
        ("unwoken", _) => format!("{site} (not woken before the end)"),
        ("unrecorded", _) => "(a thread not in the recording)".into(),
        ("not_alive", _) => "(before its creation or after its exit)".into(),
        ("cut", _) => "(a cycle: damaged trace)".into(),
        _ => site,
    }
}

/// The critical paths, each activity at least `percent_limit` % of its
/// thread, then one line per note.
pub fn render(
    out: &mut impl Write,
    paths: &[CriticalPath],
    notes: &[String],
    percent_limit: f64,
) -> io::Result<()> {
    writeln!(
        out,
        "# holdup critical path: each wait another thread ended is replaced by what that thread did, down the chain of waits"
    )?;
    writeln!(
        out,
        "# [.] on CPU, [S] runnable, [I] [L] [B] waits that an interrupt, a thread outside the recording, or nothing ended"
    )?;
    for n in notes {
        writeln!(out, "# note: {n}")?;
    }
    for p in paths {
        writeln!(out, "#")?;
        writeln!(
            out,
            "# {} (pid {}): {:.0} samples",
            p.thread, p.pid, p.samples
        )?;
        writeln!(out, "#  Share  What                                               Who (through which waits)")?;
        let mut hidden = 0.0;
        for a in &p.activities {
            let share = 100.0 * a.samples / p.samples.max(1e-9);
            if share < percent_limit {
                hidden += share;
                continue;
            }
            writeln!(
                out,
                "  {share:>5.1}%  {} {:<48}  {}",
                a.tag(),
                what(a),
                chain(a)
            )?;
        }
        if hidden > 0.0 {
            writeln!(out, "  {hidden:>5.1}%  (below {percent_limit}% not shown)")?;
        }
    }
    Ok(())
}
