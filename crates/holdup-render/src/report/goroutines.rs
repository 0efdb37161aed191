//! The goroutine rows of a report (recorded with `--goroutines`): per
//! process and start function, where its goroutines' parked time went.

use super::{pct, secs};
use holdup_analysis::goroutines::{GoKind, Goroutines, Named};
use holdup_analysis::profile::Profile;
use std::io::{self, Write};

/// `a 60%, b 40%` of the first few, with shares of `total`.
fn shares(v: &[Named], total: u64) -> String {
    let parts: Vec<String> = v
        .iter()
        .take(4)
        .map(|n| format!("{} {:.0}%", n.name, pct(n.samples, total)))
        .collect();
    parts.join(", ")
}

pub fn render(out: &mut impl Write, p: &Profile, g: &Goroutines) -> io::Result<()> {
    if g.rows.is_empty() {
        return Ok(());
    }
    writeln!(out, "#")?;
    writeln!(
        out,
        "# goroutines: time parked in the Go scheduler, by start function ({} samples of the runtime's own goroutines set aside; the OS threads' idle time in the scheduler is in their rows above)",
        g.set_aside
    )?;
    for r in &g.rows {
        let total = r.samples.total();
        writeln!(out, "#")?;
        writeln!(
            out,
            "# {} pid {}: {} goroutine{}, {} samples × {:.3} ms = {} parked",
            r.function,
            r.pid,
            r.goroutines,
            if r.goroutines == 1 { "" } else { "s" },
            total,
            p.period_ns as f64 / 1e6,
            secs(total.saturating_mul(p.period_ns)),
        )?;
        let mut mix = Vec::new();
        for k in [
            GoKind::Contention,
            GoKind::Signal,
            GoKind::Io,
            GoKind::Other,
        ] {
            mix.push(format!("{} {:.1}%", k.name(), pct(r.samples.get(k), total)));
        }
        mix.push(format!("runnable {:.1}%", pct(r.samples.runnable, total)));
        writeln!(out, "#   {}", mix.join(" "))?;
        for reason in &r.reasons {
            writeln!(
                out,
                "    {:>6.2}%  [{}] {}",
                pct(reason.samples, total),
                reason.kind.name(),
                reason.name
            )?;
        }
        if !r.wakers.is_empty() {
            let readied: u64 = r.wakers.iter().map(|w| w.samples).sum();
            let verb = if r.samples.contention * 2 > total {
                "held by"
            } else {
                "readied by"
            };
            writeln!(out, "             {verb}: {}", shares(&r.wakers, readied))?;
        }
        if !r.waited_on.is_empty() {
            writeln!(
                out,
                "             waited on: {}",
                shares(&r.waited_on, r.samples.io)
            )?;
        }
        if !r.sites.is_empty() {
            writeln!(out, "             at: {}", shares(&r.sites, total))?;
        }
    }
    Ok(())
}
