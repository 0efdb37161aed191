//! What the holders did, per row of the report: every blocked row whose
//! waits other threads ended gets the activity of those threads over the
//! waits, by site and subclass, named as the report names sites.

use super::{attribute, Attribution, End, Part, PathId, Scope};
use crate::fxhash::FxHashMap;
use crate::profile::{self_function, Profile, Tag};
use crate::stacks::{lock_kind, site, LockKind, Resolver};
use holdup_trace::{Class, StackId, Trace, Waker};
use serde::Serialize;
use std::rc::Rc;

/// A thread passed on the way: it waited in `class` for the next one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Via {
    pub thread: String,
    pub tid: u32,
    pub class: Class,
}

/// One activity of the chain behind a row's waits.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Activity {
    /// The thread doing it (`comm:tid`).
    pub thread: String,
    pub tid: u32,
    /// Threads between the waiter and this one (empty: the thread that
    /// ended the wait).
    pub via: Vec<Via>,
    /// `cpu` on a CPU, `sched` runnable, else the subclass of its wait.
    pub class: Class,
    /// `cpu`, `runnable`, `interrupt` (a wait a device or timer ended),
    /// `woken_from_outside` (a wait a thread outside the recording ended),
    /// `unwoken` (no wakeup before the recording ended), `unrecorded`,
    /// `not_alive` (before its creation or after its exit), `cut` (cycle).
    pub state: &'static str,
    /// For `interrupt` and `woken_from_outside`: what ended the wait
    /// (`irq:virtio1-req.0`, `irq:timer`, `tid:812`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub woken_by: Option<String>,
    /// Where it ran or waited, as the report names sites; none when no
    /// sample named it.
    pub site: Option<String>,
    /// Sampling points of the waiter's time.
    pub samples: f64,
}

impl Activity {
    /// The tag the report uses: `[.]` on a CPU, `[S]` runnable, the
    /// subclass of a wait.
    pub fn tag(&self) -> &'static str {
        match self.state {
            "unrecorded" | "not_alive" | "cut" => "[?]",
            _ => self.class.tag(),
        }
    }
}

/// Where the thread that ended a row's waits was when it woke the waiter
/// (its stack at the wakeup, named as a site), heaviest first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WokenAt {
    pub site: String,
    /// The heaviest stack of the site, `root;…;leaf` (kernel frames
    /// suffixed `_[k]`), as offwaketime shows a waker.
    pub stack: String,
    /// Sampling points of the waits woken there.
    pub samples: f64,
}

/// The activity behind one row's waits, heaviest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RowHeld {
    /// The row's points whose waits another thread ended (the rest was
    /// ended by interrupts, or by nothing).
    pub samples: f64,
    pub activities: Vec<Activity>,
    /// The wakers' stacks at the wakeups, where the recorder took them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub woken_at: Vec<WokenAt>,
}

fn state_name(end: End) -> &'static str {
    match end {
        End::Cpu => "cpu",
        End::Runnable => "runnable",
        End::Outside(_, w) if w.is_interrupt() => "interrupt",
        End::Outside(..) => "woken_from_outside",
        End::Unwoken(_) => "unwoken",
        End::Unrecorded => "unrecorded",
        End::NotAlive => "not_alive",
        End::Cut => "cut",
    }
}

fn end_class(end: End) -> Class {
    match end {
        End::Cpu => Class::Cpu,
        End::Runnable => Class::Sched,
        End::Outside(c, _) | End::Unwoken(c) => c,
        End::Unrecorded | End::NotAlive | End::Cut => Class::Other,
    }
}

/// A row of the report as the profile names it: (dso, site or function,
/// lock kind).
type RowName = (Rc<str>, Rc<str>, Option<LockKind>);

/// Names of stacks, as rows and as activity sites, worked out once each.
pub(crate) struct Names<'t> {
    resolver: Resolver<'t>,
    rows: FxHashMap<(StackId, Class), RowName>,
    sites: FxHashMap<(StackId, bool), Rc<str>>,
}

impl<'t> Names<'t> {
    pub fn new(trace: &'t Trace) -> Self {
        Names {
            resolver: Resolver::new(trace),
            rows: FxHashMap::default(),
            sites: FxHashMap::default(),
        }
    }

    pub fn trace(&self) -> &'t Trace {
        self.resolver.trace()
    }

    /// The blocked row a waiter's samples fall in (as the profile keys it).
    pub fn row(&mut self, stack: StackId, class: Class) -> RowName {
        if let Some(r) = self.rows.get(&(stack, class)) {
            return r.clone();
        }
        let funcs = self.resolver.stack(stack);
        let (dso, name) = match site(&funcs) {
            Some(s) => (s.dso, Rc::from(s.label.as_str())),
            None => self_function(&funcs, true).map_or_else(
                || (Rc::from("[unknown]"), Rc::from("[unknown]")),
                |f| (f.dso.clone(), f.name.clone()),
            ),
        };
        let kind = (class == Class::Lock).then(|| lock_kind(&funcs));
        let r = (dso, name, kind);
        self.rows.insert((stack, class), r.clone());
        r
    }

    /// Where an activity ran or waited: its site, or its innermost
    /// function.
    pub fn site(&mut self, stack: StackId, on_cpu: bool) -> Rc<str> {
        if let Some(s) = self.sites.get(&(stack, on_cpu)) {
            return s.clone();
        }
        let funcs = self.resolver.stack(stack);
        let s: Rc<str> = match site(&funcs) {
            Some(s) => Rc::from(s.label.as_str()),
            None => self_function(&funcs, !on_cpu)
                .map_or_else(|| Rc::from("[unknown]"), |f| f.name.clone()),
        };
        self.sites.insert((stack, on_cpu), s.clone());
        s
    }

    /// A stack folded, `root;…;leaf`.
    pub fn folded(&mut self, stack: StackId) -> String {
        let mut line = String::new();
        crate::folded::push_frames(&mut line, &self.resolver.stack(stack));
        line.split_off(line.len().min(1))
    }

    /// The activity of a part, its stack named as a site.
    pub fn site_of(&mut self, p: &Part) -> Option<Rc<str>> {
        p.stack.map(|s| self.site(s, p.end == End::Cpu))
    }

    pub fn activity(&self, a: &Attribution, key: &ActivityKey, samples: f64) -> Activity {
        let trace = self.trace();
        let &(path, tid, end, ref site) = key;
        let via = a
            .paths
            .hops(path)
            .into_iter()
            .map(|h| Via {
                thread: trace.waker_name(Waker::Thread(h.tid)),
                tid: h.tid,
                class: h.class,
            })
            .collect();
        Activity {
            thread: trace.waker_name(Waker::Thread(tid)),
            tid,
            via,
            class: end_class(end),
            state: state_name(end),
            woken_by: match end {
                End::Outside(_, w) => Some(trace.waker_name(w)),
                _ => None,
            },
            site: site.as_ref().map(|s| s.to_string()),
            samples,
        }
    }
}

/// What tells activities apart: path, thread, state and site.
pub(crate) type ActivityKey = (PathId, u32, End, Option<Rc<str>>);

/// Heaviest first, then by name, so that output does not depend on hashing.
pub(crate) fn sort_activities(v: &mut [Activity]) {
    v.sort_by(|a, b| {
        b.samples
            .total_cmp(&a.samples)
            .then_with(|| a.thread.cmp(&b.thread))
            .then_with(|| a.site.cmp(&b.site))
            .then_with(|| a.class.cmp(&b.class))
    });
}

/// Wakeup sites by weight, heaviest first (then by name), each with its
/// heaviest stack.
fn woken_at(names: &mut Names, by_stack: FxHashMap<StackId, f64>) -> Vec<WokenAt> {
    let mut stacks: Vec<(StackId, f64)> = by_stack.into_iter().collect();
    stacks.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut v: Vec<WokenAt> = Vec::new();
    for (stack, samples) in stacks {
        let site = names.site(stack, true);
        match v.iter_mut().find(|w| *w.site == *site) {
            Some(w) => w.samples += samples,
            None => v.push(WokenAt {
                site: site.to_string(),
                stack: names.folded(stack),
                samples,
            }),
        }
    }
    v.sort_by(|a, b| b.samples.total_cmp(&a.samples).then(a.site.cmp(&b.site)));
    v
}

/// Fill in `while_held` of the blocked rows of every one-thread section
/// (merged sections mix waiters; their rows are left as they are).
pub fn annotate(trace: &Trace, profile: &mut Profile) {
    let tids: std::collections::HashSet<u32> = profile
        .threads
        .iter()
        .filter(|t| t.threads == 1 && t.tid != 0)
        .map(|t| t.tid)
        .collect();
    // Most reports have no wait another thread ended: skip the index.
    let followed = |s: &holdup_trace::Sample| {
        tids.contains(&s.tid)
            && s.class != Class::Cpu
            && matches!(s.waker, Waker::Thread(_))
            && s.wake > s.time
    };
    if !trace.samples.iter().any(followed) {
        return;
    }
    let a = attribute(trace, &|tid| tids.contains(&tid), Scope::Held);
    let mut names = Names::new(trace);
    type RowKey = (u32, Class, RowName);
    let mut rows: FxHashMap<RowKey, (f64, FxHashMap<ActivityKey, f64>)> = FxHashMap::default();
    let mut woken: FxHashMap<RowKey, FxHashMap<StackId, f64>> = FxHashMap::default();
    // The points of every followed wait, per row, including waits whose
    // chain splits into no part worth keeping.
    for s in &trace.samples {
        if followed(s) {
            let key = (s.tid, s.class, names.row(s.stack, s.class));
            if s.waker_stack != 0 {
                let w = woken.entry(key.clone()).or_default();
                *w.entry(s.waker_stack).or_default() += f64::from(s.weight);
            }
            rows.entry(key).or_default().0 += f64::from(s.weight);
        }
    }
    for p in &a.parts {
        let w = p.waiter;
        let key = (w.tid, w.class, names.row(w.stack, w.class));
        let act = (p.path, p.tid, p.end, names.site_of(p));
        *rows.entry(key).or_default().1.entry(act).or_default() += p.points;
    }
    let mut rows: FxHashMap<RowKey, Rc<RowHeld>> = rows
        .into_iter()
        .map(|(k, (samples, acts))| {
            let mut activities: Vec<Activity> = acts
                .iter()
                .map(|(key, &n)| names.activity(&a, key, n))
                .collect();
            sort_activities(&mut activities);
            let woken_at = woken_at(&mut names, woken.remove(&k).unwrap_or_default());
            (
                k,
                Rc::new(RowHeld {
                    samples,
                    activities,
                    woken_at,
                }),
            )
        })
        .collect();
    for t in profile.threads.iter_mut().filter(|t| tids.contains(&t.tid)) {
        for r in &mut t.rows {
            if let Tag::Blocked(class) = r.tag {
                let key = (t.tid, class, (r.dso.clone(), r.symbol.clone(), r.lock_kind));
                r.while_held = rows.remove(&key);
            }
        }
    }
}
