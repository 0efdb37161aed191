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

use super::index::{Index, Timeline};
use super::paths::{PathId, Paths};
use holdup_trace::{Class, StackId, Waker};

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

/// What is still to be split: `tid` over `[from, to)`.
struct Todo {
    tid: u32,
    from: u64,
    to: u64,
    path: PathId,
    depth: usize,
}

/// Reused between windows: the explicit stack of stretches to split.
#[derive(Default)]
pub struct Walker {
    todo: Vec<Todo>,
}

impl Walker {
    /// Split `[from, to)` of `tid` (the thread that ended the wait) into
    /// pieces, reached through `path`; `emit` gets each, together with the
    /// thread's time line (for its on-CPU samples).
    pub fn walk(
        &mut self,
        index: &Index,
        paths: &mut Paths,
        start: (u32, PathId),
        window: (u64, u64),
        emit: &mut dyn FnMut(Piece, Option<&Timeline>),
    ) {
        self.todo.push(Todo {
            tid: start.0,
            from: window.0,
            to: window.1,
            path: start.1,
            depth: 0,
        });
        while let Some(w) = self.todo.pop() {
            let piece = |end, stack, from, to| Piece {
                path: w.path,
                tid: w.tid,
                end,
                stack,
                from,
                to,
            };
            let Some(tl) = index.threads.get(&w.tid) else {
                emit(piece(End::Unrecorded, None, w.from, w.to), None);
                continue;
            };
            let (from, to) = (w.from.max(tl.alive.0), w.to.min(tl.alive.1));
            if from >= to {
                emit(piece(End::NotAlive, None, w.from, w.to), Some(tl));
                continue;
            }
            if w.from < from {
                emit(piece(End::NotAlive, None, w.from, from), Some(tl));
            }
            if to < w.to {
                emit(piece(End::NotAlive, None, to, w.to), Some(tl));
            }
            let mut cursor = from;
            for o in &tl.off[tl.first_off(from)..] {
                if o.start >= to {
                    break;
                }
                if o.start > cursor {
                    emit(piece(End::Cpu, None, cursor, o.start), Some(tl));
                    cursor = o.start;
                }
                let wait_to = o.wake.min(to);
                if cursor < wait_to {
                    match o.waker {
                        Waker::Thread(t) if !index.threads.contains_key(&t) => emit(
                            piece(End::Outside(o.class, o.waker), o.stack, cursor, wait_to),
                            Some(tl),
                        ),
                        Waker::Thread(t) if t != w.tid && w.depth < MAX_DEPTH => {
                            self.todo.push(Todo {
                                tid: t,
                                from: cursor,
                                to: wait_to,
                                path: paths.child(w.path, w.tid, o.class),
                                depth: w.depth + 1,
                            })
                        }
                        Waker::Thread(_) => {
                            emit(piece(End::Cut, o.stack, cursor, wait_to), Some(tl))
                        }
                        Waker::None => emit(
                            piece(End::Unwoken(o.class), o.stack, cursor, wait_to),
                            Some(tl),
                        ),
                        irq => emit(
                            piece(End::Outside(o.class, irq), o.stack, cursor, wait_to),
                            Some(tl),
                        ),
                    }
                    cursor = wait_to;
                }
                let run_to = o.end.min(to);
                if cursor < run_to {
                    emit(piece(End::Runnable, o.stack, cursor, run_to), Some(tl));
                    cursor = run_to;
                }
            }
            if cursor < to {
                emit(piece(End::Cpu, None, cursor, to), Some(tl));
            }
        }
    }
}
