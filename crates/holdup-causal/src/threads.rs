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
    /// The part of `local` paid with sleeps that cost the program nothing
    /// (see Runtime::add_delays); it is never published to the global delay.
    pub free: AtomicU64,
    /// Times the state was started over (`reset`, at each experiment's
    /// start): a delay being slept meanwhile was settled by it.
    pub resets: AtomicU64,
    /// Delay paid with sleeps in the running experiment, for --verbose.
    pub paid: AtomicU64,
    /// Run and runqueue time (schedstat) at the last delay paid.
    pub last_run: AtomicU64,
    pub last_runq: AtomicU64,
    /// Global delay when it last (possibly) blocked in a pthread call, and
    /// what it owed then (global − local).
    pub pre_block: AtomicU64,
    pub pre_block_debt: AtomicU64,
    /// Inside a blocking pthread call: delays are settled by post_block.
    pub blocked: AtomicBool,
    /// When it last blocked (CLOCK_MONOTONIC ns); its last wait that
    /// another thread ended, `[wait_from, wait_to)` (empty: none); the
    /// number of the first late credit it has not looked at (see
    /// `late_credits`).
    pub blocked_at: AtomicU64,
    pub wait_from: AtomicU64,
    pub wait_to: AtomicU64,
    pub late_seen: AtomicU64,
    /// Of that wait (see `settle_wait`): the others' delays added during
    /// it, what it owed when it began (late credits of samples before it
    /// included), and what of both its local delay has taken so far.
    pub wait_during: AtomicU64,
    pub wait_debt: AtomicU64,
    pub wait_settled: AtomicU64,
    /// Inside the runtime: the delay signal and nested interposed calls
    /// must not re-enter it.
    pub busy: AtomicBool,
    /// The CPU-time timer (`timer_t`), 0 if none.
    pub timer: AtomicUsize,
    /// This thread's `/proc/thread-self/schedstat`, 0 if not open.
    pub schedstat: AtomicI32,
}

impl ThreadState {
    /// The delay this thread holds the others to: its local delay without
    /// the sleeps that cost the program nothing.
    pub fn published(&self) -> u64 {
        self.local
            .load(Ordering::Acquire)
            .saturating_sub(self.free.load(Ordering::Acquire))
    }

    /// Start over from global delay `g`.
    pub fn reset(&self, g: u64) {
        self.resets.fetch_add(1, Ordering::AcqRel);
        self.local.store(g, Ordering::Release);
        self.free.store(0, Ordering::Release);
        self.wait_to.store(0, Ordering::Release);
    }

    /// About to block at global delay `g`, at time `now`.
    pub fn enter_block(&self, g: u64, now: u64) {
        let debt = g.saturating_sub(self.local.load(Ordering::Acquire));
        self.pre_block.store(g, Ordering::Release);
        self.pre_block_debt.store(debt, Ordering::Release);
        self.blocked_at.store(now, Ordering::Release);
    }

    /// Another thread ended the wait at time `now`, `during` the delays the
    /// others added meanwhile (the global delay's rise since it blocked, its
    /// own credit aside).
    pub fn woken(&self, during: u64, now: u64) {
        self.wait_from
            .store(self.blocked_at.load(Ordering::Acquire), Ordering::Release);
        self.wait_to.store(now, Ordering::Release);
        self.wait_during.store(during, Ordering::Release);
        self.wait_debt.store(
            self.pre_block_debt.load(Ordering::Acquire),
            Ordering::Release,
        );
        self.wait_settled.store(0, Ordering::Release);
        self.settle_wait();
    }

    /// Credits of the others processed after the wakeup: of samples taken
    /// `during` the wait, and `before` it (owed when it began).
    pub fn late_for_wait(&self, during: u64, before: u64) {
        self.wait_during.fetch_add(during, Ordering::AcqRel);
        self.wait_debt.fetch_add(before, Ordering::AcqRel);
        self.settle_wait();
    }

    /// What a wait ended by another thread takes off this thread's debt:
    /// - the delays the others added during it (COZ's skip: its waker was
    ///   in the target meanwhile, which the virtual speedup removes);
    /// - what it owed when the wait began, as far as the wait was longer
    ///   than those delays. Paid before the call, those sleeps would have
    ///   made the wait shorter, not ended it later, since the waker ended
    ///   it; but no shorter than nothing: the time the wait lasted beyond
    ///   the delays skipped is all it could absorb. Kept, that debt is paid
    ///   with the thread's own next credit or with a sleep inside its next
    ///   critical section, and a line others wait for predicts less than its
    ///   speedup gives (a lock's critical section 6-8 points low); forgiven
    ///   whole, a thread that computes while the target runs elsewhere
    ///   would never pay for it.
    fn settle_wait(&self) {
        let waited = self
            .wait_to
            .load(Ordering::Acquire)
            .saturating_sub(self.wait_from.load(Ordering::Acquire));
        let during = self.wait_during.load(Ordering::Acquire);
        let debt = self.wait_debt.load(Ordering::Acquire);
        let total = during.max(during.saturating_add(debt).min(waited));
        let settled = self.wait_settled.swap(total, Ordering::AcqRel);
        self.local
            .fetch_add(total.saturating_sub(settled), Ordering::AcqRel);
    }
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
                s.free.store(0, Ordering::Relaxed);
                s.paid.store(0, Ordering::Relaxed);
                s.last_run.store(0, Ordering::Relaxed);
                s.last_runq.store(0, Ordering::Relaxed);
                s.pre_block.store(local, Ordering::Relaxed);
                s.pre_block_debt.store(0, Ordering::Relaxed);
                s.blocked.store(false, Ordering::Relaxed);
                s.wait_from.store(0, Ordering::Relaxed);
                s.wait_to.store(0, Ordering::Relaxed);
                s.wait_during.store(0, Ordering::Relaxed);
                s.wait_debt.store(0, Ordering::Relaxed);
                s.wait_settled.store(0, Ordering::Relaxed);
                s.busy.store(false, Ordering::Relaxed);
                s.timer.store(0, Ordering::Relaxed);
                s.schedstat.store(0, Ordering::Relaxed);
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
        let fd = libc::open(
            c"/proc/thread-self/schedstat".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        state.schedstat.store(fd.max(0), Ordering::Release);
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
    let fd = state.schedstat.swap(0, Ordering::AcqRel);
    if fd > 0 {
        unsafe { libc::close(fd) };
    }
    state.tid.store(0, Ordering::Release);
}

/// Time this thread has spent on a CPU and runnable but waiting for one, in
/// ns (its schedstat). Async-signal-safe: one pread, no allocation.
pub fn schedstat(state: &ThreadState) -> Option<(u64, u64)> {
    let fd = state.schedstat.load(Ordering::Acquire);
    if fd <= 0 {
        return None;
    }
    let mut buf = [0u8; 96];
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n <= 0 {
        return None;
    }
    parse_schedstat(&buf[..n as usize])
}

fn parse_schedstat(text: &[u8]) -> Option<(u64, u64)> {
    let mut fields = text
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .map(|f| {
            f.iter().try_fold(0u64, |acc, &b| {
                b.is_ascii_digit().then(|| acc * 10 + u64::from(b - b'0'))
            })
        });
    Some((fields.next()??, fields.next()??))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_woken_thread_skips_the_delays_of_its_wait_and_the_debt_the_rest_of_it_absorbed() {
        let ms = 1_000_000;
        let st = ThreadState::default();
        // Local delay 1 ms, blocks at a global 4 ms (owing 3) for `waited`,
        // while the others add `during`: what its local delay takes.
        let woken = |during: u64, waited: u64| {
            st.reset(ms);
            st.enter_block(4 * ms, 0);
            st.woken(during, waited);
            st.local.load(Ordering::Acquire) - ms
        };
        // A long wait: the others' 6 ms and the whole debt.
        assert_eq!(woken(6 * ms, 10 * ms), 9 * ms);
        // 8 ms: the 2 ms it waited beyond the others' delays pay 2 of the 3.
        assert_eq!(woken(6 * ms, 8 * ms), 8 * ms);
        // A wait no longer than the others' delays absorbs none of it.
        assert_eq!(woken(6 * ms, 5 * ms), 6 * ms);
        // Late credits: 1 ms more during the wait leaves 1 ms of room for
        // the debt, and a credit from before it is owed, not forgiven.
        assert_eq!(woken(6 * ms, 8 * ms), 8 * ms);
        st.late_for_wait(ms, 0);
        assert_eq!(st.local.load(Ordering::Acquire) - ms, 8 * ms);
        st.late_for_wait(0, ms);
        assert_eq!(st.local.load(Ordering::Acquire) - ms, 8 * ms);
        // After a long one, a late credit from before the wait is forgiven.
        assert_eq!(woken(2 * ms, 10 * ms), 5 * ms);
        st.late_for_wait(0, 2 * ms);
        assert_eq!(st.local.load(Ordering::Acquire) - ms, 7 * ms);
        // Ahead when it blocks: it owes nothing, only the skip.
        st.reset(5 * ms);
        st.enter_block(4 * ms, 0);
        st.woken(6 * ms, 10 * ms);
        assert_eq!(st.local.load(Ordering::Acquire), 11 * ms);
    }

    #[test]
    fn schedstat_runqueue_field() {
        assert_eq!(parse_schedstat(b"2411 80533 7\n"), Some((2411, 80533)));
        assert_eq!(parse_schedstat(b"2411\n"), None);
        assert_eq!(parse_schedstat(b"1 x2 3"), None);
    }
}
