//! What the holder was doing: for every blocked sample whose wait another
//! thread ended (a mutex released, a condition signalled, a pipe written),
//! what that thread did over the waiter's `[switch-out, wakeup)` — its
//! on-CPU code, its own waits with their subclass and site, its time on
//! the runqueue — and, where it was itself waiting for a thread, what that
//! one did, down the chain (wPerf's cascaded re-distribution, §4.2, kept
//! per waiter and per activity instead of summed per edge).
//!
//! A waiter's interval is split exactly (see [`walk`]): each nanosecond
//! ends on code running on a CPU, a thread waiting for a core, a wait an
//! interrupt (a device, a timer) ended, or a wait nobody ended within the
//! recording. The sample's weight is spread over the pieces by their
//! length. Off-CPU pieces are named by the blocked sample of their
//! interval; on-CPU pieces by the thread's on-CPU samples that fall in
//! them, pooled per waiting site and holder, so that critical sections
//! shorter than a period are still named in proportion.
//!
//! Cost: one sort of the segments and samples per thread, then per waiter
//! sample a bisection and a walk over the intervals its chain overlaps.

mod critical;
mod index;
mod inside;
mod paths;
pub(crate) mod rows;
#[cfg(test)]
pub(crate) mod tests;
mod walk;

pub use critical::{critical_folded, critical_paths, CriticalPath};
pub use inside::{inside_the_lock, HolderDoing, InsideTheLock};
pub use paths::{Hop, PathId, Paths, DIRECT};
pub use rows::{annotate, Activity, RowHeld, Via, WokenAt};
pub use walk::{End, Piece, MAX_DEPTH};

use crate::fxhash::FxHashMap;
use holdup_trace::{Class, StackId, Trace, Waker};
use index::Index;

/// The wait being explained: a thread's blocked samples of one subclass
/// and stack (so, one row of the report).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Waiter {
    pub tid: u32,
    pub class: Class,
    pub stack: StackId,
}

/// What a waiter's time went to: `tid` in state `end`, reached through
/// `path`, with the stack that names the activity (none when no sample
/// named it), worth `points` sampling points of the waiter.
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    pub waiter: Waiter,
    pub path: PathId,
    pub tid: u32,
    pub end: End,
    pub stack: Option<StackId>,
    pub points: f64,
}

/// What could not be followed, in sampling points of the waiters, and the
/// work done.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Waits followed to the thread that ended them.
    pub waits: u64,
    /// Their weight.
    pub points: f64,
    /// Waits an interrupt ended: a device or a timer, never the thread
    /// the interrupt ran on.
    pub interrupt_points: f64,
    /// Waits nobody ended before the recording's end.
    pub open_points: f64,
    /// Followed waits that began before the recording did: only their
    /// recorded part is split.
    pub cut_by_start: u64,
    /// Time of the chains spent in threads the recording does not hold,
    /// before a thread existed or after it exited, or cut as a cycle.
    pub unrecorded_points: f64,
    pub not_alive_points: f64,
    pub cut_points: f64,
    /// Scheduler events in the trace (a switch per segment, plus its
    /// wakeup), for the cost.
    pub events: u64,
}

impl Stats {
    /// One line for each thing a reader must know, none when all is well.
    pub fn notes(&self) -> Vec<String> {
        let mut v = Vec::new();
        let mut say = |n: f64, what: &str| {
            if n >= 0.5 {
                v.push(format!("{n:.0} samples {what}"));
            }
        };
        say(
            self.interrupt_points,
            "of waits ended by interrupts (a device or a timer, never the interrupted thread): not followed",
        );
        say(
            self.open_points,
            "of waits nobody ended before the recording's end: not followed",
        );
        say(
            self.unrecorded_points,
            "of chains end at threads outside the recording (seen only as wakers: another process, a kernel thread)",
        );
        say(
            self.not_alive_points,
            "of chains fall before a waker was created or after it exited",
        );
        say(
            self.cut_points,
            "of chains were cut as cycles (a damaged trace)",
        );
        if self.cut_by_start > 0 {
            v.push(format!(
                "{} waits began before the recording: only their recorded part is split",
                self.cut_by_start
            ));
        }
        v
    }
}

/// Pieces of one (waiter, path, thread, state), before stacks are placed.
#[derive(Default)]
struct Group {
    points: f64,
    /// Off-CPU pieces named by their own blocked sample, exactly.
    known: FxHashMap<StackId, f64>,
    /// On-CPU samples found inside on-CPU pieces: how to split the rest.
    hints: FxHashMap<StackId, f64>,
}

type GroupKey = (Waiter, PathId, u32, End);

/// The groups, in the order they were first met, with their keys.
///
/// Every piece of every chain is added to its group, so the lookup is the
/// hot spot: the waiter, the same for all pieces of a wait, is replaced by
/// a dense number once per wait, which leaves a smaller key to hash and
/// compare per piece.
#[derive(Default)]
struct Groups {
    all: Vec<(GroupKey, Group)>,
    waiters: FxHashMap<Waiter, u32>,
    ids: FxHashMap<(u32, PathId, u32, End), usize>,
}

/// A waiter with its number.
type Numbered = (Waiter, u32);

impl Groups {
    fn number(&mut self, waiter: Waiter) -> Numbered {
        let n = self.waiters.len() as u32;
        (waiter, *self.waiters.entry(waiter).or_insert(n))
    }

    /// The group of `waiter`'s pieces reached through `path` and ending
    /// on `tid` in state `end`.
    fn get(&mut self, (waiter, w): Numbered, path: PathId, tid: u32, end: End) -> &mut Group {
        let all = &mut self.all;
        let i = *self.ids.entry((w, path, tid, end)).or_insert_with(|| {
            all.push(((waiter, path, tid, end), Group::default()));
            all.len() - 1
        });
        &mut all[i].1
    }
}

/// Whether the waiter's own time (on-CPU, runnable, waits no thread ended)
/// is kept too: the critical path of a thread needs it, the activity of
/// holders under the rows of a report does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Only the waits another thread ended; paths start at that thread.
    Held,
    /// The whole time of the waiters; paths start with the waiter's own hop.
    Whole,
}

#[derive(Default)]
pub struct Attribution {
    pub parts: Vec<Part>,
    pub paths: Paths,
    pub stats: Stats,
}

/// Follow the waits of the threads `keep` accepts.
pub fn attribute(trace: &Trace, keep: &dyn Fn(u32) -> bool, scope: Scope) -> Attribution {
    let index = Index::new(trace);
    let mut paths = Paths::default();
    let mut stats = Stats {
        events: trace
            .segments
            .iter()
            .map(|s| 1 + u64::from(s.wake != 0))
            .sum(),
        ..Stats::default()
    };
    let mut groups = Groups::default();
    let mut walker = walk::Walker::default();
    let whole = scope == Scope::Whole;
    for s in &trace.samples {
        if !keep(s.tid) {
            continue;
        }
        let waiter = Waiter {
            tid: s.tid,
            class: s.class,
            stack: s.stack,
        };
        let numbered = groups.number(waiter);
        let mut own = |end, points: f64| {
            if whole && points > 0.0 {
                let g = groups.get(numbered, DIRECT, s.tid, end);
                g.points += points;
                *g.known.entry(s.stack).or_default() += points;
            }
        };
        own(End::Runnable, f64::from(s.sched_weight));
        let points = f64::from(s.weight);
        match (s.class, s.waker) {
            (Class::Cpu, _) => own(End::Cpu, points),
            (Class::Sched, _) => own(End::Runnable, points),
            (c, Waker::Thread(holder)) if s.wake > s.time && s.weight > 0 => {
                stats.waits += 1;
                stats.points += points;
                if s.time <= trace.header.start_ns {
                    stats.cut_by_start += 1;
                }
                let start = if whole {
                    paths.child(DIRECT, s.tid, c)
                } else {
                    DIRECT
                };
                let per_ns = points / (s.wake - s.time) as f64;
                walker.walk(
                    &index,
                    &mut paths,
                    (holder, start),
                    (s.time, s.wake),
                    &mut |p, tl| {
                        let pts = per_ns * (p.to - p.from) as f64;
                        let g = groups.get(numbered, p.path, p.tid, p.end);
                        g.points += pts;
                        match (p.end, p.stack, tl) {
                            (End::Cpu, _, Some(tl)) => {
                                for c in tl.cpu_in(p.from, p.to) {
                                    *g.hints.entry(c.stack).or_default() += f64::from(c.weight);
                                }
                            }
                            (_, Some(st), _) => *g.known.entry(st).or_default() += pts,
                            _ => {}
                        }
                    },
                );
            }
            (_, w) => {
                if w.is_interrupt() {
                    stats.interrupt_points += points;
                } else {
                    stats.open_points += points;
                }
                let end = if w.is_interrupt() {
                    End::Outside(s.class, w)
                } else {
                    End::Unwoken(s.class)
                };
                own(end, points);
            }
        }
    }
    let mut parts = Vec::with_capacity(groups.all.len());
    for ((waiter, path, tid, end), g) in groups.all {
        match end {
            End::Unrecorded | End::Outside(_, Waker::Thread(_)) => {
                stats.unrecorded_points += g.points
            }
            End::NotAlive => stats.not_alive_points += g.points,
            End::Cut => stats.cut_points += g.points,
            _ => {}
        }
        let mut part = |stack, points| {
            if points > 0.0 {
                parts.push(Part {
                    waiter,
                    path,
                    tid,
                    end,
                    stack,
                    points,
                })
            }
        };
        let known: f64 = g.known.values().sum();
        let rest = (g.points - known).max(0.0);
        let spread = if g.known.is_empty() {
            &g.hints
        } else {
            &g.known
        };
        let total: f64 = spread.values().sum();
        if total <= 0.0 {
            part(None, rest);
        }
        let known_of = |st: &StackId| g.known.get(st).copied().unwrap_or(0.0);
        for (st, w) in spread {
            let share = if total > 0.0 { rest * w / total } else { 0.0 };
            part(Some(*st), known_of(st) + share);
        }
    }
    // Deterministic order: heaviest first, then by key.
    parts.sort_by(|a, b| {
        b.points
            .total_cmp(&a.points)
            .then_with(|| (a.waiter, a.path, a.tid, a.end).cmp(&(b.waiter, b.path, b.tid, b.end)))
            .then_with(|| a.stack.cmp(&b.stack))
    });
    Attribution {
        parts,
        paths,
        stats,
    }
}
