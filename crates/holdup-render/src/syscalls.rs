//! `holdup syscalls` as text: per process a table of calls, the blocked
//! time by wait reason × call (DeBox Table 4), call sites, log2 histograms;
//! then the slowest invocations, each broken down (DeBox Figure 4). As
//! JSON: schema `holdup.syscalls/1`.

use holdup_analysis::syscalls::{CallStats, Invocation, ProcessStats, SyscallReport};
use serde::Serialize;
use std::io::{self, Write};

/// `holdup.syscalls/1`: the schema's name, then the report's fields.
#[derive(Serialize)]
struct JsonSyscalls<'a> {
    schema: &'static str,
    #[serde(flatten)]
    report: &'a SyscallReport,
}

/// Write `holdup.syscalls/1`, pretty-printed.
pub fn write_json(r: &SyscallReport, out: impl Write) -> serde_json::Result<()> {
    let json = JsonSyscalls {
        schema: "holdup.syscalls/1",
        report: r,
    };
    serde_json::to_writer_pretty(out, &json)
}

/// A duration with a unit that keeps three significant digits.
pub fn dur(ns: u64) -> String {
    let n = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", n / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", n / 1e6)
    } else {
        format!("{:.3} s", n / 1e9)
    }
}

fn pct(n: u64, total: u64) -> String {
    if total == 0 || n == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * n as f64 / total as f64)
    }
}

/// Calls shown per process in the wait-reason table (most blocked first).
const TABLE_CALLS: usize = 6;
/// Sites shown per call.
const SITES: usize = 3;
const BAR: usize = 40;
/// Histograms shown per process (calls with the most time first).
const HISTOGRAMS: usize = 8;

pub fn render(out: &mut impl Write, r: &SyscallReport) -> io::Result<()> {
    writeln!(
        out,
        "# holdup syscalls: {} recorded; every call counted; kept whole: calls ≥ {}, blocked or with a major fault, and 1 in {} of the rest ({} kept)",
        dur(r.duration_ns),
        dur(r.keep_ns),
        r.sample_every,
        r.kept
    )?;
    if r.lost_events > 0 {
        writeln!(out, "# {} events lost while recording", r.lost_events)?;
    }
    if let Some(d) = crate::report::dropped_line(r.dropped.iter().map(|(w, n)| (w.as_str(), *n))) {
        writeln!(out, "# {d}")?;
    }
    for p in &r.processes {
        process(out, p)?;
    }
    if !r.slowest.is_empty() {
        writeln!(out)?;
        writeln!(out, "# slowest {} invocations", r.slowest.len())?;
        for (i, inv) in r.slowest.iter().enumerate() {
            invocation(out, i + 1, inv)?;
        }
    }
    Ok(())
}

fn process(out: &mut impl Write, p: &ProcessStats) -> io::Result<()> {
    writeln!(out)?;
    let total: u64 = p.calls.iter().fold(0u64, |s, c| s.saturating_add(c.count));
    writeln!(out, "# {} pid {}: {} system calls", p.comm, p.pid, total)?;
    writeln!(
        out,
        "  {:<18} {:>9} {:>10} {:>10} {:>10} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
        "call",
        "count",
        "total",
        "p50",
        "p99",
        "on-cpu",
        "io",
        "lock",
        "sched",
        "other",
        "minflt",
        "majflt"
    )?;
    for c in &p.calls {
        let b = &c.blocked_ns;
        writeln!(
            out,
            "  {:<18} {:>9} {:>10} {:>10} {:>10} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
            c.name,
            c.count,
            dur(c.total_ns),
            dur(c.p50_ns),
            dur(c.p99_ns),
            pct(c.total_ns.saturating_sub(b.total()), c.total_ns),
            pct(b.io, c.total_ns),
            pct(b.lock, c.total_ns),
            pct(b.sched, c.total_ns),
            pct(b.other, c.total_ns),
            c.page_faults.minor,
            c.page_faults.major
        )?;
    }
    reason_table(out, p)?;
    let with_sites: Vec<&CallStats> = p.calls.iter().filter(|c| !c.sites.is_empty()).collect();
    if !with_sites.is_empty() {
        writeln!(
            out,
            "  call sites (count and time estimated from kept calls):"
        )?;
        for c in with_sites {
            for s in c.sites.iter().take(SITES) {
                writeln!(
                    out,
                    "    {:<18} {:>9} {:>10}  {}",
                    c.name,
                    s.count,
                    dur(s.total_ns),
                    s.site
                )?;
            }
        }
    }
    writeln!(out, "  latency histograms (log2):")?;
    for c in p.calls.iter().take(HISTOGRAMS) {
        histogram(out, c)?;
    }
    if p.calls.len() > HISTOGRAMS {
        writeln!(
            out,
            "    ({} calls with less time not shown; --json has every histogram)",
            p.calls.len() - HISTOGRAMS
        )?;
    }
    Ok(())
}

/// Reason × call: the share of each call's sleeping time per wait reason.
fn reason_table(out: &mut impl Write, p: &ProcessStats) -> io::Result<()> {
    let mut calls: Vec<&CallStats> = p.calls.iter().filter(|c| !c.reasons.is_empty()).collect();
    if calls.is_empty() {
        return Ok(());
    }
    // Saturating: the times come from the trace, which may be crafted.
    let slept = |c: &CallStats| {
        c.reasons
            .iter()
            .fold(0u64, |s, r| s.saturating_add(r.blocked_ns))
    };
    calls.sort_by_key(|c| std::cmp::Reverse(slept(c)));
    calls.truncate(TABLE_CALLS);
    let mut reasons: Vec<(&str, u64)> = Vec::new();
    for c in &calls {
        for r in &c.reasons {
            match reasons.iter_mut().find(|(n, _)| *n == r.reason) {
                Some(e) => e.1 = e.1.saturating_add(r.blocked_ns),
                None => reasons.push((&r.reason, r.blocked_ns)),
            }
        }
    }
    reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    writeln!(
        out,
        "  blocked time by wait reason (share of each call's sleeping time):"
    )?;
    write!(out, "    {:<28}", "reason")?;
    for c in &calls {
        write!(out, " {:>12}", c.name)?;
    }
    writeln!(out)?;
    for (reason, _) in reasons {
        write!(out, "    {reason:<28}")?;
        for c in &calls {
            let n = c
                .reasons
                .iter()
                .find(|r| r.reason == reason)
                .map_or(0, |r| r.blocked_ns);
            write!(out, " {:>12}", pct(n, slept(c)))?;
        }
        writeln!(out)?;
    }
    write!(out, "    {:<28}", "total asleep")?;
    for c in &calls {
        write!(out, " {:>12}", dur(slept(c)))?;
    }
    writeln!(out)
}

fn histogram(out: &mut impl Write, c: &CallStats) -> io::Result<()> {
    writeln!(out, "    {} ({} calls)", c.name, c.count)?;
    let max = c.histogram.iter().map(|b| b.count).max().unwrap_or(0);
    for b in &c.histogram {
        let n = if max == 0 {
            0
        } else {
            ((b.count as f64 / max as f64) * BAR as f64).ceil() as usize
        };
        writeln!(
            out,
            "      {:>10} .. {:<10} {:>9} {}",
            dur(b.lo_ns),
            dur(b.hi_ns),
            b.count,
            "█".repeat(n)
        )?;
    }
    Ok(())
}

fn invocation(out: &mut impl Write, i: usize, inv: &Invocation) -> io::Result<()> {
    let b = &inv.blocked_ns;
    writeln!(
        out,
        "{i:>3}. {} {}:{} at +{}: {} — on CPU {}, io {}, lock {}, runqueue {}, other {}",
        inv.name,
        inv.comm,
        inv.tid,
        dur(inv.start_ns),
        dur(inv.wall_ns),
        dur(inv.on_cpu_ns),
        dur(b.io),
        dur(b.lock),
        dur(b.sched),
        dur(b.other)
    )?;
    writeln!(
        out,
        "     sleeps {}; longest: {}{}{}; page faults {} minor, {} major",
        inv.sleeps,
        inv.reason.as_deref().unwrap_or("-"),
        inv.waker
            .as_deref()
            .map(|w| format!(", woken by {w}"))
            .unwrap_or_default(),
        if inv.contenders > 0 {
            format!(", {} contenders", inv.contenders)
        } else {
            String::new()
        },
        inv.page_faults.minor,
        inv.page_faults.major
    )?;
    if let Some(site) = &inv.site {
        writeln!(out, "     called from {site}")?;
    }
    if !inv.kernel_stack.is_empty() {
        writeln!(out, "     kernel: {}", inv.kernel_stack.join(" ← "))?;
    }
    if !inv.user_stack.is_empty() {
        writeln!(out, "     user:   {}", inv.user_stack.join(" ← "))?;
    }
    Ok(())
}
