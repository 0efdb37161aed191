//! Progress points without recompiling: `--progress` and `--latency`
//! places counted by uprobes, one counting perf event per CPU each. A
//! preloaded runtime reads the counters it inherits (named by the PROBES
//! list); core-level runs read them here.

use super::Config;
use anyhow::{bail, Context};
use holdup_coz::probe_list::{self, ProbePoint};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;

/// A progress point's counters.
pub enum Probe {
    Throughput {
        name: String,
        fds: Vec<OwnedFd>,
    },
    Latency {
        name: String,
        begin: Vec<OwnedFd>,
        end: Vec<OwnedFd>,
    },
}

fn read_count(fds: &[OwnedFd]) -> usize {
    holdup_bpf::counter_total(fds.iter().map(AsRawFd::as_raw_fd))
}

fn raw(fds: &[OwnedFd]) -> Vec<RawFd> {
    fds.iter().map(AsRawFd::as_raw_fd).collect()
}

impl Probe {
    pub fn name(&self) -> &str {
        match self {
            Probe::Throughput { name, .. } | Probe::Latency { name, .. } => name,
        }
    }

    /// (visits or arrivals, departures)
    pub fn counts(&self) -> (usize, usize) {
        match self {
            Probe::Throughput { fds, .. } => (read_count(fds), 0),
            Probe::Latency { begin, end, .. } => (read_count(begin), read_count(end)),
        }
    }

    /// Visits of a throughput point (None for a latency point).
    pub fn visits(&self) -> Option<usize> {
        match self {
            Probe::Throughput { fds, .. } => Some(read_count(fds)),
            Probe::Latency { .. } => None,
        }
    }

    /// How the runtime is told about it.
    fn point(&self) -> ProbePoint {
        match self {
            Probe::Throughput { name, fds } => ProbePoint::Throughput {
                name: name.clone(),
                fds: raw(fds),
            },
            Probe::Latency { name, begin, end } => ProbePoint::Latency {
                name: name.clone(),
                begin: raw(begin),
                end: raw(end),
            },
        }
    }
}

/// The counters of every --progress and --latency place of `cfg`, by
/// default in `program`.
pub fn open(cfg: &Config, program: Option<&Path>) -> anyhow::Result<Vec<Probe>> {
    let mut probes = Vec::new();
    for spec in &cfg.progress {
        probes.push(Probe::Throughput {
            name: spec.clone(),
            fds: open_counter(program, spec, "--progress")?,
        });
    }
    for pair in &cfg.latency {
        let Some((b, e)) = pair.split_once(',') else {
            bail!("--latency takes BEGIN,END, like 'start_request,finish_request'");
        };
        probes.push(Probe::Latency {
            name: pair.clone(),
            begin: open_counter(program, b, "--latency")?,
            end: open_counter(program, e, "--latency")?,
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

/// The uprobe counters (one per CPU) of a --progress or --latency place,
/// `FUNCTION` or `FILE:LINE` of `program` unless the spec names its binary;
/// a function with several overloads or instantiations is counted at each.
fn open_counter(program: Option<&Path>, spec: &str, option: &str) -> anyhow::Result<Vec<OwnedFd>> {
    let sites = holdup_coz::probe::resolve(program, spec)
        .map_err(|e| anyhow::anyhow!("{option} {spec}: {e}"))?;
    if sites.len() > 1 {
        eprintln!(
            "holdup causal: {option} {spec}: {} functions answer to it (overloads or instantiations): counting visits to each",
            sites.len()
        );
    }
    if sites.iter().any(|s| s.single_stepped) {
        // Its time counts in the program's, which waters down predictions
        // when visits are microseconds apart.
        eprintln!(
            "holdup causal: note: {option} {spec}: the kernel single-steps the probed instruction (it emulates only pushes, nops, calls and jumps), ~20 µs a visit on some virtual machines; a function that starts with a push, or a line at a call, counts visits cheaply"
        );
    }
    let mut fds = Vec::new();
    for site in sites {
        fds.extend(
            holdup_bpf::perf::uprobe_counters(&site.binary, site.offset)
                .with_context(|| format!("{option} {spec}: cannot attach a uprobe"))?,
        );
    }
    Ok(fds)
}
