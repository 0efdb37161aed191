//! The chain behind one wait: what the thread that ended it did over the
//! waiter's `[switch-out, wakeup)`, and, where that thread was itself
//! waiting for another thread, what that one did over the overlap, and so
//! on (wPerf's cascade, §4.2, followed for one waiter at a time).
//!
//! Each level splits its stretch of time among the thread's own states
//! (on a CPU, runnable, waiting), and only the waits that another thread
//! ended go one level deeper, clipped to the stretch. So every nanosecond
//! of the waiter's interval ends in exactly one piece: nothing is counted
//! twice, and the pieces add up to the interval.

use super::index::{Index, Line, OnCpu};
use super::paths::{PathId, Paths};
use holdup_trace::{Class, StackId, Waker};
use std::cell::Cell;

/// Chains longer than this are cut (a corrupt trace could make a cycle:
/// a waker runs before the thread it wakes, so real chains cannot loop).
pub const MAX_DEPTH: usize = 64;

/// What the end of a chain was doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum End {
    /// Running on a CPU.
    Cpu,
    /// Runnable, waiting for a core (after a wakeup, or preempted).
    Runnable,
    /// Waiting in `class` until something outside the recorded threads
    /// ended the wait: an interrupt (a device, a timer; never the thread it
    /// interrupted), or a thread the recording does not hold (a kernel
    /// thread such as the file system's journal, another process).
    Outside(Class, Waker),
    /// Waiting in `class` with no wakeup seen: still waiting when the
    /// recording ended, or woken by nothing the recorder saw.
    Unwoken(Class),
    /// A thread whose time the recording does not hold (another process,
    /// a kernel thread), seen only as the waker of the wait explained.
    Unrecorded,
    /// Before the thread was created or after it exited.
    NotAlive,
    /// Deeper than [`MAX_DEPTH`], or a thread waiting on itself: a cycle
    /// no real trace has.
    Cut,
}

/// One stretch of the waiter's interval: `tid` was in state `end`
/// (with the stack of its blocked sample, for off-CPU pieces) over
/// `[from, to)`, reached through `path`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Piece {
    pub path: PathId,
    pub tid: u32,
    pub end: End,
    pub stack: Option<StackId>,
    pub from: u64,
    pub to: u64,
}

/// Where a chain starts: the time line of the thread that ended the wait
/// (none when the recording does not hold it), and the first of its
/// intervals the window may overlap.
#[derive(Clone, Copy, Debug)]
pub struct Start {
    line: Option<Line>,
    first: u32,
}

/// What is still to be split: `tid` (its time line `line`, if recorded)
/// over `[from, to)`.
struct Todo {
    tid: u32,
    line: Option<Line>,
    /// The first interval of the line that may overlap, if already found.
    first: Option<u32>,
    from: u64,
    to: u64,
    path: PathId,
    depth: usize,
}

impl Todo {
    fn piece(&self, end: End, stack: Option<StackId>, from: u64, to: u64) -> Piece {
        Piece {
            path: self.path,
            tid: self.tid,
            end,
            stack,
            from,
            to,
        }
    }
}

/// Reused between windows: the explicit stack of stretches to split.
#[derive(Default)]
pub struct Walker {
    todo: Vec<Todo>,
    /// Intervals visited, pieces emitted, and elements of the time lines
    /// looked at by the searches: the work of the attribution, which would
    /// grow faster than the trace if a search scanned.
    pub work: u64,
}

impl Walker {
    /// Where the chain of `tid` over a window that opens at `from` starts.
    /// Asked in the order of time, each search on a time line begins close
    /// to where the last one ended, in memory the cache still holds.
    pub fn start(&mut self, index: &Index, tid: u32, from: u64) -> Start {
        let Some(line) = index.line_of(tid) else {
            return Start {
                line: None,
                first: 0,
            };
        };
        let tl = &index.lines[line as usize];
        let work = Cell::new(0);
        let first = tl.first_off(from.max(tl.alive.0), &work);
        self.work += work.get();
        Start {
            line: Some(line),
            first: first as u32,
        }
    }

    /// Split `[from, to)` of `tid` (the thread that ended the wait, its
    /// chain starting at `start`, found for `from`) into pieces, reached
    /// through `path`; `emit` gets each, together with the
    /// thread's on-CPU samples inside it if it was on a CPU.
    pub fn walk(
        &mut self,
        index: &Index,
        paths: &mut Paths,
        (tid, start, path): (u32, Start, PathId),
        window: (u64, u64),
        emit: &mut dyn FnMut(Piece, &[OnCpu]),
    ) {
        self.todo.push(Todo {
            tid,
            line: start.line,
            first: Some(start.first),
            from: window.0,
            to: window.1,
            path,
            depth: 0,
        });
        let work = Cell::new(0u64);
        let one_more = || work.set(work.get() + 1);
        while let Some(w) = self.todo.pop() {
            let Some(line) = w.line else {
                one_more();
                emit(w.piece(End::Unrecorded, None, w.from, w.to), &[]);
                continue;
            };
            let tl = &index.lines[line as usize];
            let (from, to) = (w.from.max(tl.alive.0), w.to.min(tl.alive.1));
            // The interval a piece on the CPU ends before.
            let next = Cell::new(match w.first {
                Some(i) => i as usize,
                None => tl.first_off(from, &work),
            });
            let mut emit = |end, stack, from, to| {
                one_more();
                let cpu = if end == End::Cpu {
                    tl.cpu_in((from, to), next.get(), &work)
                } else {
                    &[]
                };
                emit(w.piece(end, stack, from, to), cpu)
            };
            if from >= to {
                emit(End::NotAlive, None, w.from, w.to);
                continue;
            }
            if w.from < from {
                emit(End::NotAlive, None, w.from, from);
            }
            if to < w.to {
                emit(End::NotAlive, None, to, w.to);
            }
            let mut cursor = from;
            for (i, o) in tl.off.iter().enumerate().skip(next.get()) {
                if o.start >= to {
                    break;
                }
                one_more();
                if o.start > cursor {
                    emit(End::Cpu, None, cursor, o.start);
                    cursor = o.start;
                }
                let (wake, end) = tl.wake_end(i);
                let wait_to = wake.min(to);
                if cursor < wait_to {
                    match index.waker(o) {
                        (waker @ Waker::Thread(_), None) => {
                            emit(End::Outside(o.class, waker), o.stack(), cursor, wait_to)
                        }
                        (Waker::Thread(t), Some(theirs))
                            if theirs != line && w.depth < MAX_DEPTH =>
                        {
                            self.todo.push(Todo {
                                tid: t,
                                line: Some(theirs),
                                first: None,
                                from: cursor,
                                to: wait_to,
                                path: paths.child(w.path, w.tid, o.class),
                                depth: w.depth + 1,
                            })
                        }
                        (Waker::Thread(_), _) => emit(End::Cut, o.stack(), cursor, wait_to),
                        (Waker::None, _) => emit(End::Unwoken(o.class), o.stack(), cursor, wait_to),
                        (irq, _) => emit(End::Outside(o.class, irq), o.stack(), cursor, wait_to),
                    }
                    cursor = wait_to;
                }
                let run_to = end.min(to);
                if cursor < run_to {
                    emit(End::Runnable, o.stack(), cursor, run_to);
                    cursor = run_to;
                }
                next.set(next.get() + 1);
            }
            if cursor < to {
                emit(End::Cpu, None, cursor, to);
            }
        }
        self.work += work.get();
    }
}
