//! What counting the progress points costs, and points nobody visits.
//!
//! A visit counted by a uprobe is a trap into the kernel (two where the
//! kernel single-steps the probed instruction), and its time is the
//! program's: a point visited 75 000 times a second per thread can take
//! half the program's CPU, and the predictions are then of another
//! program. So the cost of a visit is measured when the run starts, on a
//! probe of the same kind in this process, and said; two seconds in, a
//! point whose visits cost more than 5% of the program's CPU time is
//! warned about, naming a caller visited less often that could count
//! progress instead (`callers`), and one without any visit ends the run:
//! a misspelt or never-called place would otherwise give an empty profile
//! after the whole run.

use super::callers;
use super::probes::{closest_list, near_names, Probe, Trap};
use anyhow::bail;
use holdup_bpf::progress::{Counted, PointCounter, Source};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// When the points are checked.
const CHECK_AFTER: Duration = Duration::from_secs(2);

/// Visits may cost this share of the program's CPU time unwarned.
const OVERHEAD_WARNING: f64 = 0.05;

// Functions whose first instruction the kernel emulates (a push), skips
// (a USDT probe's nop) or single-steps (a mov): a uprobe on them costs
// what a visit of a probe of that kind costs the program.
std::arch::global_asm!(
    ".text",
    ".globl holdup_visit_emulated",
    ".type holdup_visit_emulated,@function",
    "holdup_visit_emulated:",
    "push rbx",
    "pop rbx",
    "ret",
    ".size holdup_visit_emulated, .-holdup_visit_emulated",
    ".globl holdup_visit_nop",
    ".type holdup_visit_nop,@function",
    "holdup_visit_nop:",
    "nop",
    "ret",
    ".size holdup_visit_nop, .-holdup_visit_nop",
    ".globl holdup_visit_stepped",
    ".type holdup_visit_stepped,@function",
    "holdup_visit_stepped:",
    "mov rax, rdi",
    "ret",
    ".size holdup_visit_stepped, .-holdup_visit_stepped",
);

extern "C" {
    fn holdup_visit_emulated();
    fn holdup_visit_nop();
    fn holdup_visit_stepped();
}

/// Nanoseconds `f` takes per call, the fastest of a few rounds of `n`
/// (the machine may be busy: the fastest round is the least disturbed).
fn per_call_ns(n: u32, f: impl Fn()) -> f64 {
    (0..5)
        .map(|_| {
            let t0 = Instant::now();
            for _ in 0..n {
                f();
            }
            t0.elapsed().as_nanos() as f64 / f64::from(n)
        })
        .fold(f64::INFINITY, f64::min)
}

/// The file offset of code at `addr` of this process, from its maps.
fn own_file_offset(addr: u64) -> Option<(PathBuf, u64)> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (start, end) = f.first()?.split_once('-')?;
        let (start, end) = (
            u64::from_str_radix(start, 16).ok()?,
            u64::from_str_radix(end, 16).ok()?,
        );
        let offset = u64::from_str_radix(f.get(2)?, 16).ok()?;
        (start <= addr && addr < end)
            .then(|| Some((PathBuf::from(f.get(5)?), addr - start + offset)))?
    })
}

/// What a uprobe visit costs here, in ns: calls of our own function of
/// the same kind timed with a counting uprobe on it and without.
fn uprobe_visit_ns(trap: Trap) -> Option<f64> {
    let f: unsafe extern "C" fn() = match trap {
        Trap::Emulated => holdup_visit_emulated,
        Trap::Nop => holdup_visit_nop,
        Trap::SingleStepped => holdup_visit_stepped,
    };
    let call = || unsafe { std::hint::black_box(f)() };
    let (path, offset) = own_file_offset(f as usize as u64)?;
    let n = if trap == Trap::SingleStepped {
        2_000
    } else {
        20_000
    };
    let before = per_call_ns(n, call);
    let counters = holdup_bpf::perf::uprobe_counters(&path, offset).ok()?;
    let probed = per_call_ns(n, call);
    drop(counters);
    let bare = before.min(per_call_ns(n, call));
    Some((probed - bare).max(0.0))
}

/// What a visit counted in BPF costs here, in ns: `getppid` timed with a
/// system-call point on it that counts this process, and without.
fn kernel_visit_ns() -> Option<f64> {
    const GETPPID: u32 = 110;
    let call = || unsafe {
        libc::getppid();
    };
    let before = per_call_ns(50_000, call);
    let counter = PointCounter::start(&Source::Syscall(GETPPID), Counted::Tracked).ok()?;
    counter.track(std::process::id()).ok()?;
    let counted = per_call_ns(50_000, call);
    let visited = counter.visits() > 0;
    drop(counter);
    let bare = before.min(per_call_ns(50_000, call));
    visited.then(|| (counted - bare).max(0.0))
}

/// The progress points of a run, watched from its start.
pub struct Watch {
    start: Instant,
    checked: bool,
    /// Per probe and counter, the measured cost of a visit in ns.
    costs: Vec<Vec<Option<f64>>>,
    /// The program whose CPU time the visits are compared with.
    pid: Option<u32>,
    /// The command, ended when the check fails (never -p's processes).
    command: Option<u32>,
    program: Option<PathBuf>,
}

impl Watch {
    /// Measure what a visit of each point costs, and say it.
    pub fn new(probes: &[Probe], program: Option<PathBuf>) -> Watch {
        // Measured once per kind: None is BPF's count, no trap.
        let mut measured: Vec<(Option<Trap>, Option<f64>)> = Vec::new();
        let mut costs = Vec::new();
        for p in probes {
            let mut of_probe = Vec::new();
            for (c, label) in p.counters().zip(p.counter_labels()) {
                let trap = c.traps();
                let cost = match measured.iter().find(|(t, _)| *t == trap) {
                    Some(&(_, cost)) => cost,
                    None => {
                        let cost = trap.map_or_else(kernel_visit_ns, uprobe_visit_ns);
                        measured.push((trap, cost));
                        cost
                    }
                };
                let how = match trap {
                    None => "counted in BPF",
                    Some(Trap::Emulated) => "a uprobe's trap",
                    Some(Trap::Nop) => "a uprobe's trap on a USDT probe's nop",
                    Some(Trap::SingleStepped) => "a uprobe's trap and a single-step",
                };
                match cost {
                    Some(ns) => eprintln!(
                        "holdup causal: {label}: a visit costs ~{} ({how}, measured here)",
                        show_ns(ns)
                    ),
                    None => eprintln!(
                        "holdup causal: {label}: the cost of a visit ({how}) could not be measured"
                    ),
                }
                of_probe.push(cost);
            }
            costs.push(of_probe);
        }
        Watch {
            start: Instant::now(),
            checked: false,
            costs,
            pid: None,
            command: None,
            program,
        }
    }

    /// The program has started: its CPU time is `pid`'s; `command`, if
    /// ours to end, is ended when a point has no visits.
    pub fn started(&mut self, pid: Option<u32>, command: Option<u32>) {
        self.start = Instant::now();
        self.pid = pid;
        self.command = command;
    }

    /// Two seconds in: an error for a point without visits (the command
    /// is ended; the profile keeps what was written), a warning for one
    /// whose visits cost more than 5% of the program's CPU time.
    pub fn check(&mut self, probes: &[Probe]) -> anyhow::Result<()> {
        if self.checked || self.start.elapsed() < CHECK_AFTER {
            return Ok(());
        }
        self.checked = true;
        let elapsed_ns = self.start.elapsed().as_nanos() as f64;
        let cpu_ns = match self.pid {
            Some(pid) => process_cpu_ns(pid),
            None => Some(elapsed_ns * online_cpus() as f64),
        };
        for (p, costs) in probes.iter().zip(&self.costs) {
            for (c, cost) in p.counters().zip(costs) {
                let visits = c.count();
                if visits == 0 {
                    if let Some(pid) = self.command {
                        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
                    }
                    let near = near_names(self.program.as_deref(), p.name());
                    bail!(
                        "progress point {}: no visits in the first {} s of the run{}",
                        p.name(),
                        CHECK_AFTER.as_secs(),
                        closest_list(&near)
                    );
                }
                let (Some(cost), Some(cpu), Some(_)) = (cost, cpu_ns, c.traps()) else {
                    continue;
                };
                let share = visits as f64 * cost / cpu.max(1.0);
                if share > OVERHEAD_WARNING {
                    let per_s = visits as f64 * 1e9 / elapsed_ns;
                    let instead = match callers::rarer_caller(
                        c.sites(),
                        per_s,
                        share,
                        OVERHEAD_WARNING,
                        || c.count(),
                    ) {
                        Some(caller) => format!(
                            "its caller {} ({:.0} visits a second): --progress {}",
                            caller.name, caller.visits_per_s, caller.name
                        ),
                        None => "a place visited less often".to_string(),
                    };
                    eprintln!(
                        "holdup causal: warning: progress point {}: {per_s:.0} visits a second at ~{} each take ~{:.0}% of the program's CPU time, and the predictions are of that slower program: {instead}, or a syscall: or tracepoint: point (no trap), perturbs it less",
                        p.name(),
                        show_ns(*cost),
                        share * 100.0
                    );
                }
            }
        }
        Ok(())
    }
}

fn show_ns(ns: f64) -> String {
    if ns < 10.0 {
        // Below what timing a loop on a shared machine resolves.
        "under 10 ns".to_string()
    } else if ns >= 1000.0 {
        format!("{:.1} µs", ns / 1000.0)
    } else {
        format!("{ns:.0} ns")
    }
}

fn online_cpus() -> usize {
    holdup_bpf::perf::online_cpus().map_or(1, |c| c.len().max(1))
}

/// User and system CPU time of process `pid` so far (all its threads).
fn process_cpu_ns(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name, which may hold spaces: fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks * 1e9 / hz)
}
