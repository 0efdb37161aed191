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
//! sample a search (one entry of a table of the thread's stretches of
//! time, then the few intervals of one stretch) and a walk over the
//! intervals its chain overlaps: linear in the trace (see
//! [`Stats::work`]).

mod critical;
mod groups;
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
use groups::{Group, GroupKey, Groups};
use holdup_trace::{Class, Sample, StackId, Trace, Waker};
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
    /// Work done: intervals visited, pieces made, and elements of the time
    /// lines looked at by the searches. It grows with the trace, not
    /// faster, if no search scans.
    pub work: u64,
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

/// A wait to split, with all its splitting reads of its sample, copied
/// out in the trace's order.
#[derive(Clone, Copy, Debug)]
struct Wait {
    time: u64,
    wake: u64,
    waker: Waker,
    weight: u32,
    sched_weight: u32,
    /// The sample's number: paths are numbered by it.
    number: u32,
    /// Where the chain starts, for a wait another thread ended.
    start: Option<walk::Start>,
}

impl Wait {
    /// A place not yet filled.
    const NONE: Wait = Wait {
        time: 0,
        wake: 0,
        waker: Waker::None,
        weight: 0,
        sched_weight: 0,
        number: 0,
        start: None,
    };
}

/// Follow the waits of the threads `keep` accepts.
///
/// The samples are read twice, in the trace's order, which is close to
/// the order of time: once to number the waiters and count their waits,
/// then to copy what splitting needs straight into its waiter's places
/// (no list of all the waits in the trace's order made first and
/// reordered after), and there the chain of each wait another thread
/// ended is found where it starts (each search on a time line begins
/// where the last left it, in memory the cache still holds). The waits are then split waiter
/// by waiter, each waiter's in the trace's order: its groups are few and
/// close at hand, and become parts as soon as its last wait is split. A
/// group's sums are still made in the trace's order, and the paths
/// numbered as if the waits had been split in it, so the parts are those
/// of splitting wait after wait, to the bit.
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
    // Each sample's waiter number (NONE: not split), and each waiter with
    // how many waits it has.
    const NONE: u32 = u32::MAX;
    let mut numbers: FxHashMap<Waiter, u32> = FxHashMap::default();
    let mut waiters: Vec<(Waiter, usize)> = Vec::new();
    let mut number_of: Vec<u32> = Vec::with_capacity(trace.samples.len());
    for s in &trace.samples {
        let n = if keep(s.tid) {
            let followed = followed(s).is_some();
            count(&mut stats, s, followed, trace.header.start_ns);
            if followed || scope == Scope::Whole {
                let waiter = Waiter {
                    tid: s.tid,
                    class: s.class,
                    stack: s.stack,
                };
                let n = *numbers.entry(waiter).or_insert_with(|| {
                    waiters.push((waiter, 0));
                    (waiters.len() - 1) as u32
                });
                waiters[n as usize].1 += 1;
                n
            } else {
                NONE
            }
        } else {
            NONE
        };
        number_of.push(n);
    }
    drop(numbers);
    // The waits to split, waiter after waiter, each waiter's in the
    // trace's order, copied out straight into their places.
    let mut at: Vec<usize> = Vec::with_capacity(waiters.len());
    let mut sum = 0;
    for w in &waiters {
        at.push(sum);
        sum += w.1;
    }
    let mut by_waiter = vec![Wait::NONE; sum];
    let mut walker = walk::Walker::default();
    for (i, (s, &n)) in trace.samples.iter().zip(&number_of).enumerate() {
        if n == NONE {
            continue;
        }
        let holder = followed(s).map(|(_, holder)| holder);
        by_waiter[at[n as usize]] = Wait {
            time: s.time,
            wake: s.wake,
            waker: s.waker,
            weight: s.weight,
            sched_weight: s.sched_weight,
            number: i as u32,
            start: holder.map(|h| walker.start(&index, h, s.time)),
        };
        at[n as usize] += 1;
    }
    drop(number_of);
    let mut parts = Vec::new();
    let mut waits = by_waiter.as_slice();
    for &(waiter, len) in &waiters {
        let (mine, rest) = waits.split_at(len);
        waits = rest;
        let mut groups = Groups::default();
        for w in mine {
            paths.splitting(w.number);
            split(
                (waiter, w),
                scope,
                (&index, &mut paths, &mut walker),
                &mut groups,
            );
        }
        for (key, g) in groups.into_all() {
            place(waiter, key, &g, &mut parts, &mut stats);
        }
    }
    let renumbered = paths.renumber();
    for p in &mut parts {
        p.path = renumbered[p.path as usize];
    }
    // Deterministic order: heaviest first, then by key.
    parts.sort_by(|a, b| {
        b.points
            .total_cmp(&a.points)
            .then_with(|| (a.waiter, a.path, a.tid, a.end).cmp(&(b.waiter, b.path, b.tid, b.end)))
            .then_with(|| a.stack.cmp(&b.stack))
    });
    stats.work = walker.work;
    Attribution {
        parts,
        paths,
        stats,
    }
}

/// The class of a wait another thread ended, and that thread: the waits
/// that are split down their chains.
fn followed(s: &Sample) -> Option<(Class, u32)> {
    match (s.class, s.waker) {
        (Class::Cpu | Class::Sched, _) => None,
        (c, Waker::Thread(holder)) if s.wake > s.time && s.weight > 0 => Some((c, holder)),
        _ => None,
    }
}

/// What a sample adds to the counts.
fn count(stats: &mut Stats, s: &Sample, followed: bool, start_ns: u64) {
    let points = f64::from(s.weight);
    if followed {
        stats.waits += 1;
        stats.points += points;
        if s.time <= start_ns {
            stats.cut_by_start += 1;
        }
    } else if !matches!(s.class, Class::Cpu | Class::Sched) {
        if s.waker.is_interrupt() {
            stats.interrupt_points += points;
        } else {
            stats.open_points += points;
        }
    }
}

/// Add one wait to its waiter's groups: a wait another thread ended,
/// split down its chain, and with [`Scope::Whole`] the waiter's own time.
fn split(
    (waiter, w): (Waiter, &Wait),
    scope: Scope,
    (index, paths, walker): (&Index, &mut Paths, &mut walk::Walker),
    groups: &mut Groups,
) {
    let whole = scope == Scope::Whole;
    let mut own = |end, points: f64| {
        if whole && points > 0.0 {
            let at = groups.of(DIRECT, waiter.tid);
            let g = groups.get(at, end);
            g.points += points;
            *g.known.entry(waiter.stack) += points;
        }
    };
    own(End::Runnable, f64::from(w.sched_weight));
    let points = f64::from(w.weight);
    let (Some(start), Waker::Thread(holder)) = (w.start, w.waker) else {
        own(
            match (waiter.class, w.waker) {
                (Class::Cpu, _) => End::Cpu,
                (Class::Sched, _) => End::Runnable,
                (c, k) if k.is_interrupt() => End::Outside(c, k),
                (c, _) => End::Unwoken(c),
            },
            points,
        );
        return;
    };
    let path = if whole {
        paths.child(DIRECT, waiter.tid, waiter.class)
    } else {
        DIRECT
    };
    let per_ns = points / (w.wake - w.time) as f64;
    // The groups of the stretch the last piece came from.
    let mut last: Option<(PathId, u32, usize)> = None;
    walker.walk(
        index,
        paths,
        (holder, start, path),
        (w.time, w.wake),
        &mut |p, cpu| {
            let pts = per_ns * (p.to - p.from) as f64;
            let at = match last {
                Some((path, tid, at)) if (path, tid) == (p.path, p.tid) => at,
                _ => groups.of(p.path, p.tid),
            };
            last = Some((p.path, p.tid, at));
            let g = groups.get(at, p.end);
            g.points += pts;
            for c in cpu {
                *g.hints.entry(c.stack) += f64::from(c.weight);
            }
            // Only off-CPU pieces have a stack: their blocked sample's.
            if let Some(st) = p.stack {
                *g.known.entry(st) += pts;
            }
        },
    );
}

/// A group's parts: the pieces its own blocked samples name keep their
/// stacks; the rest is spread over them, or, with none, over the on-CPU
/// samples found inside its pieces.
fn place(
    waiter: Waiter,
    (path, tid, end): GroupKey,
    g: &Group,
    parts: &mut Vec<Part>,
    stats: &mut Stats,
) {
    match end {
        End::Unrecorded | End::Outside(_, Waker::Thread(_)) => stats.unrecorded_points += g.points,
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
    let known = g.known.in_map_order();
    let rest = (g.points - known.iter().map(|e| e.1).sum::<f64>()).max(0.0);
    let spread = if known.is_empty() {
        g.hints.in_map_order()
    } else {
        known
    };
    let total: f64 = spread.iter().map(|e| e.1).sum();
    if total <= 0.0 {
        part(None, rest);
    }
    for &(st, w) in &spread {
        let share = if total > 0.0 { rest * w / total } else { 0.0 };
        part(Some(st), g.known.get(st).copied().unwrap_or(0.0) + share);
    }
}
