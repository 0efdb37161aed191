//! On-CPU and blocked samples on one scale: per thread, per function, per
//! perf-style row (bperf §3.2). Every count is in sampling points: an
//! on-CPU sample is one, a blocked sample is its weight, split between its
//! subclass and the runqueue part (`sched`).

use crate::symbols::{wait_reason, Func, Resolver};
use holdup_trace::{Class, Sample, Trace};
use serde::Serialize;
use std::collections::HashMap;
use std::rc::Rc;

/// Weighted sample counts per class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClassCounts {
    pub cpu: u64,
    pub io: u64,
    pub lock: u64,
    pub sched: u64,
    pub other: u64,
}

impl ClassCounts {
    pub fn get(&self, c: Class) -> u64 {
        match c {
            Class::Cpu => self.cpu,
            Class::Io => self.io,
            Class::Lock => self.lock,
            Class::Sched => self.sched,
            Class::Other => self.other,
        }
    }

    pub fn add(&mut self, c: Class, n: u64) {
        *match c {
            Class::Cpu => &mut self.cpu,
            Class::Io => &mut self.io,
            Class::Lock => &mut self.lock,
            Class::Sched => &mut self.sched,
            Class::Other => &mut self.other,
        } += n;
    }

    pub fn add_all(&mut self, o: &ClassCounts) {
        for c in Class::ALL {
            self.add(c, o.get(c));
        }
    }

    pub fn total(&self) -> u64 {
        Class::ALL.iter().map(|&c| self.get(c)).sum()
    }

    pub fn blocked(&self) -> u64 {
        self.total() - self.cpu
    }
}

/// The parts of a sample: (class, sampling points).
pub fn sample_parts(s: &Sample) -> impl Iterator<Item = (Class, u64)> {
    let parts = match s.class {
        Class::Cpu => [(Class::Cpu, 1), (Class::Sched, 0)],
        c => [(c, s.weight as u64), (Class::Sched, s.sched_weight as u64)],
    };
    parts.into_iter().filter(|&(_, n)| n > 0)
}

/// Which threads to keep.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub tids: Vec<u32>,
    pub pids: Vec<u32>,
    pub comms: Vec<String>,
}

impl Filter {
    pub fn keeps(&self, pid: u32, tid: u32, comm: &str) -> bool {
        (self.tids.is_empty() || self.tids.contains(&tid))
            && (self.pids.is_empty() || self.pids.contains(&pid))
            && (self.comms.is_empty() || self.comms.iter().any(|c| c == comm))
    }
}

/// How a row of the perf-style table is tagged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tag {
    /// On-CPU in the kernel: `[k]`.
    Kernel,
    /// On-CPU in user space: `[.]`.
    User,
    /// A blocked subclass: `[I] [L] [S] [B]`.
    Blocked(Class),
}

impl Tag {
    pub fn as_str(self) -> &'static str {
        match self {
            Tag::Kernel => "[k]",
            Tag::User => "[.]",
            Tag::Blocked(c) => c.tag(),
        }
    }
    pub fn class(self) -> Class {
        match self {
            Tag::Kernel | Tag::User => Class::Cpu,
            Tag::Blocked(c) => c,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct FunctionStats {
    pub symbol: String,
    pub dso: String,
    pub file: Option<String>,
    pub line: u32,
    #[serde(rename = "self")]
    pub self_: ClassCounts,
    pub total: ClassCounts,
}

/// One line of the perf-style table.
#[derive(Clone, Debug)]
pub struct Row {
    pub tag: Tag,
    pub dso: Rc<str>,
    pub symbol: Rc<str>,
    pub weight: u64,
    /// For blocked rows: wait reasons and wakers, heaviest first.
    pub wait_reasons: Vec<(Rc<str>, u64)>,
    pub wakers: Vec<(String, u64)>,
}

#[derive(Clone, Debug)]
pub struct ThreadProfile {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub lifetime_ns: u64,
    pub samples: ClassCounts,
    pub functions: Vec<FunctionStats>,
    pub rows: Vec<Row>,
}

#[derive(Clone, Debug)]
pub struct Profile {
    pub period_ns: u64,
    pub duration_ns: u64,
    pub lost_events: u64,
    pub threads: Vec<ThreadProfile>,
}

#[derive(Default)]
struct RowAcc {
    weight: u64,
    reasons: HashMap<Rc<str>, u64>,
    wakers: HashMap<String, u64>,
}

#[derive(Default)]
struct FuncAcc {
    self_: ClassCounts,
    total: ClassCounts,
    /// (file, line) of the heaviest self location, and of the heaviest
    /// location anywhere (a call site), for functions that never run themselves.
    locations: HashMap<(Option<Rc<str>>, u32), u64>,
    call_sites: HashMap<(Option<Rc<str>>, u32), u64>,
}

#[derive(Default)]
struct ThreadAcc {
    samples: ClassCounts,
    rows: HashMap<(Tag, Rc<str>, Rc<str>), RowAcc>,
    funcs: HashMap<(Rc<str>, Rc<str>), FuncAcc>,
}

/// The function a sample is attributed to ("self"): its innermost user
/// frame, i.e. for kernel work the user code that entered the kernel; for
/// threads without user frames, the innermost kernel function (below the
/// scheduler, for blocked samples).
pub fn self_function(funcs: &[Func], blocked: bool) -> Option<&Func> {
    funcs.iter().find(|f| !f.kernel).or_else(|| {
        if blocked {
            funcs
                .iter()
                .find(|f| !crate::symbols::is_scheduler_function(&f.name))
        } else {
            funcs.first()
        }
    })
}

fn sorted<K>(m: HashMap<K, u64>) -> Vec<(K, u64)> {
    let mut v: Vec<_> = m.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1));
    v
}

pub fn profile(trace: &Trace, filter: &Filter) -> Profile {
    let mut resolver = Resolver::new(trace);
    let mut threads: HashMap<u32, ThreadAcc> = HashMap::new();
    let unknown: Rc<str> = Rc::from("[unknown]");
    let mut seen: Vec<(Rc<str>, Rc<str>, Option<Rc<str>>, u32)> = Vec::new();
    for s in &trace.samples {
        let comm = trace.threads.get(&s.tid).map_or("", |t| t.comm.as_str());
        if !filter.keeps(s.pid, s.tid, comm) {
            continue;
        }
        let funcs = resolver.stack(s.stack);
        let blocked = s.class != Class::Cpu;
        let acc = threads.entry(s.tid).or_default();
        let self_fn = self_function(&funcs, blocked);
        let (row_fn, cpu_tag) = if blocked {
            (self_fn, Tag::User)
        } else {
            match funcs.first() {
                Some(f) if f.kernel => (Some(f), Tag::Kernel),
                f => (f, Tag::User),
            }
        };
        let (row_dso, row_sym) = row_fn.map_or((unknown.clone(), unknown.clone()), |f| {
            (f.dso.clone(), f.name.clone())
        });
        let reason = if blocked { wait_reason(&funcs) } else { None };
        let waker = blocked.then(|| trace.waker_name(s.waker));
        // Functions on the stack, each counted once per sample.
        seen.clear();
        for f in funcs.iter() {
            if !seen.iter().any(|k| k.0 == f.dso && k.1 == f.name) {
                seen.push((f.dso.clone(), f.name.clone(), f.file.clone(), f.line));
            }
        }
        for (class, n) in sample_parts(s) {
            acc.samples.add(class, n);
            let tag = if class == Class::Cpu {
                cpu_tag
            } else {
                Tag::Blocked(class)
            };
            let row = acc
                .rows
                .entry((tag, row_dso.clone(), row_sym.clone()))
                .or_default();
            row.weight += n;
            if let Some(r) = &reason {
                // The runqueue part of a wait has the same stack, but its
                // reason is the wait that preceded it only for the blocked part.
                let r = if class == Class::Sched && s.class != Class::Sched {
                    Rc::from("(runqueue after wakeup)")
                } else {
                    r.clone()
                };
                *row.reasons.entry(r).or_default() += n;
            }
            if let Some(w) = &waker {
                if class != Class::Sched || s.class == Class::Sched {
                    *row.wakers.entry(w.clone()).or_default() += n;
                }
            }
            if let Some(f) = self_fn {
                let fa = acc.funcs.entry((f.dso.clone(), f.name.clone())).or_default();
                fa.self_.add(class, n);
                *fa.locations.entry((f.file.clone(), f.line)).or_default() += n;
            }
            for (dso, name, file, line) in &seen {
                let fa = acc.funcs.entry((dso.clone(), name.clone())).or_default();
                fa.total.add(class, n);
                *fa.call_sites.entry((file.clone(), *line)).or_default() += n;
            }
        }
    }

    let mut out: Vec<ThreadProfile> = threads
        .into_iter()
        .map(|(tid, acc)| {
            let th = trace.threads.get(&tid);
            let mut rows: Vec<Row> = acc
                .rows
                .into_iter()
                .map(|((tag, dso, symbol), r)| Row {
                    tag,
                    dso,
                    symbol,
                    weight: r.weight,
                    wait_reasons: sorted(r.reasons),
                    wakers: sorted(r.wakers),
                })
                .collect();
            rows.sort_by(|a, b| {
                b.weight
                    .cmp(&a.weight)
                    .then_with(|| a.symbol.cmp(&b.symbol))
                    .then_with(|| a.tag.cmp(&b.tag))
            });
            let mut functions: Vec<FunctionStats> = acc
                .funcs
                .into_iter()
                .map(|((dso, name), fa)| {
                    let locations = if fa.locations.is_empty() {
                        fa.call_sites
                    } else {
                        fa.locations
                    };
                    let (file, line) = locations
                        .into_iter()
                        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
                        .map_or((None, 0), |((f, l), _)| (f, l));
                    FunctionStats {
                        symbol: name.to_string(),
                        dso: dso.to_string(),
                        file: file.map(|f| f.to_string()),
                        line,
                        self_: fa.self_,
                        total: fa.total,
                    }
                })
                .collect();
            functions.sort_by(|a, b| {
                b.total
                    .total()
                    .cmp(&a.total.total())
                    .then_with(|| b.self_.total().cmp(&a.self_.total()))
                    .then_with(|| a.symbol.cmp(&b.symbol))
            });
            ThreadProfile {
                pid: th.map_or(0, |t| t.pid),
                tid,
                comm: th.map_or_else(String::new, |t| t.comm.clone()),
                lifetime_ns: th.map_or(0, |t| t.lifetime_ns()),
                samples: acc.samples,
                functions,
                rows,
            }
        })
        .collect();
    out.sort_by(|a, b| b.samples.total().cmp(&a.samples.total()).then(a.tid.cmp(&b.tid)));
    Profile {
        period_ns: trace.header.period_ns,
        duration_ns: trace.duration_ns(),
        lost_events: trace.lost_total(),
        threads: out,
    }
}

/// `holdup.report/1`, exactly as DESIGN.md lists it (plus extra fields).
pub fn to_json(p: &Profile) -> serde_json::Value {
    #[derive(Serialize)]
    struct Thread<'a> {
        pid: u32,
        tid: u32,
        comm: &'a str,
        lifetime_ns: u64,
        samples: ClassCounts,
        functions: &'a [FunctionStats],
    }
    #[derive(Serialize)]
    struct Report<'a> {
        schema: &'static str,
        period_ns: u64,
        duration_ns: u64,
        lost_events: u64,
        threads: Vec<Thread<'a>>,
    }
    serde_json::to_value(Report {
        schema: "holdup.report/1",
        period_ns: p.period_ns,
        duration_ns: p.duration_ns,
        lost_events: p.lost_events,
        threads: p
            .threads
            .iter()
            .map(|t| Thread {
                pid: t.pid,
                tid: t.tid,
                comm: &t.comm,
                lifetime_ns: t.lifetime_ns,
                samples: t.samples,
                functions: &t.functions,
            })
            .collect(),
    })
    .expect("report serializes")
}
