//! Goroutines' blocked time (recorded with `--goroutines`): the waits of
//! goroutines parked in the Go scheduler, in sampling points on the threads'
//! scale, one row per process and start function (`main.contender`),
//! classified by the runtime's wait reason: a sync.Mutex or RWMutex is
//! contention (the goroutine that readied the waiter released it), a
//! channel, a select, a sync.Cond or WaitGroup is a signal, `IO wait` is
//! I/O (with what the network poller waited on), a sleep and the rest are
//! other. The runtime's own goroutines (GC workers, the scavenger, the
//! finalizer) are set aside, as their OS threads' idle time in the
//! scheduler is in the thread rows.

use crate::fxhash::FxHashMap;
use crate::stacks::{Func, Resolver};
use holdup_trace::{GoWait, Trace};
use serde::Serialize;

/// What a goroutine's wait was, by its wait reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GoKind {
    /// A sync.Mutex or RWMutex another goroutine held.
    Contention,
    /// A channel, select, condition, wait group or semaphore.
    Signal,
    /// The network poller (`IO wait`).
    Io,
    /// A sleep, and reasons of the runtime's own.
    Other,
}

impl GoKind {
    pub fn of(reason: &str) -> GoKind {
        if reason.contains("Mutex") {
            GoKind::Contention
        } else if reason == "IO wait" {
            GoKind::Io
        } else if reason.starts_with("chan ")
            || reason.starts_with("select")
            || reason.starts_with("sync.")
            || reason == "semacquire"
        {
            GoKind::Signal
        } else {
            GoKind::Other
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GoKind::Contention => "contention",
            GoKind::Signal => "signal",
            GoKind::Io => "io",
            GoKind::Other => "other",
        }
    }
}

/// Sampling points of a row, by kind; `runnable`: made ready but not yet
/// running again (waiting for an OS thread).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GoSamples {
    pub contention: u64,
    pub signal: u64,
    pub io: u64,
    pub other: u64,
    pub runnable: u64,
}

impl GoSamples {
    fn add(&mut self, k: GoKind, n: u64) {
        *match k {
            GoKind::Contention => &mut self.contention,
            GoKind::Signal => &mut self.signal,
            GoKind::Io => &mut self.io,
            GoKind::Other => &mut self.other,
        } += n;
    }

    pub fn get(&self, k: GoKind) -> u64 {
        match k {
            GoKind::Contention => self.contention,
            GoKind::Signal => self.signal,
            GoKind::Io => self.io,
            GoKind::Other => self.other,
        }
    }

    pub fn total(&self) -> u64 {
        self.contention + self.signal + self.io + self.other + self.runnable
    }
}

/// A name and its sampling points.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Named {
    pub name: String,
    pub samples: u64,
}

/// The goroutines of one process that started in one function.
#[derive(Clone, Debug, Serialize)]
pub struct GoroutineRow {
    pub pid: u32,
    /// The start function (`main.contender`), wrappers the compiler made
    /// for a `go` statement skipped.
    pub function: String,
    pub goroutines: usize,
    pub samples: GoSamples,
    /// Wait reasons, with their kind, heaviest first.
    pub reasons: Vec<GoReason>,
    /// The goroutines that readied them (by start function), heaviest first.
    pub wakers: Vec<Named>,
    /// For I/O: what the network poller waited on.
    pub waited_on: Vec<Named>,
    /// Where they parked: the innermost function of the program and the
    /// runtime or library function it called.
    pub sites: Vec<Named>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GoReason {
    pub name: String,
    pub kind: GoKind,
    pub samples: u64,
}

/// Every row, and what was set aside.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Goroutines {
    pub rows: Vec<GoroutineRow>,
    /// Sampling points of the runtime's own goroutines, not counted.
    pub set_aside: u64,
}

impl Goroutines {
    /// Nothing recorded (no --goroutines, or no Go program).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.set_aside == 0
    }
}

/// The wrapper the compiler makes for `go f(x)`: `main.main.gowrap2`.
fn is_go_wrapper(name: &str) -> bool {
    name.rsplit_once(".gowrap")
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The start function of a goroutine whose stack (leaf first, inlined
/// frames expanded) is `funcs`: the frame inside `runtime.goexit`, past
/// `go` statement wrappers; the outermost frame when the stack was cut.
pub fn start_function(funcs: &[Func]) -> Option<&str> {
    let end = funcs
        .iter()
        .position(|f| &*f.name == "runtime.goexit")
        .unwrap_or(funcs.len());
    let inside = &funcs[..end];
    let mut i = inside.len().checked_sub(1)?;
    // The main goroutine runs main.main from runtime.main.
    while i > 0 && (is_go_wrapper(&inside[i].name) || &*inside[i].name == "runtime.main") {
        i -= 1;
    }
    Some(&inside[i].name)
}

/// The Go runtime's and standard library's own part of a stack.
fn is_runtime(name: &str) -> bool {
    [
        "runtime.",
        "internal/",
        "sync.",
        "time.",
        "net.",
        "internal/poll.",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// `main.contender → sync.(*Mutex).Lock`: the innermost frame of the
/// program and the call it made into the runtime.
fn site(funcs: &[Func]) -> Option<String> {
    let app = funcs.iter().position(|f| !is_runtime(&f.name))?;
    let mut label = funcs[app].name.to_string();
    if let Some(called) = app.checked_sub(1).map(|i| &funcs[i]) {
        label.push_str(" → ");
        label.push_str(&called.name);
    }
    Some(label)
}

#[derive(Default)]
struct RowAcc {
    goids: std::collections::BTreeSet<u64>,
    samples: GoSamples,
    reasons: FxHashMap<String, u64>,
    wakers: FxHashMap<u64, u64>,
    waited_on: FxHashMap<String, u64>,
    sites: FxHashMap<String, u64>,
}

fn sorted(m: impl IntoIterator<Item = (String, u64)>) -> Vec<Named> {
    let mut v: Vec<Named> = m
        .into_iter()
        .map(|(name, samples)| Named { name, samples })
        .collect();
    v.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.name.cmp(&b.name)));
    v
}

/// The goroutine rows of the processes `keep` keeps.
pub fn goroutines(trace: &Trace, keep: impl Fn(u32) -> bool) -> Goroutines {
    let mut r = Resolver::new(trace);
    let waits: Vec<(&GoWait, String, Option<String>)> = trace
        .go_waits
        .iter()
        .filter(|g| keep(g.pid))
        .map(|g| {
            let funcs = r.stack(g.stack);
            let start = start_function(&funcs).map_or_else(|| "[unknown]".into(), String::from);
            (g, start, site(&funcs))
        })
        .collect();
    // Wakers are named by their own start function where they parked too.
    let names: FxHashMap<(u32, u64), &str> = waits
        .iter()
        .map(|(g, start, _)| ((g.pid, g.goid), start.as_str()))
        .collect();
    let mut rows: FxHashMap<(u32, &str), RowAcc> = FxHashMap::default();
    let mut out = Goroutines::default();
    for (g, start, site) in &waits {
        let n = u64::from(g.weight);
        if start.starts_with("runtime.") {
            out.set_aside += n + u64::from(g.sched_weight);
            continue;
        }
        let row = rows.entry((g.pid, start.as_str())).or_default();
        row.goids.insert(g.goid);
        let kind = GoKind::of(&g.reason);
        row.samples.add(kind, n);
        row.samples.runnable += u64::from(g.sched_weight);
        *row.reasons.entry(g.reason.clone()).or_default() += n;
        if g.wake != 0 && n > 0 {
            *row.wakers.entry(g.waker_goid).or_default() += n;
        }
        if let (Some(w), GoKind::Io) = (&g.waited_on, kind) {
            *row.waited_on.entry(w.clone()).or_default() += n;
        }
        if let Some(s) = site {
            *row.sites.entry(s.clone()).or_default() += n + u64::from(g.sched_weight);
        }
    }
    out.rows = rows
        .into_iter()
        .map(|((pid, function), a)| {
            let mut reasons: Vec<GoReason> = a
                .reasons
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .map(|(name, samples)| GoReason {
                    kind: GoKind::of(&name),
                    name,
                    samples,
                })
                .collect();
            reasons.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.name.cmp(&b.name)));
            let waker_name = |goid: u64| match (goid, names.get(&(pid, goid))) {
                (0, _) => "no goroutine (a timer or the network poller)".to_string(),
                (_, Some(f)) => (*f).to_string(),
                (_, None) => format!("goroutine {goid}"),
            };
            let mut wakers: FxHashMap<String, u64> = FxHashMap::default();
            for (goid, n) in a.wakers {
                *wakers.entry(waker_name(goid)).or_default() += n;
            }
            GoroutineRow {
                pid,
                function: function.to_string(),
                goroutines: a.goids.len(),
                samples: a.samples,
                reasons,
                wakers: sorted(wakers),
                waited_on: sorted(a.waited_on),
                sites: sorted(a.sites),
            }
        })
        .collect();
    out.rows.sort_by(|a, b| {
        b.samples
            .total()
            .cmp(&a.samples.total())
            .then_with(|| a.function.cmp(&b.function))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    fn funcs(names: &[&str]) -> Vec<Func> {
        names
            .iter()
            .map(|n| Func {
                name: Rc::from(*n),
                dso: Rc::from("prog"),
                file: None,
                line: 0,
                kernel: false,
                inlined: false,
            })
            .collect()
    }

    #[test]
    fn a_goroutine_is_named_by_the_function_its_go_statement_started() {
        let mutex = funcs(&[
            "runtime.gopark",
            "runtime.semacquire1",
            "internal/sync.runtime_SemacquireMutex",
            "internal/sync.(*Mutex).lockSlow",
            "main.contender",
            "main.main.gowrap2",
            "runtime.goexit",
        ]);
        assert_eq!(start_function(&mutex), Some("main.contender"));
        assert_eq!(
            site(&mutex).as_deref(),
            Some("main.contender → internal/sync.(*Mutex).lockSlow")
        );
        // A closure is its own start function.
        let closure = funcs(&["runtime.gopark", "main.main.func1", "runtime.goexit"]);
        assert_eq!(start_function(&closure), Some("main.main.func1"));
        let main = funcs(&[
            "runtime.gopark",
            "main.main",
            "runtime.main",
            "runtime.goexit",
        ]);
        assert_eq!(start_function(&main), Some("main.main"));
        // A stack cut before goexit: the outermost frame there is.
        let cut = funcs(&["runtime.gopark", "main.deep", "main.deeper"]);
        assert_eq!(start_function(&cut), Some("main.deeper"));
        assert_eq!(start_function(&[]), None);
        assert!(is_go_wrapper("main.main.gowrap12") && !is_go_wrapper("main.gowrapper"));
    }

    #[test]
    fn wait_reasons_are_classified_by_what_they_wait_for() {
        for (reason, kind) in [
            ("sync.Mutex.Lock", GoKind::Contention),
            ("sync.RWMutex.RLock", GoKind::Contention),
            ("sync.RWMutex.Lock", GoKind::Contention),
            ("chan receive", GoKind::Signal),
            ("chan send (nil chan)", GoKind::Signal),
            ("select", GoKind::Signal),
            ("select (no cases)", GoKind::Signal),
            ("sync.Cond.Wait", GoKind::Signal),
            ("sync.WaitGroup.Wait", GoKind::Signal),
            ("semacquire", GoKind::Signal),
            ("IO wait", GoKind::Io),
            ("sleep", GoKind::Other),
            ("GC assist wait", GoKind::Other),
            ("wait reason 99", GoKind::Other),
        ] {
            assert_eq!(GoKind::of(reason), kind, "{reason}");
        }
    }
}
