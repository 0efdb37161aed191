//! System-call performance (DeBox): per process and per call, how many,
//! how long, why they blocked and from where they were made; and whole
//! invocations, slowest first.
//!
//! Counts, totals, blocked time by subclass, page faults and the latency
//! histogram come from the recorder's exact in-kernel totals. Wait reasons,
//! wakers and call sites come from the invocation records: every invocation
//! that slept, took a major fault or was slow is one, so wait reasons are
//! complete; of the others one in `sample_every` is, so call-site counts
//! weigh those by `sample_every` (an unbiased estimate).

mod names;

use crate::stacks::{is_system_dso, wait_reason, Func, Resolver};
use holdup_trace::{Syscall, Trace, Waker};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// The name of an x86-64 system call number.
pub fn name(nr: u32) -> String {
    match names::NAMES.binary_search_by_key(&nr, |&(n, _)| n) {
        Ok(i) => names::NAMES[i].1.to_string(),
        Err(_) => format!("syscall_{nr}"),
    }
}

/// The x86-64 number of the system call `name`.
pub fn number(name: &str) -> Option<u32> {
    names::NAMES
        .iter()
        .find(|&&(_, n)| n == name)
        .map(|&(nr, _)| nr)
}

/// Every x86-64 system call name.
pub fn all_names() -> impl Iterator<Item = &'static str> {
    names::NAMES.iter().map(|&(_, n)| n)
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error(
        "the trace was recorded without --syscalls (record again with holdup record --syscalls …)"
    )]
    NotRecorded,
}

/// Blocked time of one call by subclass, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Blocked {
    pub io: u64,
    pub lock: u64,
    pub sched: u64,
    pub other: u64,
}

impl Blocked {
    fn from_array(b: [u64; 4]) -> Self {
        Blocked {
            io: b[0],
            lock: b[1],
            sched: b[2],
            other: b[3],
        }
    }

    /// Saturating: the times come from the trace, which may be crafted.
    pub fn total(&self) -> u64 {
        self.io
            .saturating_add(self.lock)
            .saturating_add(self.sched)
            .saturating_add(self.other)
    }

    fn add(&mut self, b: [u64; 4]) {
        self.io = self.io.saturating_add(b[0]);
        self.lock = self.lock.saturating_add(b[1]);
        self.sched = self.sched.saturating_add(b[2]);
        self.other = self.other.saturating_add(b[3]);
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PageFaults {
    pub minor: u64,
    pub major: u64,
}

/// Blocked time of one call attributed to one wait reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReasonStats {
    pub reason: String,
    /// Invocations whose longest sleep had this reason.
    pub count: u64,
    /// Their time asleep (io, lock, other; not runqueue time).
    pub blocked_ns: u64,
    /// Most contenders one of them had (see [`Invocation::contenders`]).
    pub max_contenders: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SiteStats {
    pub site: String,
    /// Estimated from the kept invocations (see the module documentation).
    pub count: u64,
    pub total_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bucket {
    pub lo_ns: u64,
    pub hi_ns: u64,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallStats {
    pub name: String,
    pub nr: u32,
    pub count: u64,
    pub total_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub blocked_ns: Blocked,
    pub reasons: Vec<ReasonStats>,
    pub page_faults: PageFaults,
    pub sites: Vec<SiteStats>,
    pub histogram: Vec<Bucket>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProcessStats {
    pub pid: u32,
    pub comm: String,
    /// Most total time first.
    pub calls: Vec<CallStats>,
}

/// One whole invocation, as DeBox's Figure 4 shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Invocation {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub name: String,
    /// Since the start of the recording.
    pub start_ns: u64,
    pub wall_ns: u64,
    pub on_cpu_ns: u64,
    pub blocked_ns: Blocked,
    pub sleeps: u32,
    /// Of the longest sleep.
    pub reason: Option<String>,
    /// Calls of other threads of the process that slept with the same wait
    /// reason during this one (DeBox's contenders on a resource label).
    pub contenders: u32,
    pub waker: Option<String>,
    pub page_faults: PageFaults,
    pub site: Option<String>,
    /// The longest sleep's kernel frames below the scheduler, innermost first.
    pub kernel_stack: Vec<String>,
    /// The user stack at the call, innermost first.
    pub user_stack: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SyscallReport {
    pub duration_ns: u64,
    pub keep_ns: u64,
    pub sample_every: u32,
    /// Invocation records in the trace.
    pub kept: u64,
    pub lost_events: u64,
    /// What the recorder saw but dropped, by name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub dropped: BTreeMap<String, u64>,
    pub processes: Vec<ProcessStats>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slowest: Vec<Invocation>,
}

/// The `q` quantile (0..=1) of a log2 histogram, interpolated linearly
/// inside its bucket: exact to within the bucket's width.
pub fn quantile(hist: &[u64], q: f64) -> u64 {
    let total = hist.iter().fold(0u64, |a, &n| a.saturating_add(n));
    if total == 0 {
        return 0;
    }
    let rank = (q * total as f64).ceil().max(1.0);
    let mut seen = 0u64;
    for (k, &n) in hist.iter().enumerate() {
        if n == 0 {
            continue;
        }
        if seen.saturating_add(n) as f64 >= rank {
            let (lo, hi) = bucket_range(k);
            let into = (rank - seen as f64) / n as f64;
            return lo + ((hi - lo) as f64 * into) as u64;
        }
        seen = seen.saturating_add(n);
    }
    bucket_range(hist.len().saturating_sub(1)).1
}

/// `[lo, hi)` of log2 bucket `k`: `[2^k, 2^(k+1))`, bucket 0 also holding 0.
pub fn bucket_range(k: usize) -> (u64, u64) {
    let k = k.min(62);
    (crate::latency::bucket_lo(k), crate::latency::bucket_hi(k))
}

/// `innermost application function (file:line)`: the frame outside the C
/// library, the loader and the kernel that made the call.
pub fn call_site(funcs: &[Func]) -> Option<String> {
    let f = funcs.iter().find(|f| !f.kernel && !is_system_dso(&f.dso))?;
    Some(match &f.file {
        Some(file) => {
            let short = file.rsplit('/').next().unwrap_or(file);
            format!("{} ({short}:{})", f.name, f.line)
        }
        None => format!("{} ({})", f.name, f.dso),
    })
}

fn comm_of(trace: &Trace, pid: u32) -> String {
    trace
        .threads
        .get(&pid)
        .filter(|t| t.pid == pid)
        .or_else(|| trace.threads.values().find(|t| t.pid == pid))
        .map(|t| t.comm.clone())
        .unwrap_or_default()
}

/// What the invocation records add to a call's totals.
#[derive(Default)]
struct FromRecords {
    /// reason → (count, time asleep, most contenders)
    reasons: HashMap<String, (u64, u64, u32)>,
    sites: HashMap<String, (u64, u64)>,
    max_ns: u64,
    /// Estimates, for calls that have no in-kernel totals (a recording
    /// that was cut short).
    count: u64,
    total_ns: u64,
    blocked: [u64; 4],
    faults: (u64, u64),
    hist: Vec<u64>,
}

fn weight(s: &Syscall, sample_every: u32) -> u64 {
    if s.sampled {
        sample_every as u64
    } else {
        1
    }
}

fn log2_bucket(ns: u64) -> usize {
    if ns < 2 {
        0
    } else {
        (63 - ns.leading_zeros()) as usize
    }
}

/// Options of [`analyze`].
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Only these processes (empty: all).
    pub pids: Vec<u32>,
    /// Whole invocations to list, slowest first.
    pub slowest: usize,
}

pub fn analyze(trace: &Trace, opts: &Options) -> Result<SyscallReport, Error> {
    let config = trace.syscall_config.as_ref().ok_or(Error::NotRecorded)?;
    let keep = |pid: u32| opts.pids.is_empty() || opts.pids.contains(&pid);
    let mut resolver = Resolver::new(trace);
    let reasons = sleep_reasons(trace, &mut resolver);
    let contenders = contenders(trace, &reasons);
    let mut from_records: BTreeMap<(u32, u32), FromRecords> = BTreeMap::new();
    for (idx, s) in trace
        .syscalls
        .iter()
        .enumerate()
        .filter(|(_, s)| keep(s.pid))
    {
        let w = weight(s, config.sample_every);
        let funcs = resolver.stack(s.stack);
        let r = from_records.entry((s.pid, s.nr)).or_default();
        let wall = s.wall_ns();
        // Scaled and summed as they come: saturating, for the values of a
        // crafted trace.
        let add = |sum: &mut u64, v: u64| *sum = sum.saturating_add(w.saturating_mul(v));
        r.max_ns = r.max_ns.max(wall);
        add(&mut r.count, 1);
        add(&mut r.total_ns, wall);
        for (a, b) in r.blocked.iter_mut().zip(s.blocked) {
            add(a, b);
        }
        add(&mut r.faults.0, s.min_flt as u64);
        add(&mut r.faults.1, s.maj_flt as u64);
        let k = log2_bucket(wall);
        if r.hist.len() <= k {
            r.hist.resize(k + 1, 0);
        }
        add(&mut r.hist[k], 1);
        if let Some(reason) = reasons.get(&idx) {
            let e = r.reasons.entry(reason.to_string()).or_default();
            add(&mut e.0, 1);
            add(&mut e.1, s.slept_ns());
            e.2 = e.2.max(contenders.get(&idx).copied().unwrap_or(0));
        }
        let site = call_site(&funcs).unwrap_or_else(|| "-".to_string());
        let e = r.sites.entry(site).or_default();
        add(&mut e.0, 1);
        add(&mut e.1, wall);
    }

    let mut by_pid: BTreeMap<u32, Vec<CallStats>> = BTreeMap::new();
    let mut with_totals = std::collections::HashSet::new();
    for t in trace.syscall_totals.iter().filter(|t| keep(t.pid)) {
        with_totals.insert((t.pid, t.nr));
        let r = from_records.remove(&(t.pid, t.nr)).unwrap_or_default();
        by_pid.entry(t.pid).or_default().push(call_stats(
            t.nr,
            t.count,
            t.total_ns,
            t.blocked,
            (t.min_flt, t.maj_flt),
            &t.hist,
            r,
        ));
    }
    // Calls seen only in records: the recording ended before its totals
    // were written.
    for ((pid, nr), r) in std::mem::take(&mut from_records) {
        let (count, total, blocked, faults, hist) =
            (r.count, r.total_ns, r.blocked, r.faults, r.hist.clone());
        by_pid
            .entry(pid)
            .or_default()
            .push(call_stats(nr, count, total, blocked, faults, &hist, r));
    }
    let processes = by_pid
        .into_iter()
        .map(|(pid, mut calls)| {
            calls.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.nr.cmp(&b.nr)));
            ProcessStats {
                pid,
                comm: comm_of(trace, pid),
                calls,
            }
        })
        .collect();

    let mut order: Vec<(usize, &Syscall)> = trace
        .syscalls
        .iter()
        .enumerate()
        .filter(|(_, s)| keep(s.pid))
        .collect();
    order.sort_by(|(_, a), (_, b)| b.wall_ns().cmp(&a.wall_ns()).then(a.time.cmp(&b.time)));
    let slowest = order
        .into_iter()
        .take(opts.slowest)
        .map(|(idx, s)| {
            let mut inv = invocation(trace, &mut resolver, s);
            inv.contenders = contenders.get(&idx).copied().unwrap_or(0);
            inv
        })
        .collect();

    Ok(SyscallReport {
        duration_ns: trace.duration_ns(),
        keep_ns: config.keep_ns,
        sample_every: config.sample_every,
        kept: trace.syscalls.len() as u64,
        lost_events: trace.lost_total(),
        dropped: crate::profile::owned(trace.dropped()).into_iter().collect(),
        processes,
        slowest,
    })
}

/// The wait reason of every invocation that slept, by index.
fn sleep_reasons(trace: &Trace, resolver: &mut Resolver<'_>) -> HashMap<usize, Rc<str>> {
    let unknown: Rc<str> = Rc::from("-");
    trace
        .syscalls
        .iter()
        .enumerate()
        .filter(|(_, s)| s.slept_ns() > 0)
        .map(|(i, s)| {
            let funcs = resolver.stack(s.stack);
            (i, wait_reason(&funcs).unwrap_or_else(|| unknown.clone()))
        })
        .collect()
}

/// Intervals `[start, end)`, their starts and ends each sorted, to count
/// the ones that overlap an interval by two binary searches.
struct Overlaps {
    starts: Vec<u64>,
    ends: Vec<u64>,
}

impl Overlaps {
    /// The non-empty intervals among `spans`.
    fn new(spans: impl Iterator<Item = (u64, u64)>) -> Overlaps {
        let (mut starts, mut ends): (Vec<u64>, Vec<u64>) = spans.filter(|(s, e)| s < e).unzip();
        starts.sort_unstable();
        ends.sort_unstable();
        Overlaps { starts, ends }
    }

    /// How many of the intervals overlap the non-empty `[s, e)` (itself
    /// too, if it is one of them): those that start before its end, less
    /// those that ended by its start (which started before its end too).
    fn count(&self, (s, e): (u64, u64)) -> usize {
        if s >= e {
            return 0;
        }
        self.starts.partition_point(|&x| x < e) - self.ends.partition_point(|&x| x <= s)
    }
}

/// For each invocation that slept for a reason: how many calls of other
/// threads of its process that slept for the same reason overlapped it
/// (DeBox's contenders on a resource label). A call of no duration overlaps
/// nothing. Counted by binary search over the sorted starts and ends of
/// each (process, reason) group, and of each thread's calls in it (which
/// are not contenders), in O(n log n): comparing calls pairwise was
/// quadratic in a crafted trace's overlapping calls.
fn contenders(trace: &Trace, reasons: &HashMap<usize, Rc<str>>) -> HashMap<usize, u32> {
    let span = |i: usize| (trace.syscalls[i].time, trace.syscalls[i].end);
    let mut groups: HashMap<(u32, &str), Vec<usize>> = HashMap::new();
    for (&i, r) in reasons {
        groups
            .entry((trace.syscalls[i].pid, r))
            .or_default()
            .push(i);
    }
    let mut out: HashMap<usize, u32> = HashMap::new();
    for calls in groups.into_values() {
        let all = Overlaps::new(calls.iter().map(|&i| span(i)));
        let mut by_tid: HashMap<u32, Vec<usize>> = HashMap::new();
        for &i in &calls {
            by_tid.entry(trace.syscalls[i].tid).or_default().push(i);
        }
        for own in by_tid.into_values() {
            let mine = Overlaps::new(own.iter().map(|&i| span(i)));
            for &i in &own {
                let n = all.count(span(i)) - mine.count(span(i));
                if n > 0 {
                    out.insert(i, u32::try_from(n).unwrap_or(u32::MAX));
                }
            }
        }
    }
    out
}

fn sorted_stats<T>(
    m: HashMap<String, (u64, u64)>,
    key: impl Fn(&(u64, u64)) -> u64,
    make: impl Fn(String, u64, u64) -> T,
) -> Vec<T> {
    let mut v: Vec<(String, (u64, u64))> = m.into_iter().collect();
    v.sort_by(|a, b| key(&b.1).cmp(&key(&a.1)).then(a.0.cmp(&b.0)));
    v.into_iter().map(|(k, (n, t))| make(k, n, t)).collect()
}

fn call_stats(
    nr: u32,
    count: u64,
    total_ns: u64,
    blocked: [u64; 4],
    faults: (u64, u64),
    hist: &[u64],
    r: FromRecords,
) -> CallStats {
    let mut reasons: Vec<ReasonStats> = r
        .reasons
        .into_iter()
        .map(
            |(reason, (count, blocked_ns, max_contenders))| ReasonStats {
                reason,
                count,
                blocked_ns,
                max_contenders,
            },
        )
        .collect();
    reasons.sort_by(|a, b| {
        b.blocked_ns
            .cmp(&a.blocked_ns)
            .then(a.reason.cmp(&b.reason))
    });
    let sites = sorted_stats(
        r.sites,
        |&(_, t)| t,
        |site, count, total_ns| SiteStats {
            site,
            count,
            total_ns,
        },
    );
    let top = hist.iter().rposition(|&n| n > 0).map_or(0, |k| k + 1);
    // No call is longer than all of them together (a lone call's bucket
    // would otherwise put its median past its own time).
    let quantile = |q| quantile(hist, q).min(total_ns);
    CallStats {
        name: name(nr),
        nr,
        count,
        total_ns,
        p50_ns: quantile(0.50),
        p99_ns: quantile(0.99),
        max_ns: r.max_ns,
        blocked_ns: Blocked::from_array(blocked),
        reasons,
        page_faults: PageFaults {
            minor: faults.0,
            major: faults.1,
        },
        sites,
        histogram: hist[..top]
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(k, &n)| {
                let (lo_ns, hi_ns) = bucket_range(k);
                Bucket {
                    lo_ns,
                    hi_ns,
                    count: n,
                }
            })
            .collect(),
    }
}

fn invocation(trace: &Trace, resolver: &mut Resolver<'_>, s: &Syscall) -> Invocation {
    let funcs = resolver.stack(s.stack);
    let mut blocked = Blocked::default();
    blocked.add(s.blocked);
    let kernel_stack = funcs
        .iter()
        .take_while(|f| f.kernel)
        .skip_while(|f| crate::stacks::is_scheduler_function(&f.name))
        .map(|f| f.name.to_string())
        .collect();
    let user_stack = funcs
        .iter()
        .filter(|f| !f.kernel)
        .map(|f| match &f.file {
            Some(file) => format!(
                "{} ({}:{})",
                f.name,
                file.rsplit('/').next().unwrap_or(file),
                f.line
            ),
            None => format!("{} ({})", f.name, f.dso),
        })
        .collect();
    Invocation {
        pid: s.pid,
        tid: s.tid,
        comm: trace
            .threads
            .get(&s.tid)
            .map(|t| t.comm.clone())
            .unwrap_or_default(),
        name: name(s.nr),
        start_ns: s.time.saturating_sub(trace.header.start_ns),
        wall_ns: s.wall_ns(),
        on_cpu_ns: s.on_cpu_ns(),
        blocked_ns: blocked,
        sleeps: s.sleeps,
        reason: (s.slept_ns() > 0)
            .then(|| wait_reason(&funcs).map(|r| r.to_string()))
            .flatten(),
        contenders: 0,
        waker: (s.waker != Waker::None).then(|| trace.waker_name(s.waker)),
        page_faults: PageFaults {
            minor: s.min_flt as u64,
            major: s.maj_flt as u64,
        },
        site: call_site(&funcs),
        kernel_stack,
        user_stack,
    }
}

#[cfg(test)]
mod tests;
