//! On-CPU and blocked samples on one scale: per thread, per function, per
//! perf-style row (bperf §3.2). Every count is in sampling points: an
//! on-CPU sample is one, a blocked sample is its weight, split between its
//! subclass and the runqueue part (`sched`).

use crate::fxhash::FxHashMap;
use crate::lock_rules::idle_why;
use crate::stacks::{lock_kind, site, wait_reason, Func, LockKind, Resolver};
use holdup_trace::{Class, Sample, Trace, Waker};
use retries::Retries;
use serde::Serialize;
use std::collections::HashMap;
use std::rc::Rc;

mod group;
pub(crate) mod retries;
pub use group::{group, Section};

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

/// Lock waits ([L]) split by what they wait for: a mutex held by another
/// thread (contention), a signal (condition variable, join, barrier,
/// semaphore: idle by design unless the signaller is late), nothing (a
/// runtime's idle thread, a sleep; see `lock_rules`), or CPython's GIL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LockSplit {
    pub mutex: u64,
    pub signal: u64,
    pub idle: u64,
    pub gil: u64,
}

impl LockSplit {
    pub fn get(&self, k: LockKind) -> u64 {
        match k {
            LockKind::Mutex => self.mutex,
            LockKind::Signal => self.signal,
            LockKind::Idle => self.idle,
            LockKind::Gil => self.gil,
        }
    }

    pub fn add(&mut self, k: LockKind, n: u64) {
        *match k {
            LockKind::Mutex => &mut self.mutex,
            LockKind::Signal => &mut self.signal,
            LockKind::Idle => &mut self.idle,
            LockKind::Gil => &mut self.gil,
        } += n;
    }

    pub fn add_all(&mut self, o: &LockSplit) {
        self.mutex += o.mutex;
        self.signal += o.signal;
        self.idle += o.idle;
        self.gil += o.gil;
    }
}

/// Blocked samples of a thread with nothing to do: lock waits of the idle
/// kind and other waits (epoll, sleeps) that a rule of `lock_rules` calls
/// idle, as a runtime's event loop or scheduler waiting for work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Idle {
    pub samples: u64,
    /// Why, for the heaviest rule.
    pub why: Option<&'static str>,
}

impl Idle {
    fn from_counts(counts: FxHashMap<&'static str, u64>) -> Self {
        let samples = counts.values().sum();
        let why = counts
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
            .map(|(w, _)| w);
        Idle { samples, why }
    }

    /// Of these, the samples that are not lock waits (class other).
    pub fn other(&self, lock: &LockSplit) -> u64 {
        self.samples.saturating_sub(lock.idle)
    }
}

/// The parts of a sample: (class, sampling points).
pub fn sample_parts(s: &Sample) -> impl Iterator<Item = (Class, u64)> {
    // On-CPU samples carry steal time (a virtual CPU the host did not run)
    // as runqueue points.
    [
        (s.class, s.weight as u64),
        (Class::Sched, s.sched_weight as u64),
    ]
    .into_iter()
    .filter(|&(_, n)| n > 0)
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

/// One line of the perf-style table. A blocked row is named by its site
/// (`LruCache::Release → Mutex::Lock → pthread_mutex_lock`, see
/// `stacks::site`), or by its innermost function when the stack has no
/// application frame.
#[derive(Clone, Debug)]
pub struct Row {
    pub tag: Tag,
    pub dso: Rc<str>,
    pub symbol: Rc<str>,
    /// For lock rows: what the wait was for.
    pub lock_kind: Option<LockKind>,
    pub weight: u64,
    /// For blocked rows: wait reasons and wakers, heaviest first.
    pub wait_reasons: Vec<(Rc<str>, u64)>,
    pub wakers: Vec<(String, u64)>,
    /// For blocked rows that other threads ended: what those threads did
    /// meanwhile (`holder::annotate` fills it in).
    pub while_held: Option<Rc<crate::holder::RowHeld>>,
}

#[derive(Clone, Debug)]
pub struct ThreadProfile {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub lifetime_ns: u64,
    /// Threads in this profile: 1, or more for a merged section.
    pub threads: usize,
    pub samples: ClassCounts,
    /// `samples.lock`, by what the waits were for.
    pub lock_split: LockSplit,
    pub idle: Idle,
    pub functions: Vec<FunctionStats>,
    pub rows: Vec<Row>,
}

#[derive(Clone, Debug)]
pub struct Profile {
    pub period_ns: u64,
    pub duration_ns: u64,
    /// Events lost to a full ring buffer (or not parsed).
    pub lost_events: u64,
    /// What the recorder saw but dropped, by name (its cause in parentheses).
    pub dropped: Vec<(String, u64)>,
    pub threads: Vec<ThreadProfile>,
    /// Goroutines' waits by start function (recorded with `--goroutines`).
    pub goroutines: crate::goroutines::Goroutines,
}

/// Lost counts with names of their own.
pub fn owned(counts: Vec<(&str, u64)>) -> Vec<(String, u64)> {
    counts
        .into_iter()
        .map(|(w, n)| (w.to_string(), n))
        .collect()
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
                .find(|f| !crate::stacks::is_scheduler_function(&f.name))
        } else {
            funcs.first()
        }
    })
}

type FuncId = u32;
type LocId = u32;
/// Row of samples without any symbol.
const NO_FUNC: FuncId = u32::MAX;
/// Reason id of the runqueue part that follows a wakeup.
const AFTER_WAKEUP: u32 = 0;
/// Reason id of steal time: running on a virtual CPU the host did not run.
const STEAL: u32 = 1;

/// What every sample with a given stack contributes, worked out once per
/// stack: per sample only integer-keyed counters are touched.
struct StackInfo {
    /// Every function on the stack, once.
    funcs: Vec<FuncId>,
    /// Self function and location of on-CPU and of blocked samples.
    self_cpu: Option<(FuncId, LocId)>,
    self_blocked: Option<(FuncId, LocId)>,
    cpu_row: (Tag, FuncId),
    /// The site (or, without one, the self function) of blocked rows.
    blocked_row: FuncId,
    reason: Option<u32>,
    lock_kind: LockKind,
    idle_why: Option<&'static str>,
}

/// Functions, source locations and wait reasons, interned to ids.
struct Catalog<'t> {
    resolver: Resolver<'t>,
    funcs: Vec<(Rc<str>, Rc<str>)>,
    func_ids: HashMap<(Rc<str>, Rc<str>), FuncId>,
    /// First location seen of every function (a call site if it never runs).
    first_loc: Vec<LocId>,
    locs: Vec<(Option<Rc<str>>, u32)>,
    loc_ids: HashMap<(Option<Rc<str>>, u32), LocId>,
    reasons: Vec<Rc<str>>,
    reason_ids: HashMap<Rc<str>, u32>,
    stacks: FxHashMap<u32, Rc<StackInfo>>,
}

impl<'t> Catalog<'t> {
    fn new(trace: &'t Trace) -> Self {
        Self {
            resolver: Resolver::new(trace),
            funcs: Vec::new(),
            func_ids: HashMap::new(),
            first_loc: Vec::new(),
            locs: Vec::new(),
            loc_ids: HashMap::new(),
            reasons: vec![
                Rc::from("(runqueue after wakeup)"),
                Rc::from("(steal: the host did not run this virtual CPU)"),
            ],
            reason_ids: HashMap::new(),
            stacks: FxHashMap::default(),
        }
    }

    fn loc(&mut self, f: &Func) -> LocId {
        let key = (f.file.clone(), f.line);
        if let Some(&id) = self.loc_ids.get(&key) {
            return id;
        }
        let id = self.locs.len() as LocId;
        self.locs.push(key.clone());
        self.loc_ids.insert(key, id);
        id
    }

    fn func(&mut self, f: &Func) -> FuncId {
        let key = (f.dso.clone(), f.name.clone());
        if let Some(&id) = self.func_ids.get(&key) {
            return id;
        }
        let id = self.funcs.len() as FuncId;
        let loc = self.loc(f);
        self.funcs.push(key.clone());
        self.first_loc.push(loc);
        self.func_ids.insert(key, id);
        id
    }

    /// A site is interned like a function named by its label, so that rows
    /// keep one kind of key; sites never enter the function table.
    fn site(&mut self, dso: Rc<str>, label: &str) -> FuncId {
        let key = (dso, Rc::from(label));
        if let Some(&id) = self.func_ids.get(&key) {
            return id;
        }
        let id = self.funcs.len() as FuncId;
        let loc = self.loc(&Func {
            name: key.1.clone(),
            dso: key.0.clone(),
            file: None,
            line: 0,
            kernel: false,
            inlined: false,
        });
        self.funcs.push(key.clone());
        self.first_loc.push(loc);
        self.func_ids.insert(key, id);
        id
    }

    fn reason(&mut self, r: Rc<str>) -> u32 {
        if let Some(&id) = self.reason_ids.get(&r) {
            return id;
        }
        let id = self.reasons.len() as u32;
        self.reasons.push(r.clone());
        self.reason_ids.insert(r, id);
        id
    }

    fn stack(&mut self, id: u32) -> Rc<StackInfo> {
        if let Some(info) = self.stacks.get(&id) {
            return info.clone();
        }
        let funcs = self.resolver.stack(id);
        let mut ids = Vec::with_capacity(funcs.len());
        for f in funcs.iter() {
            let fid = self.func(f);
            if !ids.contains(&fid) {
                ids.push(fid);
            }
        }
        let mut self_of =
            |blocked| self_function(&funcs, blocked).map(|f| (self.func(f), self.loc(f)));
        let self_cpu = self_of(false);
        let self_blocked = self_of(true);
        let cpu_row = match funcs.first() {
            Some(f) if f.kernel => (Tag::Kernel, self.func(f)),
            Some(f) => (Tag::User, self.func(f)),
            None => (Tag::User, NO_FUNC),
        };
        let blocked_row = match site(&funcs) {
            Some(s) => self.site(s.dso, &s.label),
            None => self_blocked.map_or(NO_FUNC, |(f, _)| f),
        };
        let reason = wait_reason(&funcs).map(|r| self.reason(r));
        let lock_kind = lock_kind(&funcs);
        let idle_why = idle_why(&funcs);
        let info = Rc::new(StackInfo {
            funcs: ids,
            self_cpu,
            self_blocked,
            cpu_row,
            blocked_row,
            reason,
            lock_kind,
            idle_why,
        });
        self.stacks.insert(id, info.clone());
        info
    }
}

/// Rows are told apart by tag and function (or site); lock rows also by
/// what they waited for, as one site may wait both for a signal and for
/// the mutex that comes with it.
type RowKey = (Tag, FuncId, Option<LockKind>);

impl StackInfo {
    fn blocked_row_key(&self, class: Class) -> RowKey {
        let kind = (class == Class::Lock).then_some(self.lock_kind);
        (Tag::Blocked(class), self.blocked_row, kind)
    }
}

#[derive(Default)]
struct RowAcc {
    weight: u64,
    reasons: FxHashMap<u32, u64>,
    wakers: FxHashMap<Waker, u64>,
}

#[derive(Default)]
struct FuncAcc {
    self_: ClassCounts,
    total: ClassCounts,
    /// Self weight per source location: the heaviest names the function.
    self_locs: FxHashMap<LocId, u64>,
}

/// What one thread's samples with one stack add up to.
#[derive(Default)]
struct StackCounts {
    counts: ClassCounts,
    /// The part of `counts.sched` that followed a wakeup (the rest is preemption).
    sched_after_wakeup: u64,
    /// The part of `counts.sched` that was steal time.
    steal: u64,
}

/// Per thread, samples are first summed per stack (one hash per sample),
/// then each distinct stack is spread over rows and functions once.
#[derive(Default)]
struct ThreadAcc {
    samples: ClassCounts,
    stacks: FxHashMap<u32, StackCounts>,
    /// Wakers per blocked row: (subclass, stack) → waker → weight.
    wakers: Wakers,
    /// Timer-ended contended waits: (stack, weight).
    retries: Retries<(u32, u64)>,
}

/// Where wakers go: (class, stack, waker) → weight.
type Wakers = FxHashMap<(Class, u32, Waker), u64>;

/// Credits a contended wait, (stack, weight), to the waker it settles with.
fn credit(wakers: &mut Wakers) -> impl FnMut((u32, u64), Waker) + '_ {
    |(stack, n), waker| {
        if waker != Waker::None {
            *wakers.entry((Class::Lock, stack, waker)).or_default() += n;
        }
    }
}

/// Heaviest first.
fn sort_by_weight<K>(v: &mut [(K, u64)]) {
    v.sort_by_key(|e| std::cmp::Reverse(e.1));
}

fn sorted<K>(m: impl IntoIterator<Item = (K, u64)>) -> Vec<(K, u64)> {
    let mut v: Vec<_> = m.into_iter().collect();
    sort_by_weight(&mut v);
    v
}

pub fn profile(trace: &Trace, filter: &Filter) -> Profile {
    let mut cat = Catalog::new(trace);
    let mut threads: FxHashMap<u32, ThreadAcc> = FxHashMap::default();
    let filtering = !(filter.tids.is_empty() && filter.pids.is_empty() && filter.comms.is_empty());
    for s in &trace.samples {
        if filtering {
            let comm = trace.threads.get(&s.tid).map_or("", |t| t.comm.as_str());
            if !filter.keeps(s.pid, s.tid, comm) {
                continue;
            }
        }
        let acc = threads.entry(s.tid).or_default();
        let sc = acc.stacks.entry(s.stack).or_default();
        for (class, n) in sample_parts(s) {
            acc.samples.add(class, n);
            sc.counts.add(class, n);
            // The runqueue part after a wakeup has the stack of the wait
            // before it, but not its reason or its waker.
            if class == Class::Sched && s.class == Class::Cpu {
                sc.steal += n;
            } else if class == Class::Sched && s.class != Class::Sched {
                sc.sched_after_wakeup += n;
            } else if class == Class::Lock && cat.stack(s.stack).lock_kind.is_contention() {
                acc.retries
                    .contended((s.stack, n), s.waker, credit(&mut acc.wakers));
            } else if class != Class::Cpu {
                // A preemption is no wait of its own: a retry chain goes on.
                if class != Class::Sched {
                    acc.retries.end(credit(&mut acc.wakers));
                }
                if s.waker != Waker::None {
                    *acc.wakers.entry((class, s.stack, s.waker)).or_default() += n;
                }
            }
        }
    }
    for acc in threads.values_mut() {
        acc.retries.end(credit(&mut acc.wakers));
    }

    struct Spread {
        rows: FxHashMap<RowKey, RowAcc>,
        funcs: FxHashMap<FuncId, FuncAcc>,
    }
    let spread: Vec<(u32, ClassCounts, LockSplit, Idle, Spread)> = threads
        .into_iter()
        .map(|(tid, acc)| {
            let mut sp = Spread {
                rows: FxHashMap::default(),
                funcs: FxHashMap::default(),
            };
            let mut split = LockSplit::default();
            let mut idle: FxHashMap<&'static str, u64> = FxHashMap::default();
            for (&stack, sc) in &acc.stacks {
                let info = cat.stack(stack);
                for class in Class::ALL {
                    let n = sc.counts.get(class);
                    if n == 0 {
                        continue;
                    }
                    let (row_key, self_fn) = if class == Class::Cpu {
                        ((info.cpu_row.0, info.cpu_row.1, None), info.self_cpu)
                    } else {
                        (info.blocked_row_key(class), info.self_blocked)
                    };
                    let row = sp.rows.entry(row_key).or_default();
                    row.weight += n;
                    if class == Class::Lock {
                        split.add(info.lock_kind, n);
                    }
                    if let (Some(why), Class::Lock | Class::Other) = (info.idle_why, class) {
                        *idle.entry(why).or_default() += n;
                    }
                    if class != Class::Cpu {
                        let (after, steal) = if class == Class::Sched {
                            (sc.sched_after_wakeup, sc.steal)
                        } else {
                            (0, 0)
                        };
                        for (reason, m) in [(AFTER_WAKEUP, after), (STEAL, steal)] {
                            if m > 0 {
                                *row.reasons.entry(reason).or_default() += m;
                            }
                        }
                        if let (Some(r), true) = (info.reason, n > after + steal) {
                            *row.reasons.entry(r).or_default() += n - after - steal;
                        }
                    }
                    if let Some((f, loc)) = self_fn {
                        let fa = sp.funcs.entry(f).or_default();
                        fa.self_.add(class, n);
                        *fa.self_locs.entry(loc).or_default() += n;
                    }
                }
                for &f in &info.funcs {
                    sp.funcs.entry(f).or_default().total.add_all(&sc.counts);
                }
            }
            for ((class, stack, waker), n) in acc.wakers {
                let info = cat.stack(stack);
                let row = sp.rows.entry(info.blocked_row_key(class)).or_default();
                *row.wakers.entry(waker).or_default() += n;
            }
            (tid, acc.samples, split, Idle::from_counts(idle), sp)
        })
        .collect();

    let unknown: Rc<str> = Rc::from("[unknown]");
    let func_name = |f: FuncId| -> (Rc<str>, Rc<str>) {
        if f == NO_FUNC {
            (unknown.clone(), unknown.clone())
        } else {
            cat.funcs[f as usize].clone()
        }
    };
    let mut out: Vec<ThreadProfile> = spread
        .into_iter()
        .map(|(tid, samples, lock_split, idle, acc)| {
            let th = trace.threads.get(&tid);
            let mut rows: Vec<Row> = acc
                .rows
                .into_iter()
                .map(|((tag, f, lock_kind), r)| {
                    let (dso, symbol) = func_name(f);
                    Row {
                        tag,
                        dso,
                        symbol,
                        lock_kind,
                        weight: r.weight,
                        wait_reasons: sorted(
                            r.reasons
                                .into_iter()
                                .map(|(id, n)| (cat.reasons[id as usize].clone(), n)),
                        ),
                        wakers: sorted(r.wakers.into_iter().map(|(w, n)| (trace.waker_name(w), n))),
                        while_held: None,
                    }
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
                .map(|(f, fa)| {
                    let (dso, name) = func_name(f);
                    let loc = fa
                        .self_locs
                        .iter()
                        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                        .map_or(cat.first_loc[f as usize], |(&l, _)| l);
                    let (file, line) = &cat.locs[loc as usize];
                    FunctionStats {
                        symbol: name.to_string(),
                        dso: dso.to_string(),
                        file: file.as_ref().map(|f| f.to_string()),
                        line: *line,
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
                threads: 1,
                samples,
                lock_split,
                idle,
                functions,
                rows,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.samples
            .total()
            .cmp(&a.samples.total())
            .then(a.tid.cmp(&b.tid))
    });
    Profile {
        period_ns: trace.header.period_ns,
        duration_ns: trace.duration_ns(),
        lost_events: trace.lost_total(),
        dropped: owned(trace.dropped()),
        threads: out,
        goroutines: crate::goroutines::goroutines(trace, |pid| {
            filter.pids.is_empty() || filter.pids.contains(&pid)
        }),
    }
}
