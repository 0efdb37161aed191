//! The critical path of a thread: its whole time, each wait another thread
//! ended replaced by what the chain behind it did, so that every sample
//! ends on CPU code, a device, the runqueue, or a wait nobody ended.
//! As a table (per thread, heaviest activities first) and as folded
//! stacks for a flame graph, in which a wait is a frame naming the
//! subclass and the thread it waited for.

use super::rows::{sort_activities, ActivityKey, Names};
use super::{attribute, Activity, End, Scope, Stats};
use crate::folded::{leaf_name, push_frames};
use crate::fxhash::FxHashMap;
use crate::stacks::Resolver;
use holdup_trace::{Trace, Waker};

/// One thread's time, by activity along its chains.
#[derive(Clone, Debug, PartialEq)]
pub struct CriticalPath {
    pub tid: u32,
    pub pid: u32,
    /// `comm:tid`.
    pub thread: String,
    /// All its sampling points.
    pub samples: f64,
    /// Its own activities have an empty `via` and its own tid; the others
    /// start `via` with its own wait.
    pub activities: Vec<Activity>,
}

/// The critical paths of the threads `keep` accepts, most samples first.
pub fn critical_paths(trace: &Trace, keep: &dyn Fn(u32) -> bool) -> (Vec<CriticalPath>, Stats) {
    let a = attribute(trace, keep, Scope::Whole);
    let mut names = Names::new(trace);
    let mut per: FxHashMap<u32, FxHashMap<ActivityKey, f64>> = FxHashMap::default();
    for p in &a.parts {
        let key = (p.path, p.tid, p.end, names.site_of(p));
        *per.entry(p.waiter.tid).or_default().entry(key).or_default() += p.points;
    }
    let mut out: Vec<CriticalPath> = per
        .into_iter()
        .map(|(tid, acts)| {
            let mut activities: Vec<Activity> = acts
                .iter()
                .map(|(k, &n)| names.activity(&a, k, n))
                .collect();
            sort_activities(&mut activities);
            CriticalPath {
                tid,
                pid: trace.threads.get(&tid).map_or(0, |t| t.pid),
                thread: trace.waker_name(Waker::Thread(tid)),
                samples: activities.iter().map(|x| x.samples).sum(),
                activities,
            }
        })
        .collect();
    out.sort_by(|x, y| y.samples.total_cmp(&x.samples).then(x.tid.cmp(&y.tid)));
    (out, a.stats)
}

/// Folded stacks of the critical path (weights in sampling points,
/// rounded): the waiter's stack, then one frame per wait of the chain
/// (`[L] wait for keeper:12`), then the stack of what the last thread did,
/// ending in its subclass as `holdup flame` ends blocked stacks.
pub fn critical_folded(trace: &Trace, keep: &dyn Fn(u32) -> bool) -> Vec<(String, u64)> {
    let a = attribute(trace, keep, Scope::Whole);
    let mut resolver = Resolver::new(trace);
    let mut acc: FxHashMap<String, f64> = FxHashMap::default();
    for p in &a.parts {
        let w = p.waiter;
        let comm = trace.threads.get(&w.tid).map_or("", |t| t.comm.as_str());
        let mut line = String::from(if comm.is_empty() { "[unknown]" } else { comm });
        push_frames(&mut line, &resolver.stack(w.stack));
        let hops = a.paths.hops(p.path);
        let waited_for = hops.iter().skip(1).map(|h| h.tid).chain([p.tid]);
        for (h, next) in hops.iter().zip(waited_for) {
            let name = trace.waker_name(Waker::Thread(next)).replace(';', ":");
            line.push_str(&format!(";{} wait for {name}", h.class.tag()));
        }
        if !hops.is_empty() {
            if let Some(st) = p.stack {
                push_frames(&mut line, &resolver.stack(st));
            }
        }
        let class = match p.end {
            End::Cpu => None,
            End::Runnable => Some(holdup_trace::Class::Sched),
            End::Outside(c, _) | End::Unwoken(c) => Some(c),
            End::Unrecorded => {
                line.push_str(";(not in the recording)");
                None
            }
            End::NotAlive => {
                line.push_str(";(not yet created or exited)");
                None
            }
            End::Cut => {
                line.push_str(";(a cycle: damaged trace)");
                None
            }
        };
        if let Some(leaf) = class.and_then(leaf_name) {
            line.push(';');
            line.push_str(leaf);
        }
        *acc.entry(line).or_default() += p.points;
    }
    let mut out: Vec<(String, u64)> = acc
        .into_iter()
        .map(|(k, v)| (k, v.round() as u64))
        .filter(|(_, v)| *v > 0)
        .collect();
    out.sort();
    out
}
