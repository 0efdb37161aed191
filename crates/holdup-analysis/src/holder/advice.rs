//! Advice that names the code inside the lock: when a thread mostly waits
//! for mutexes, what the holders did while it waited says what to change
//! (I/O, sleeps, allocations inside the critical section, or a holder that
//! waits for a core).

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

/// One line of advice for a thread that waits mostly for mutexes, from
/// what their holders did; `None` if it does not, or nothing was followed.
pub fn advice(t: &ThreadProfile) -> Option<String> {
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
    let share = pct(mutex, total);
    let inside = pct(n, mutex);
    if inside < MIN_SHARE {
        return None;
    }
    let head = format!(
        "{share:.0}% waiting for mutexes held by other threads; inside the critical section the holder"
    );
    let name = callee(&site);
    Some(match class {
        Class::Sched => format!(
            "{head} is runnable but not running {inside:.0}% of the time: give the holder a core (fewer runnable threads, or a higher priority for it)"
        ),
        Class::Io => format!(
            "{head} spends {inside:.0}% in {name} [I]: move the I/O out of the lock"
        ),
        Class::Lock => format!(
            "{head} waits {inside:.0}% for another lock in {name} [L]: nested locks serialize both"
        ),
        Class::Other => format!(
            "{head} spends {inside:.0}% blocked in {name} [B] (a sleep, a pipe, a socket, a poll): do not block while holding the lock"
        ),
        Class::Cpu if ALLOCATORS.iter().any(|a| name.contains(a)) => format!(
            "{head} spends {inside:.0}% allocating in {name} [.]: allocate before taking the lock"
        ),
        Class::Cpu => format!(
            "{head} spends {inside:.0}% running {name} [.]: shorten that code or split the lock"
        ),
    })
}
