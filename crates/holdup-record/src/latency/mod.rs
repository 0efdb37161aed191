//! `holdup latency`'s recorder: log2 latency histograms of system calls,
//! kernel and user functions, block requests and lock waits, aggregated
//! in the kernel (OSprof), with DARC's call paths below user functions.
//!
//! [`record`] takes a plain [`Config`], records in the shared
//! [`crate::recording`] loop and writes the latency file; what to say of
//! it is the caller's.

pub mod darc;
pub mod names;
pub mod spec;

use crate::recording::{Flow, Recording, Stop, Until};
use anyhow::Context;
use holdup_bpf::latency::{HistRow, LatencyOptions, LatencyProbe, UfuncRole, UserFunc};
use holdup_bpf::{monotonic_ns, Target};
use holdup_symbolize::callgraph::plan::Descent;
use holdup_symbolize::callgraph::{Follow, Func};
use holdup_trace::latency::{write_latency, CalleeTime, IntervalHistogram, LatencyData};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A latency recording, as the command line asks for it.
#[derive(Clone, Debug)]
pub struct Config {
    /// The latency file to write.
    pub output: PathBuf,
    /// The command to run (none with existing processes or the system).
    pub command: Vec<String>,
    pub target: Target,
    pub duration: Option<Duration>,
    /// Time-lapse resolution kept in the file.
    pub interval: Duration,
    /// Time every system call (also when nothing else is timed).
    pub syscalls: bool,
    pub block: bool,
    pub lock: bool,
    pub kfuncs: Vec<String>,
    /// User functions, as [`spec::user_funcs`] resolves them.
    pub funcs: Vec<UserFunc>,
    /// DARC's call paths below the user functions, if any.
    pub callees: Option<Callees>,
    /// End once each peak of every user function had this many calls.
    pub decision_ops: Option<u64>,
}

/// How far below each user function the call paths are timed.
#[derive(Clone, Debug)]
pub struct Callees {
    pub depth: usize,
    pub follow: Follow,
    /// Calls a recording's samples showed ([`darc::sampled_edges`]).
    pub sampled: Vec<(Func, Func)>,
    /// Callees to go down through first.
    pub resume: Vec<String>,
}

/// What a recording wrote, and how it ended.
pub struct Outcome {
    /// As written; `requested` names the operations asked for, each of
    /// which should have been called.
    pub data: LatencyData,
    /// DARC's decision point ended the recording.
    pub decided: bool,
    pub stop: Stop,
    /// The command, which runs on after a decision.
    pub recording: Recording,
}

/// Finished intervals moved out of the kernel map as the recording goes,
/// so that a long one does not fill it.
#[derive(Default)]
struct Taken(HashMap<(u32, u16, u32, u32), HistRow>);

impl Taken {
    fn add(&mut self, rows: Vec<HistRow>) {
        for r in rows {
            match self.0.entry((r.tgid, r.kind, r.id, r.interval)) {
                std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().merge(&r),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(r);
                }
            }
        }
    }
}

/// The recorder's settings: the user functions with the callees the call
/// tree adds, and the tree itself (and its description for the file).
fn options(cfg: &Config) -> anyhow::Result<(LatencyOptions, Vec<holdup_trace::latency::CallPath>)> {
    let mut ufuncs = cfg.funcs.clone();
    let (ftree, fnodes) = match &cfg.callees {
        Some(c) => {
            let descent = Descent {
                depth: c.depth,
                follow: c.follow,
                sampled: &c.sampled,
                resume: &c.resume,
            };
            darc::call_paths(&mut ufuncs, &descent)?
        }
        None => Default::default(),
    };
    spec::place(&mut ufuncs)?;
    let syscalls =
        cfg.syscalls || (cfg.kfuncs.is_empty() && ufuncs.is_empty() && !cfg.block && !cfg.lock);
    let opts = LatencyOptions {
        target: cfg.target.clone(),
        follow_children: true,
        start_ns: 0,
        interval_ns: cfg.interval.as_nanos() as u64,
        syscalls,
        block: cfg.block,
        lock: cfg.lock,
        kfuncs: cfg.kfuncs.clone(),
        ufuncs,
        ftree,
        slow_ns: 0,
    };
    Ok((opts, fnodes))
}

/// Record as `cfg` says and write the latency file.
pub fn record(cfg: &Config) -> anyhow::Result<Outcome> {
    let (mut opts, fnodes) = options(cfg)?;
    let until = Until::of(&cfg.target, cfg.duration);
    let mut recording = Recording::launch(&cfg.command, until)?;
    opts.start_ns = monotonic_ns();
    let start_unix_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let probe = LatencyProbe::start(&opts)?;
    if let Target::Pids(pids) = &cfg.target {
        for &pid in pids {
            probe.track(pid)?;
        }
    }
    if let Some(pid) = recording.pid() {
        probe.track(pid)?;
    }
    recording.start()?;
    let mut taken = Taken::default();
    let mut last_take = Instant::now();
    let mut last_decision = Instant::now();
    let stop = recording.run(Duration::from_millis(5), &[], || {
        if last_take.elapsed() >= Duration::from_secs(1) {
            let current = (monotonic_ns() - opts.start_ns) / opts.interval_ns;
            taken.add(probe.take_before(current.min(u32::MAX as u64) as u32)?);
            last_take = Instant::now();
        }
        if let Some(n) = cfg.decision_ops {
            if last_decision.elapsed() >= Duration::from_millis(100) {
                let current = probe.read()?;
                let rows = taken.0.values().chain(&current);
                if darc::roots_decided(rows, &opts.ufuncs, n) {
                    return Ok(Flow::Done);
                }
                last_decision = Instant::now();
            }
        }
        Ok(Flow::Continue)
    })?;
    let decided = stop == Stop::Done;
    let duration_ns = monotonic_ns() - opts.start_ns;
    let data = LatencyData {
        holdup_version: env!("CARGO_PKG_VERSION").to_string(),
        command: cfg.command.clone(),
        start_unix_ns,
        duration_ns,
        interval_ns: opts.interval_ns,
        fnodes,
        decision_ops: if decided {
            cfg.decision_ops.unwrap_or(0)
        } else {
            0
        },
        ..from_kernel(probe, taken, &opts)?
    };
    let file = holdup_trace::create_private(&cfg.output)
        .with_context(|| format!("cannot create {}", cfg.output.display()))?;
    write_latency(std::io::BufWriter::new(file), &data)
        .with_context(|| format!("writing {}", cfg.output.display()))?;
    Ok(Outcome {
        data,
        decided,
        stop,
        recording,
    })
}

/// What the kernel aggregated, as the file holds it: the histograms (with
/// what `taken` moved out before), the callees' times, the wait sites and
/// the counts of what was dropped. The probes are removed.
fn from_kernel(
    probe: LatencyProbe,
    mut taken: Taken,
    opts: &LatencyOptions,
) -> anyhow::Result<LatencyData> {
    taken.add(probe.read()?);
    let rows: Vec<HistRow> = taken.0.into_values().collect();
    let callee_rows = probe.callees()?;
    let site_rows = probe.wait_sites()?;
    let comms = probe.comms();
    let dropped: BTreeMap<String, u64> = probe
        .lost()
        .into_iter()
        .filter(|&(_, n)| n > 0)
        .map(|(w, n)| (w.to_string(), n))
        .collect();
    let lost_events = dropped.values().sum();
    let device_irqs = probe.device_irqs();
    drop(probe);

    let comm_of = |pid: u32| {
        comms.get(&pid).cloned().unwrap_or_else(|| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|s| s.trim_end().to_string())
                .unwrap_or_else(|_| "?".into())
        })
    };
    let mut histograms: Vec<IntervalHistogram> = rows
        .iter()
        .map(|r| IntervalHistogram {
            op: names::op_name(r, opts),
            pid: r.tgid,
            comm: comm_of(r.tgid),
            interval: r.interval,
            count: r.count.to_vec(),
            ns: r.ns.to_vec(),
            cause_ns: r.cause_ns.iter().map(|c| c.to_vec()).collect(),
        })
        .collect();
    histograms.sort_by(|x, y| (x.pid, &x.op, x.interval).cmp(&(y.pid, &y.op, y.interval)));
    let requested: Vec<String> = opts
        .kfuncs
        .iter()
        .map(|k| format!("kfunc:{k}"))
        .chain(
            opts.ufuncs
                .iter()
                .filter(|f| f.role != UfuncRole::Callee)
                .map(|f| format!("func:{}", f.symbol)),
        )
        .collect();
    let mut callees: Vec<CalleeTime> = callee_rows
        .iter()
        .filter_map(|c| {
            Some(CalleeTime {
                op: format!("func:{}", opts.ufuncs.get(c.root as usize)?.symbol),
                pid: c.tgid,
                fnode: c.fnode,
                slot: c.slot,
                calls: c.calls,
                ns: c.ns,
                cause_ns: c.cause_ns.to_vec(),
                largest: c.largest,
                own_largest: c.own_largest,
            })
        })
        .collect();
    let causes = names::keep_used_causes(&device_irqs, &mut histograms, &mut callees);
    let wait_sites = names::wait_sites(&site_rows);
    Ok(LatencyData {
        lost_events,
        dropped,
        requested,
        histograms,
        wait_sites,
        callees,
        causes,
        ..Default::default()
    })
}
