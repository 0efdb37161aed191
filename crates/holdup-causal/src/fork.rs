//! Forking while the runtime holds a lock.
//!
//! A forked child has only the thread that called `fork`: a lock another
//! thread held at that moment stays held in the child for ever. Two locks
//! of ours matter, because the child's runtime takes them again (`causal
//! run --system` starts a runtime in every child):
//! - the dynamic loader's lock that `dl_iterate_phdr` holds while it calls
//!   back; glibc does not reset it in the child, so the child's profiler
//!   thread would wait on it for ever, and the child's `exit` with it;
//! - the table of progress points.
//!
//! So `fork` waits (atfork prepare) until the runtime is out of both, and
//! holds them across the fork; parent and child then let go.

use crate::clock::{now_ns, retry_until};
use crate::progress::{Point, POINTS};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{MutexGuard, TryLockError};

/// Held by the runtime around `dl_iterate_phdr`, and by a fork.
static LOADER: AtomicBool = AtomicBool::new(false);

fn try_acquire(lock: &AtomicBool) -> bool {
    lock.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
}

/// Run `f` (which calls `dl_iterate_phdr`) where no fork can copy the
/// loader's lock held.
pub fn with_loader<T>(f: impl FnOnce() -> T) -> T {
    while !try_acquire(&LOADER) {
        unsafe { libc::sched_yield() };
    }
    let r = f();
    LOADER.store(false, Ordering::Release);
    r
}

/// A fork waits this long for the runtime's locks, then goes ahead (a
/// program's own signal handler could fork on a thread that holds one).
const PREPARE_NS: u64 = 1_000_000_000;

/// What the forking thread holds across `fork`.
struct Held {
    loader: bool,
    points: Option<MutexGuard<'static, Vec<Point>>>,
}

thread_local! {
    static HELD: RefCell<Held> = const { RefCell::new(Held { loader: false, points: None }) };
}

/// atfork prepare: take both locks, in this order.
pub extern "C" fn prepare() {
    let deadline = now_ns() + PREPARE_NS;
    let loader = retry_until(deadline, || try_acquire(&LOADER).then_some(())).is_some();
    let points = retry_until(deadline, || match POINTS.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    });
    HELD.with(|h| *h.borrow_mut() = Held { loader, points });
}

/// Let go of what `prepare` took; in a child with `forget_points`, the
/// parent's progress points are left to the parent.
fn release(forget_points: bool) {
    HELD.with(|h| {
        let mut held = h.borrow_mut();
        if let Some(points) = held.points.as_mut() {
            if forget_points {
                points.clear();
            }
        }
        held.points = None;
        if std::mem::take(&mut held.loader) {
            LOADER.store(false, Ordering::Release);
        }
    });
}

/// atfork parent.
pub extern "C" fn parent() {
    release(false);
}

/// atfork child, first of all.
pub fn child(forget_points: bool) {
    release(forget_points);
}
