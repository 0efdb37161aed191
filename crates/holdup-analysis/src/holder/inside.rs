//! What the holders did inside the critical section, for advice: when a
//! thread mostly waits for mutexes, what the holders did while it waited
//! says what to change (I/O, sleeps, allocations inside the critical
//! section, or a holder that waits for a core). The facts are found here;
//! the renderers word the advice.

use crate::profile::ThreadProfile;
use crate::stacks::LockKind;
use holdup_trace::Class;
use std::collections::HashMap;

/// Waiting below this share of a thread is not worth advice (as for the
/// other advice of the report).
const MIN_SHARE: f64 = 25.0;

/// Functions that allocate or free memory: an allocator inside a lock
/// serializes on the lock what it could do in parallel.
const ALLOCATORS: [&str; 8] = [
    "malloc",
    "calloc",
    "realloc",
    "free",
    "operator new",
    "operator delete",
    "mmap",
    "munmap",
];

fn pct(n: f64, total: f64) -> f64 {
    if total <= 0.0 {
        0.0
    } else {
        100.0 * n / total
    }
}

/// The innermost part of a site: the function called (`fdatasync`).
fn callee(site: &str) -> &str {
    site.rsplit(" → ").next().unwrap_or(site)
}

/// What the holders mostly did while a thread waited for their mutexes.
#[derive(Clone, Debug, PartialEq)]
pub struct InsideTheLock {
    /// The thread's share waiting for mutexes (%).
    pub waiting_pct: f64,
    /// The share of that waiting the holders spent doing [`Self::doing`] (%).
    pub inside_pct: f64,
    pub doing: HolderDoing,
}

/// The holders' main activity inside the critical section; each names the
/// function (the innermost of its site) it was in.
#[derive(Clone, Debug, PartialEq)]
pub enum HolderDoing {
    /// On the runqueue: runnable but not running.
    Runnable,
    /// Waiting for I/O in the function.
    Io(String),
    /// Waiting for another lock in the function.
    OtherLock(String),
    /// Blocked in the function (a sleep, a pipe, a socket, a poll).
    Blocked(String),
    /// Running an allocator.
    Allocating(String),
    /// Running the function.
    Running(String),
}

/// What the holders did for a thread that waits mostly for mutexes; `None`
/// if it does not, or nothing was followed, or no one activity is worth
/// advice.
pub fn inside_the_lock(t: &ThreadProfile) -> Option<InsideTheLock> {
    let total = t.samples.total() as f64;
    let mutex = t.lock_split.mutex as f64;
    let others = [
        t.samples.io,
        t.lock_split.signal,
        t.samples.sched,
        t.samples.other,
    ];
    if pct(mutex, total) < MIN_SHARE || others.iter().any(|&n| n as f64 > mutex) {
        return None;
    }
    // What the holders did, over all mutex rows: per (subclass, site), with
    // the runqueue counted once whatever the site.
    let mut what: HashMap<(Class, String), f64> = HashMap::new();
    for r in &t.rows {
        let Some(held) = r
            .while_held
            .as_ref()
            .filter(|_| r.lock_kind == Some(LockKind::Mutex))
        else {
            continue;
        };
        for a in &held.activities {
            if a.state == "not_alive" || a.state == "unrecorded" || a.state == "cut" {
                continue;
            }
            let site = match a.class {
                Class::Sched => String::new(),
                _ => a.site.clone().unwrap_or_default(),
            };
            *what.entry((a.class, site)).or_default() += a.samples;
        }
    }
    let ((class, site), n) = what
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.cmp(&a.0)))?;
    let inside_pct = pct(n, mutex);
    if inside_pct < MIN_SHARE {
        return None;
    }
    let name = callee(&site).to_string();
    let doing = match class {
        Class::Sched => HolderDoing::Runnable,
        Class::Io => HolderDoing::Io(name),
        Class::Lock => HolderDoing::OtherLock(name),
        Class::Other => HolderDoing::Blocked(name),
        Class::Cpu if ALLOCATORS.iter().any(|a| name.contains(a)) => HolderDoing::Allocating(name),
        Class::Cpu => HolderDoing::Running(name),
    };
    Some(InsideTheLock {
        waiting_pct: pct(mutex, total),
        inside_pct,
        doing,
    })
}
