//! The perf-style text report: per thread, `Overhead Command Shared Object
//! Symbol`, on-CPU rows `[.]`/`[k]` and blocked rows `[I] [L] [S] [B]`.

use crate::advice;
use holdup_analysis::profile::{Profile, Tag, ThreadProfile};
use holdup_analysis::stacks::LockKind;
use holdup_trace::Class;
use std::io::{self, Write};

mod goroutines;
pub(crate) mod held;
mod json;
pub use json::{to_json, write_json};

#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// Hide rows below this share of their thread (percent).
    pub percent_limit: f64,
    /// Wait reasons and wakers shown under a blocked row.
    pub reasons: usize,
    /// Show inclusive (children) and self columns per function instead.
    pub children: bool,
    pub source: String,
}

impl Default for ReportOptions {
    fn default() -> Self {
        Self {
            percent_limit: 0.5,
            reasons: 3,
            children: false,
            source: "holdup.data".into(),
        }
    }
}

fn pct(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * n as f64 / total as f64
    }
}

/// `dropped: 12 samples (no thread state), …`, if anything was dropped.
pub fn dropped_line<'a>(dropped: impl IntoIterator<Item = (&'a str, u64)>) -> Option<String> {
    let d: Vec<(&str, u64)> = dropped.into_iter().collect();
    (!d.is_empty()).then(|| format!("dropped: {}", holdup_trace::dropped_text(&d)))
}

fn secs(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

fn thread_header(out: &mut impl Write, p: &Profile, t: &ThreadProfile) -> io::Result<()> {
    let total = t.samples.total();
    let covered = total.saturating_mul(p.period_ns);
    writeln!(out, "#")?;
    let who = match (t.threads, t.pid, t.tid) {
        (1, pid, tid) => format!("pid {pid} tid {tid}"),
        (n, 0, _) => format!("({n} threads)"),
        (n, pid, _) => format!("pid {pid} ({n} threads)"),
    };
    writeln!(
        out,
        "# {} {who}: {} samples × {:.3} ms = {} of {} lifetime ({:.1}%)",
        if t.comm.is_empty() { "?" } else { &t.comm },
        total,
        p.period_ns as f64 / 1e6,
        secs(covered),
        secs(t.lifetime_ns),
        pct(covered, t.lifetime_ns.max(1))
    )?;
    write!(out, "#  ")?;
    for c in Class::ALL {
        write!(out, " {} {:.1}%", c.name(), pct(t.samples.get(c), total))?;
        if c == Class::Lock && t.samples.lock > 0 {
            write!(
                out,
                " (mutex {:.1}%, signal {:.1}%",
                pct(t.lock_split.mutex, total),
                pct(t.lock_split.signal, total)
            )?;
            if t.lock_split.idle > 0 {
                write!(out, ", idle {:.1}%", pct(t.lock_split.idle, total))?;
            }
            if t.lock_split.gil > 0 {
                write!(out, ", GIL {:.1}%", pct(t.lock_split.gil, total))?;
            }
            write!(out, ")")?;
        }
        let idle_other = t.idle.other(&t.lock_split);
        if c == Class::Other && idle_other > 0 {
            write!(out, " (idle {:.1}%)", pct(idle_other, total))?;
        }
    }
    writeln!(out)?;
    let holder = holdup_analysis::holder::inside_the_lock(t).map(|i| advice::holder(&i));
    if let Some(a) = holder.or_else(|| advice::thread(t)) {
        writeln!(out, "# advice: {a}")?;
    }
    writeln!(out, "#")
}

fn rows(out: &mut impl Write, t: &ThreadProfile, o: &ReportOptions) -> io::Result<()> {
    let total = t.samples.total();
    let dso_w = t
        .rows
        .iter()
        .map(|r| r.dso.len())
        .max()
        .unwrap_or(13)
        .clamp(13, 30);
    let comm_w = t.comm.len().clamp(7, 16);
    writeln!(
        out,
        "# Overhead  {:<comm_w$}  {:<dso_w$}  Symbol",
        "Command", "Shared Object"
    )?;
    writeln!(
        out,
        "# ........  {}  {}  ......",
        ".".repeat(comm_w),
        ".".repeat(dso_w)
    )?;
    let mut hidden = 0u64;
    for r in &t.rows {
        let share = pct(r.weight, total);
        if share < o.percent_limit {
            hidden += r.weight;
            continue;
        }
        writeln!(
            out,
            "  {share:>7.2}%  {:<comm_w$}  {:<dso_w$}  {} {}",
            t.comm,
            r.dso,
            r.tag.as_str(),
            r.symbol
        )?;
        if matches!(r.tag, Tag::Blocked(_)) && o.reasons > 0 {
            let pad = " ".repeat(20 + comm_w + dso_w);
            let list = |items: Vec<(String, u64)>| {
                items
                    .into_iter()
                    .filter(|(_, n)| pct(*n, r.weight) >= 0.5)
                    .take(o.reasons)
                    .map(|(k, n)| format!("{k} {:.0}%", pct(n, r.weight)))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let reasons = list(
                r.wait_reasons
                    .iter()
                    .map(|(k, n)| (k.to_string(), *n))
                    .collect(),
            );
            if !reasons.is_empty() {
                match r.lock_kind {
                    Some(k) => writeln!(out, "{pad}wait ({}): {reasons}", k.name())?,
                    None => writeln!(out, "{pad}wait: {reasons}")?,
                }
            }
            let wakers = list(r.wakers.clone());
            if !wakers.is_empty() {
                // A mutex's waker is the holder that released it.
                let who = match r.lock_kind {
                    Some(LockKind::Mutex) => "held by",
                    Some(LockKind::Gil) => "GIL held by",
                    Some(LockKind::Signal) => "signalled by",
                    Some(LockKind::Idle) | None => "woken by",
                };
                writeln!(out, "{pad}{who}: {wakers}")?;
            }
            held::write(out, r, &pad, o.reasons)?;
        }
    }
    if hidden > 0 {
        writeln!(
            out,
            "  {:>7.2}%  (rows below {}% not shown)",
            pct(hidden, total),
            o.percent_limit
        )?;
    }
    Ok(())
}

fn children(out: &mut impl Write, t: &ThreadProfile, o: &ReportOptions) -> io::Result<()> {
    let total = t.samples.total();
    let dso_w = t
        .functions
        .iter()
        .map(|f| f.dso.len())
        .max()
        .unwrap_or(13)
        .clamp(13, 30);
    writeln!(
        out,
        "# Children      Self  {:<dso_w$}  Symbol",
        "Shared Object"
    )?;
    writeln!(out, "# ........  ........  {}  ......", ".".repeat(dso_w))?;
    for f in &t.functions {
        let inc = pct(f.total.total(), total);
        if inc < o.percent_limit {
            continue;
        }
        let tag = if f.dso == "[kernel.kallsyms]" {
            "[k]"
        } else {
            "[.]"
        };
        let mut mix = String::new();
        for c in Class::ALL {
            let n = f.total.get(c);
            if n > 0 {
                mix.push_str(&format!(" {}{:.0}%", c.tag(), pct(n, f.total.total())));
            }
        }
        writeln!(
            out,
            "  {inc:>7.2}%  {:>7.2}%  {:<dso_w$}  {tag} {}   ({})",
            pct(f.self_.total(), total),
            f.dso,
            f.symbol,
            mix.trim_start()
        )?;
    }
    Ok(())
}

pub fn render(out: &mut impl Write, p: &Profile, o: &ReportOptions) -> io::Result<()> {
    writeln!(
        out,
        "# holdup report of {}: {} threads, {} recorded, period {:.3} ms ({:.0} Hz), {} lost events{}",
        o.source,
        p.threads.iter().map(|t| t.threads).sum::<usize>(),
        secs(p.duration_ns),
        p.period_ns as f64 / 1e6,
        1e9 / p.period_ns.max(1) as f64,
        p.lost_events,
        dropped_line(p.dropped.iter().map(|(w, n)| (w.as_str(), *n)))
            .map_or(String::new(), |d| format!("; {d}"))
    )?;
    writeln!(
        out,
        "# on-CPU rows are [.] user / [k] kernel; blocked rows are [I] io, [L] lock, [S] runqueue, [B] other"
    )?;
    for t in &p.threads {
        thread_header(out, p, t)?;
        if o.children {
            children(out, t, o)?;
        } else {
            rows(out, t, o)?;
        }
    }
    goroutines::render(out, p, &p.goroutines)
}
