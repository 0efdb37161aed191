//! Progress points without recompiling: `--progress` and `--latency`
//! places counted outside the program. A function or a source line is
//! counted by a uprobe (one counting perf event per CPU: a trap a visit),
//! a USDT probe (`usdt:BINARY:PROVIDER:NAME`) by a uprobe on its nop;
//! `syscall:NAME` and `tracepoint:CAT:NAME` by a BPF program on the
//! tracepoint (no trap; `holdup_bpf::progress`). A preloaded runtime reads
//! the counters it inherits (named by the PROBES list); core-level runs
//! read them here.

use super::{inheritable, Config};
use anyhow::{bail, Context};
use holdup_bpf::progress::{Counted, PointCounter, Source};
use holdup_coz::names;
use holdup_coz::probe_list::{self, Count, ProbePoint};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// What a visit of a uprobe costs the program: a trap, and what the
/// kernel does with the probed instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trap {
    /// It emulates it (a push, a call, a jump).
    Emulated,
    /// A USDT probe's nop: nothing to emulate.
    Nop,
    /// It single-steps it: a second trap.
    SingleStepped,
}

/// One place's counter.
pub enum Counter {
    /// Per-CPU counting uprobes at `sites` (binary, file offset).
    Uprobe {
        fds: Vec<OwnedFd>,
        trap: Trap,
        sites: Vec<(PathBuf, u64)>,
    },
    /// Counted in BPF; `handed` is the copy of its map's fd that the
    /// program inherits.
    Kernel {
        counter: PointCounter,
        handed: OwnedFd,
    },
}

impl Counter {
    pub fn count(&self) -> usize {
        match self {
            Counter::Uprobe { fds, .. } => {
                holdup_bpf::counter_total(fds.iter().map(AsRawFd::as_raw_fd))
            }
            Counter::Kernel { counter, .. } => counter.visits() as usize,
        }
    }

    fn handed(&self) -> Count {
        match self {
            Counter::Uprobe { fds, .. } => {
                Count::Perf(fds.iter().map(AsRawFd::as_raw_fd).collect())
            }
            Counter::Kernel { handed, .. } => Count::Mapped(handed.as_raw_fd()),
        }
    }

    /// The trap a visit takes, if any.
    pub fn traps(&self) -> Option<Trap> {
        match self {
            Counter::Uprobe { trap, .. } => Some(*trap),
            Counter::Kernel { .. } => None,
        }
    }

    /// Where its uprobes are (none for a point counted in BPF).
    pub fn sites(&self) -> &[(PathBuf, u64)] {
        match self {
            Counter::Uprobe { sites, .. } => sites,
            Counter::Kernel { .. } => &[],
        }
    }
}

/// A progress point's counters.
pub enum Probe {
    Throughput {
        name: String,
        counter: Counter,
    },
    Latency {
        name: String,
        begin: Counter,
        end: Counter,
    },
}

impl Probe {
    pub fn name(&self) -> &str {
        match self {
            Probe::Throughput { name, .. } | Probe::Latency { name, .. } => name,
        }
    }

    /// What each of `counters()` counts, as the user named it: a latency
    /// point's `BEGIN,END` pair has its two functions said apart (one may
    /// be single-stepped and the other not).
    pub fn counter_labels(&self) -> Vec<String> {
        match self {
            Probe::Throughput { name, .. } => vec![format!("progress point {name}")],
            Probe::Latency { name, .. } => {
                let (begin, end) = name.split_once(',').unwrap_or((name, name));
                vec![
                    format!("latency point {name}, its start {begin}"),
                    format!("latency point {name}, its end {end}"),
                ]
            }
        }
    }

    /// (visits or arrivals, departures)
    pub fn counts(&self) -> (usize, usize) {
        match self {
            Probe::Throughput { counter, .. } => (counter.count(), 0),
            Probe::Latency { begin, end, .. } => (begin.count(), end.count()),
        }
    }

    /// Visits of a throughput point (None for a latency point).
    pub fn visits(&self) -> Option<usize> {
        match self {
            Probe::Throughput { counter, .. } => Some(counter.count()),
            Probe::Latency { .. } => None,
        }
    }

    pub fn counters(&self) -> impl Iterator<Item = &Counter> {
        let (a, b) = match self {
            Probe::Throughput { counter, .. } => (counter, None),
            Probe::Latency { begin, end, .. } => (begin, Some(end)),
        };
        std::iter::once(a).chain(b)
    }

    /// How the runtime is told about it.
    fn point(&self) -> ProbePoint {
        match self {
            Probe::Throughput { name, counter } => ProbePoint::Throughput {
                name: name.clone(),
                count: counter.handed(),
            },
            Probe::Latency { name, begin, end } => ProbePoint::Latency {
                name: name.clone(),
                begin: begin.handed(),
                end: end.handed(),
            },
        }
    }
}

/// Count the visits of process `pid` and its children at every point
/// counted in BPF (uprobes count every process that runs the code).
pub fn track(probes: &[Probe], pid: u32) -> anyhow::Result<()> {
    for c in probes.iter().flat_map(Probe::counters) {
        if let Counter::Kernel { counter, .. } = c {
            counter
                .track(pid)
                .context("cannot count the program's progress")?;
        }
    }
    Ok(())
}

/// The counters of every --progress and --latency place of `cfg`, by
/// default in `program`; `counted`: whose system calls and tracepoints.
pub fn open(cfg: &Config, program: Option<&Path>, counted: Counted) -> anyhow::Result<Vec<Probe>> {
    let mut probes = Vec::new();
    for spec in &cfg.progress {
        probes.push(Probe::Throughput {
            name: spec.clone(),
            counter: open_counter(program, spec, "--progress", counted)?,
        });
    }
    for pair in &cfg.latency {
        let Some((b, e)) = pair.split_once(',') else {
            bail!("--latency takes BEGIN,END, like 'start_request,finish_request'");
        };
        probes.push(Probe::Latency {
            name: pair.clone(),
            begin: open_counter(program, b, "--latency", counted)?,
            end: open_counter(program, e, "--latency", counted)?,
        });
    }
    Ok(probes)
}

/// The PROBES list that tells a preloaded runtime which inherited fds
/// count what.
pub fn list(probes: &[Probe]) -> String {
    let points: Vec<ProbePoint> = probes.iter().map(Probe::point).collect();
    probe_list::encode(&points)
}

/// What a spec counts in the kernel, if it is `syscall:NAME` or
/// `tracepoint:CAT:NAME` (`syscalls:sys_enter_NAME` is the system call).
fn kernel_source(spec: &str) -> Option<anyhow::Result<Source>> {
    let syscall = |name: &str| {
        holdup_analysis::syscalls::number(name)
            .map(Source::Syscall)
            .with_context(|| {
                let near = names::closest(name, holdup_analysis::syscalls::all_names());
                format!("no system call '{name}'{}", closest_list(&near))
            })
    };
    if let Some(name) = spec.strip_prefix("syscall:") {
        return Some(syscall(name));
    }
    let rest = spec.strip_prefix("tracepoint:")?;
    let Some((category, name)) = rest.split_once(':') else {
        return Some(Err(anyhow::anyhow!(
            "a tracepoint is tracepoint:CATEGORY:NAME, like tracepoint:block:block_rq_complete"
        )));
    };
    if let (Some(call), "syscalls") = (name.strip_prefix("sys_enter_"), category) {
        return Some(syscall(call));
    }
    let known = tracepoint_names();
    if !known.is_empty() && !known.iter().any(|k| k == name) {
        let near = names::closest(name, known.iter().map(String::as_str));
        return Some(Err(anyhow::anyhow!(
            "no tracepoint '{name}' in this kernel{}",
            closest_list(&near)
        )));
    }
    Some(Ok(Source::Tracepoint(name.to_string())))
}

/// Names close to what `spec` names, other than itself: what a user may
/// have meant by a point that nobody visits.
pub fn near_names(program: Option<&Path>, spec: &str) -> Vec<String> {
    let name = spec.rsplit(':').next().unwrap_or(spec);
    let mut near = if spec.starts_with("syscall:") || spec.starts_with("tracepoint:syscalls:") {
        let name = name.strip_prefix("sys_enter_").unwrap_or(name);
        names::closest(name, holdup_analysis::syscalls::all_names())
    } else if spec.starts_with("tracepoint:") {
        let known = tracepoint_names();
        names::closest(name, known.iter().map(String::as_str))
    } else if let Some(probe) = spec.strip_prefix("usdt:") {
        holdup_coz::usdt::near_probes(probe)
    } else {
        holdup_coz::probe::near_functions(program, spec)
    };
    near.retain(|n| n != name && !spec.ends_with(n.as_str()));
    near
}

pub fn closest_list(near: &[String]) -> String {
    if near.is_empty() {
        String::new()
    } else {
        format!("; closest: {}", near.join(", "))
    }
}

/// The kernel's tracepoints that BPF can attach to by name: the
/// `btf_trace_NAME` types of its BTF (empty if it cannot be read).
fn tracepoint_names() -> Vec<String> {
    const PREFIX: &[u8] = b"btf_trace_";
    let Ok(btf) = std::fs::read("/sys/kernel/btf/vmlinux") else {
        return Vec::new();
    };
    // Names are NUL-terminated in the BTF string section.
    btf.split(|&b| b == 0)
        .filter_map(|s| s.strip_prefix(PREFIX))
        .filter_map(|s| std::str::from_utf8(s).ok())
        .map(str::to_string)
        .collect()
}

/// The counter of a --progress or --latency place: in BPF for a system
/// call or tracepoint, else uprobes (one per CPU) on `FUNCTION` or
/// `FILE:LINE` of `program` unless the spec names its binary; a function
/// with several overloads or instantiations is counted at each.
fn open_counter(
    program: Option<&Path>,
    spec: &str,
    option: &str,
    counted: Counted,
) -> anyhow::Result<Counter> {
    if let Some(source) = kernel_source(spec) {
        let source = source.with_context(|| format!("{option} {spec}"))?;
        let counter = PointCounter::start(&source, counted)
            .with_context(|| format!("{option} {spec}: cannot count it in BPF"))?;
        let handed = inheritable(counter.visits_fd())?;
        return Ok(Counter::Kernel { counter, handed });
    }
    if let Some(probe) = spec.strip_prefix("usdt:") {
        return usdt_counter(probe, spec, option);
    }
    let sites = holdup_coz::probe::resolve(program, spec)
        .map_err(|e| anyhow::anyhow!("{option} {spec}: {e}"))?;
    if sites.len() > 1 {
        eprintln!(
            "holdup causal: {option} {spec}: {} functions answer to it (overloads or instantiations): counting visits to each",
            sites.len()
        );
    }
    let trap = if sites.iter().any(|s| s.single_stepped) {
        Trap::SingleStepped
    } else {
        Trap::Emulated
    };
    let mut fds = Vec::new();
    for site in &sites {
        fds.extend(
            holdup_bpf::perf::uprobe_counters(&site.binary, site.offset)
                .with_context(|| format!("{option} {spec}: cannot attach a uprobe"))?,
        );
    }
    let sites = sites.into_iter().map(|s| (s.binary, s.offset)).collect();
    Ok(Counter::Uprobe { fds, trap, sites })
}

/// A USDT probe's counter: a uprobe at each of its sites (a probe in
/// inlined code has several), raising its semaphore if it has one.
fn usdt_counter(probe: &str, spec: &str, option: &str) -> anyhow::Result<Counter> {
    let sites =
        holdup_coz::usdt::resolve(probe).map_err(|e| anyhow::anyhow!("{option} {spec}: {e}"))?;
    let mut fds = Vec::new();
    let mut trap = Trap::Nop;
    let places = sites
        .iter()
        .map(|s| (s.site.binary.clone(), s.site.offset))
        .collect();
    for s in &sites {
        if s.site.single_stepped {
            // Not the nop that <sys/sdt.h> puts there.
            trap = Trap::SingleStepped;
        }
        fds.extend(
            holdup_bpf::perf::uprobe_counters_raising(
                &s.site.binary,
                s.site.offset,
                s.semaphore_offset,
            )
            .with_context(|| format!("{option} {spec}: cannot attach a uprobe"))?,
        );
    }
    Ok(Counter::Uprobe {
        fds,
        trap,
        sites: places,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_points_are_told_from_uprobe_places() {
        assert!(kernel_source("handle_request").is_none());
        assert!(kernel_source("server:app.c:42").is_none());
        assert_eq!(
            kernel_source("syscall:pwrite64").unwrap().unwrap(),
            Source::Syscall(18)
        );
        assert_eq!(
            kernel_source("tracepoint:syscalls:sys_enter_fsync")
                .unwrap()
                .unwrap(),
            Source::Syscall(74)
        );
        let e = kernel_source("syscall:pwrite").unwrap().unwrap_err();
        assert!(
            e.to_string().contains("no system call 'pwrite'") && e.to_string().contains("pwrite64"),
            "{e}"
        );
        let e = kernel_source("tracepoint:sched").unwrap().unwrap_err();
        assert!(e.to_string().contains("CATEGORY:NAME"), "{e}");
    }

    /// The kernel's BTF lists its tracepoints; a misspelt one is refused
    /// with the closest names.
    #[test]
    fn tracepoints_are_checked_against_the_kernels() {
        if tracepoint_names().is_empty() {
            eprintln!("no readable /sys/kernel/btf/vmlinux: not checked");
            return;
        }
        assert!(tracepoint_names().iter().any(|n| n == "sched_switch"));
        assert_eq!(
            kernel_source("tracepoint:sched:sched_switch")
                .unwrap()
                .unwrap(),
            Source::Tracepoint("sched_switch".into())
        );
        let e = kernel_source("tracepoint:sched:sched_swich")
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(e.contains("closest: ") && e.contains("sched_switch"), "{e}");
    }
}
