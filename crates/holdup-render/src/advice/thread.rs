//! Advice for one thread of the report: the kind of waiting that
//! dominates it (bperf §3.2), or its CPU.

use super::{cpu_bound_text, pct};
use holdup_analysis::is_cpu_bound;
use holdup_analysis::profile::ThreadProfile;
use holdup_analysis::stacks::LockKind;
use holdup_trace::Class;

/// What a thread's off-CPU time went to, for advice: lock waits count
/// apart by what they waited for.
#[derive(Clone, Copy, PartialEq)]
enum Waiting {
    Class(Class),
    Lock(LockKind),
    /// Nothing to do: lock waits of the idle kind and idle polls or sleeps.
    Idle,
}

/// One line of advice when one kind of waiting dominates a thread (bperf
/// §3.2). Waiting for a mutex is contention; waiting for a signal (a
/// parked worker, a joiner, a timer thread) is idleness, not a lock
/// problem; a runtime's thread waiting for work (a Go scheduler thread, an
/// event loop) is idle whatever it waits in.
pub fn thread(t: &ThreadProfile) -> Option<String> {
    if let Some(a) = cpu_bound(t) {
        return Some(a);
    }
    let total = t.samples.total();
    let (what, n) = [
        Waiting::Class(Class::Io),
        Waiting::Lock(LockKind::Mutex),
        Waiting::Lock(LockKind::Signal),
        Waiting::Lock(LockKind::Gil),
        Waiting::Idle,
        Waiting::Class(Class::Sched),
        Waiting::Class(Class::Other),
    ]
    .into_iter()
    .map(|w| {
        let n = match w {
            // Idle polls and sleeps count as idle, not as other waits.
            Waiting::Class(Class::Other) => t.samples.other - t.idle.other(&t.lock_split),
            Waiting::Class(c) => t.samples.get(c),
            Waiting::Lock(k) => t.lock_split.get(k),
            Waiting::Idle => t.idle.samples,
        };
        (w, n)
    })
    .max_by_key(|&(_, n)| n)?;
    let share = pct(n, total);
    if share < 25.0 {
        return None;
    }
    Some(match what {
        Waiting::Class(Class::Io) => format!(
            "{share:.0}% waiting for I/O: a faster device or asynchronous I/O would pay (`holdup causal run --subclass io -- CMD` predicts how much)"
        ),
        Waiting::Class(Class::Sched) => format!(
            "{share:.0}% runnable but not running: more cores or fewer runnable threads would pay"
        ),
        Waiting::Lock(LockKind::Mutex) => format!(
            "{share:.0}% waiting for mutexes held by other threads: shorten the critical sections of the holders or split the lock (`holdup waitgraph` shows whom it waits for)"
        ),
        Waiting::Lock(LockKind::Signal) => format!(
            "{share:.0}% idle, waiting for a signal (condition variable, join, barrier, semaphore): not contention; it only costs if this thread should be busy, then its signaller is late (`holdup waitgraph` shows who signals it)"
        ),
        Waiting::Lock(LockKind::Gil) => format!(
            "{share:.0}% waiting for the GIL another Python thread holds: Python code in threads runs one at a time; move the CPU-bound work to processes or to C that releases the GIL (`holdup waitgraph` shows who holds it)"
        ),
        Waiting::Idle => format!(
            "{share:.0}% idle ({}): not contention; it only costs if this thread should be busy",
            t.idle.why.unwrap_or("waiting for work")
        ),
        _ => format!(
            "{share:.0}% blocked on sleeps, pipes, sockets or polls: `holdup waitgraph` shows whom it waits for"
        ),
    })
}

/// A thread running or runnable nearly all its life waits for nobody: its
/// CPU is the bottleneck (wPerf's sink), whatever its few waits are.
fn cpu_bound(t: &ThreadProfile) -> Option<String> {
    let total = t.samples.total();
    let on = t.samples.get(Class::Cpu);
    let runnable = t.samples.get(Class::Sched);
    if total < 20 || !is_cpu_bound(on + runnable, total) {
        return None;
    }
    let (shares, rest) = cpu_bound_text(pct(on, total), pct(runnable, total));
    Some(shares + rest)
}
