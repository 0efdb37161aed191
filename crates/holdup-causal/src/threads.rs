//! Per-thread delay state, reachable from signal handlers.
//!
//! States live in one fixed table allocated at start-up, so registering a
//! thread never allocates and a signal handler can reach its own state
//! through a plain thread-local pointer.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

pub const MAX_THREADS: usize = 4096;

/// Signal that makes a running thread pay the delays it owes (COZ uses the
/// same one). Raised by a per-thread CPU-time timer, so only threads that
/// are actually running get it.
pub const DELAY_SIGNAL: libc::c_int = libc::SIGPROF;

#[derive(Default)]
pub struct ThreadState {
    /// 0 when the slot is free.
    pub tid: AtomicI32,
    /// Delay this thread has paid or been credited with, in ns (COZ's
    /// local delay): it owes `global − local`.
    pub local: AtomicU64,
    /// Global delay when it last (possibly) blocked in a pthread call.
    pub pre_block: AtomicU64,
    /// Inside a blocking pthread call: delays are settled by post_block.
    pub blocked: AtomicBool,
    /// Inside the runtime: the delay signal and nested interposed calls
    /// must not re-enter it.
    pub busy: AtomicBool,
    /// The CPU-time timer (`timer_t`), 0 if none.
    pub timer: AtomicUsize,
}

thread_local! {
    static ME: Cell<*const ThreadState> = const { Cell::new(std::ptr::null()) };
}

/// This thread's state, if it has one. Signal-safe (a const thread-local
/// has no lazy initialisation).
pub fn current() -> Option<&'static ThreadState> {
    let p = ME.with(|c| c.get());
    // SAFETY: states are in a leaked table; the pointer is set by register.
    (!p.is_null()).then(|| unsafe { &*p })
}

pub fn gettid() -> i32 {
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

pub struct ThreadTable {
    slots: Box<[ThreadState]>,
}

impl Default for ThreadTable {
    fn default() -> Self {
        ThreadTable {
            slots: (0..MAX_THREADS).map(|_| ThreadState::default()).collect(),
        }
    }
}

impl ThreadTable {
    /// A slot for `tid`, claimed if it has none (None: table full).
    pub fn find_or_claim(&self, tid: i32, local: u64) -> Option<&ThreadState> {
        if let Some(s) = self.find(tid) {
            return Some(s);
        }
        for s in self.slots.iter() {
            if s.tid
                .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                s.local.store(local, Ordering::Relaxed);
                s.pre_block.store(local, Ordering::Relaxed);
                s.blocked.store(false, Ordering::Relaxed);
                s.busy.store(false, Ordering::Relaxed);
                s.timer.store(0, Ordering::Relaxed);
                return Some(s);
            }
        }
        None
    }

    pub fn find(&self, tid: i32) -> Option<&ThreadState> {
        self.slots
            .iter()
            .find(|s| s.tid.load(Ordering::Acquire) == tid)
    }

    pub fn slot(&self, i: usize) -> &ThreadState {
        &self.slots[i]
    }

    pub fn index_of(&self, tid: i32) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.tid.load(Ordering::Acquire) == tid)
    }

    pub fn iter(&self) -> impl Iterator<Item = &ThreadState> {
        self.slots
            .iter()
            .filter(|s| s.tid.load(Ordering::Acquire) != 0)
    }
}

/// Make `state` this thread's, and start its CPU-time timer.
pub fn attach(state: &'static ThreadState, tick_ns: u64) {
    ME.with(|c| c.set(state as *const ThreadState));
    unsafe {
        let mut sev: libc::sigevent = std::mem::zeroed();
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = DELAY_SIGNAL;
        sev.sigev_notify_thread_id = gettid();
        let mut timer: libc::timer_t = std::ptr::null_mut();
        if libc::timer_create(libc::CLOCK_THREAD_CPUTIME_ID, &mut sev, &mut timer) == 0 {
            let ts = libc::timespec {
                tv_sec: (tick_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (tick_ns % 1_000_000_000) as libc::c_long,
            };
            let spec = libc::itimerspec {
                it_interval: ts,
                it_value: ts,
            };
            libc::timer_settime(timer, 0, &spec, std::ptr::null_mut());
            state.timer.store(timer as usize, Ordering::Release);
        }
    }
}

/// Forget this thread: stop its timer and free its slot.
pub fn detach() {
    let Some(state) = current() else { return };
    ME.with(|c| c.set(std::ptr::null()));
    let timer = state.timer.swap(0, Ordering::AcqRel);
    if timer != 0 {
        unsafe { libc::timer_delete(timer as libc::timer_t) };
    }
    state.tid.store(0, Ordering::Release);
}
