//! The runtime's state: what one process's profiling shares among its
//! threads, the profiler thread and the wrappers (settings, delays, thread
//! table, flags), and COZ's delay accounting on it. Plain data: nothing
//! here calls back into the sampling, the profiler or the lifecycle.
//!
//! Virtual speedup (COZ): while line L is the experiment's target and has
//! speedup s, every sampling point of a thread T inside L stands for P·s of
//! time that a faster L would not take. Instead of making T faster, all
//! other threads are delayed by P·s. Bookkeeping uses a global delay G (the
//! delay every thread must have seen) and a per-thread local delay: a
//! sample of T in L adds P·s to T's local and raises G to it; a thread whose
//! local is behind G sleeps the difference. A thread that blocks in a pthread
//! call and is woken by another thread skips the delays added meanwhile
//! (its waker paid them before waking it — COZ's catch-up), and what it
//! owed when it blocked, as far as the wait outlasted those delays (see
//! `ThreadState::settle_wait`).
//!
//! Blocked samples (BCOZ): a blocked sample of weight w whose user stack
//! contains L counts as w points of L (of a lock wait, only the wait for a
//! CPU after its wakeup: the wait itself is the holder's; of that wait for a
//! CPU, what the crowd of runnable threads would not make it wait anyway:
//! `points::Crowding`). They reach the
//! ring only when the blocked thread is switched back in, so a thread about
//! to wake another first drains the ring: the wakee then skips the delay of
//! the I/O it waited for instead of paying it twice. The drain's time is a
//! delay the waker paid (`paid_draining`).
//! A subclass target (`subclass:io`, `subclass:sched`) counts the io or
//! runqueue points of every thread.

use crate::clock::{now_ns, sleep_ns};
use crate::config::Config;
use crate::domain::{Delays, Domain};
use crate::progress;
use crate::threads::{self, ThreadState, ThreadTable};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

/// CPU time between two delay checks of a running thread.
const DELAY_TICK_NS: u64 = 2_000_000;
/// Most of a delay's overshoot that is credited (see add_delays).
const MAX_OVERSHOOT_NS: u64 = 1_000_000;
/// What the global delay may hold beyond twice the time since the epoch
/// before it is taken for damage (see `plausible`).
const GLOBAL_SLACK_NS: u64 = 1_000_000_000;

pub struct State {
    pub cfg: Config,
    pub pid: u32,
    /// Whether an experiment runs, its delay, the global delay.
    pub delays: &'static Delays,
    /// When the global delay was 0 (CLOCK_MONOTONIC ns).
    pub epoch_ns: u64,
    /// `--system`: the domain all processes share (where `delays` live),
    /// and the experiment this process last saw in it.
    pub domain: Option<&'static Domain>,
    pub seen_experiment: AtomicU64,
    /// `--system`: this process's socket to `holdup causal run`, where the
    /// profile records go.
    pub channel: Option<RawFd>,
    /// The domain's table of progress points stayed locked: counters are
    /// this process's own from then on.
    pub points_stuck: AtomicBool,
    /// Payments refused because the global delay was beyond what the
    /// program could have reached (damage); said at the end.
    pub refused: AtomicU64,
    /// Delay paid with sleeps and credited by target hits, for --verbose.
    pub paid: AtomicU64,
    pub credited: AtomicU64,
    /// Waits for a CPU after those sleeps, for --verbose: the program lost
    /// that time too, but it is neither paid nor published (see add_delays).
    pub runq_after_sleeps: AtomicU64,
    /// Delay paid draining the ring in program threads, for --verbose.
    pub drained: AtomicU64,
    pub threads: ThreadTable,
    pub profiler_tid: AtomicI32,
    pub profiler_thread: AtomicU64,
    pub stopping: AtomicBool,
    pub shut_down: AtomicBool,
    /// Set in a forked child: nothing of the runtime works there.
    pub disabled: AtomicBool,
}

impl State {
    /// A fresh state for `cfg`, with delays `delays` (the domain's, with
    /// `--system`).
    pub fn new(
        cfg: Config,
        delays: &'static Delays,
        domain: Option<&'static Domain>,
        channel: Option<RawFd>,
    ) -> State {
        State {
            pid: std::process::id(),
            delays,
            epoch_ns: cfg.system.map_or_else(now_ns, |s| s.epoch_ns),
            domain,
            seen_experiment: AtomicU64::new(0),
            channel,
            points_stuck: AtomicBool::new(false),
            refused: AtomicU64::new(0),
            paid: AtomicU64::new(0),
            credited: AtomicU64::new(0),
            runq_after_sleeps: AtomicU64::new(0),
            drained: AtomicU64::new(0),
            threads: ThreadTable::default(),
            profiler_tid: AtomicI32::new(0),
            profiler_thread: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            shut_down: AtomicBool::new(false),
            disabled: AtomicBool::new(false),
            cfg,
        }
    }

    /// Where `_coz_get_counter` puts its counters with `--system`.
    pub fn shared_points(&self) -> Option<progress::Shared<'_>> {
        self.domain.map(|domain| progress::Shared {
            domain,
            stuck: &self.points_stuck,
        })
    }

    /// A note for --verbose.
    pub fn log(&self, msg: &str) {
        if self.cfg.verbose {
            eprintln!("holdup causal: {msg}");
        }
    }

    /// Give the calling thread a delay state, starting from `local`.
    pub fn register_current_thread(&self, local: u64) {
        if threads::current().is_some() {
            return;
        }
        if let Some(st) = self.threads.find_or_claim(threads::gettid(), local) {
            // SAFETY: the table lives in the leaked runtime.
            let st: &'static ThreadState = unsafe { &*(st as *const ThreadState) };
            threads::attach(st, DELAY_TICK_NS);
        }
    }

    /// COZ's global delay, ns.
    pub fn global(&self) -> u64 {
        self.delays.global.load(Ordering::Acquire)
    }

    /// Whether the program can have reached global delay `g`. Every ns of
    /// it is time some thread spent in the target (credited) or sleeping to
    /// pay a delay (with a sleep's overshoot), so it grows about as fast as
    /// time passes. One far beyond is damage to the shared domain: paying
    /// it would stall the program.
    fn plausible(&self, g: u64) -> bool {
        within_reach(g, now_ns().saturating_sub(self.epoch_ns))
    }

    /// COZ's add_delays: pay what this thread owes, or publish what it is
    /// ahead by. Never inlined into a wrapper: its sleeps are the
    /// runtime's (see `forwarding_ranges`).
    #[inline(never)]
    pub fn add_delays(&self, st: &ThreadState) {
        let g = self.global();
        if !self.delays.active() {
            st.reset(g);
            return;
        }
        if st.blocked.load(Ordering::Acquire) {
            return;
        }
        self.skip_late_credits(st);
        let local = st.local.load(Ordering::Acquire);
        if local > g {
            self.delays
                .global
                .fetch_max(st.published(), Ordering::AcqRel);
        } else if local < g {
            if !self.plausible(g) {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return;
            }
            let need = g - local;
            let resets = st.resets.load(Ordering::Acquire);
            let before = threads::schedstat(st);
            let t0 = now_ns();
            sleep_ns(need);
            let slept = now_ns() - t0;
            let after = threads::schedstat(st);
            // The sleep overshoots (timer slack): that is delay inserted too,
            // and on the critical path it lengthens the experiment, so it is
            // credited and published like any delay (COZ does the same);
            // crediting only `need` would make every virtual speedup look
            // smaller than it is. The wait for a CPU after the sleep is not:
            // another thread of the program (or of the machine) ran
            // meanwhile. A stall far beyond the sleep is not ours either.
            let runq_after = match (before, after) {
                (Some(a), Some(b)) => b.1.saturating_sub(a.1),
                _ => 0,
            };
            self.runq_after_sleeps
                .fetch_add(runq_after, Ordering::Relaxed);
            let waited = slept
                .saturating_sub(runq_after)
                .clamp(need, need + MAX_OVERSHOOT_NS);
            // COZ publishes every delay paid, which is right when the sleep
            // holds the program up. A thread that mostly waits for a CPU
            // anyway (an oversubscribed pool) loses little by sleeping: its
            // siblings get the core. That share of the sleep is kept out of
            // the global delay, or every such payment would ratchet it up
            // and "more cores" would promise more than more cores give.
            let free = (waited as f64 * self.runqueue_share(st, before)) as u64;
            self.paid.fetch_add(waited, Ordering::Relaxed);
            st.paid.fetch_add(waited, Ordering::Relaxed);
            // An experiment that began during the sleep started this thread
            // over from the global delay then, which settled the debt slept
            // for. Added on top, the sleep would read as a delay of its own
            // and be published to every thread, whose longer sleeps across
            // the next start would do it again: on RocksDB, global delays
            // of 0.3-2 s within a 200 ms experiment, the program stalled
            // for the next ones, in 2% of the experiments.
            if st.resets.load(Ordering::Acquire) != resets {
                return;
            }
            st.free.fetch_add(free, Ordering::AcqRel);
            st.local.fetch_add(waited, Ordering::AcqRel);
            self.delays
                .global
                .fetch_max(st.published(), Ordering::AcqRel);
        }
    }

    /// `ns` this program thread spent draining the ring before a wakeup
    /// (`catch_up`), in an experiment with a speedup only: time it did not
    /// spend on the program, as a delay's sleep is, so it counts as paid
    /// (the thread sleeps that much less, or publishes it when ahead).
    /// Uncounted, a thread that wakes others often runs slower in every
    /// experiment but the 0% ones, and a line whose speedup makes that
    /// thread the bottleneck predicts too little (an O_DIRECT reader that
    /// wakes the compute thread every round drained 7 µs of its 1.3 ms).
    /// `resets`: the thread's count before the drain; an experiment that
    /// began meanwhile settled it.
    pub fn paid_draining(&self, st: &ThreadState, ns: u64, resets: u64) {
        if st.resets.load(Ordering::Acquire) != resets {
            return;
        }
        self.drained.fetch_add(ns, Ordering::Relaxed);
        st.local.fetch_add(ns, Ordering::AcqRel);
    }

    /// Settle the others' credits processed after this thread woke from its
    /// last wait whose samples came before its end: skipped if taken during
    /// it, a debt the wait may absorb if taken before (see `late_credits`).
    fn skip_late_credits(&self, st: &ThreadState) {
        let (from, to) = (
            st.wait_from.load(Ordering::Acquire),
            st.wait_to.load(Ordering::Acquire),
        );
        if from >= to {
            return;
        }
        let seen = st.late_seen.load(Ordering::Acquire);
        let late = self
            .delays
            .late
            .skipped(st.tid.load(Ordering::Relaxed), seen, from, to);
        st.late_seen.store(late.next, Ordering::Release);
        if late.during > 0 || late.before > 0 {
            st.late_for_wait(late.during, late.before);
        }
    }

    /// Share of its runnable time this thread spent waiting for a CPU since
    /// it last paid a delay.
    fn runqueue_share(&self, st: &ThreadState, now: Option<(u64, u64)>) -> f64 {
        let Some((run, runq)) = now else { return 0.0 };
        let last_run = st.last_run.swap(run, Ordering::AcqRel);
        let last_runq = st.last_runq.swap(runq, Ordering::AcqRel);
        let (dr, dq) = (run.saturating_sub(last_run), runq.saturating_sub(last_runq));
        if dr + dq == 0 {
            return 0.0;
        }
        dq as f64 / (dr + dq) as f64
    }

    pub fn pre_block(&self) {
        if let Some(st) = threads::current() {
            st.enter_block(self.global(), now_ns());
            st.blocked.store(true, Ordering::Release);
        }
    }

    /// After a blocking call; `woken` when another thread of the program
    /// ended the wait, so that the delays added meanwhile were paid by it.
    pub fn post_block(&self, woken: bool) {
        if let Some(st) = threads::current() {
            if woken {
                // The credits logged from here on were not in the global
                // delay read below (the log is read first: a credit raises
                // the global delay before it is logged).
                st.late_seen
                    .store(self.delays.late.head(), Ordering::Release);
                let g = self.global();
                let pre = st.pre_block.load(Ordering::Acquire);
                let during = if self.plausible(g) {
                    g.saturating_sub(pre)
                } else {
                    0
                };
                st.woken(during, now_ns());
            }
            st.blocked.store(false, Ordering::Release);
        }
    }
}

/// Whether a global delay of `g` can be reached in `elapsed` ns, with room
/// to spare (twice the time, and a second).
fn within_reach(g: u64, elapsed: u64) -> bool {
    g <= elapsed.saturating_mul(2).saturating_add(GLOBAL_SLACK_NS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_global_delay_beyond_the_time_elapsed_is_not_paid() {
        let s = 1_000_000_000;
        // Reachable: up to the time since the epoch, and room to spare.
        assert!(within_reach(0, 0));
        assert!(within_reach(3 * s, 3 * s));
        assert!(within_reach(7 * s, 3 * s));
        assert!(!within_reach(7 * s + 1, 3 * s));
        // Written by a damaged or hostile process: an hour after 3 s, or
        // all ones.
        assert!(!within_reach(3600 * s, 3 * s));
        assert!(!within_reach(u64::MAX, 3 * s));
    }

    /// A thread sleeping off its debt when an experiment starts (and the
    /// profiler starts it over from the global delay) is even once it
    /// wakes: not ahead by its sleep, which it would publish as a delay.
    #[test]
    fn a_delay_slept_across_an_experiments_start_is_not_published_again() {
        let ms = 1_000_000;
        let (state, st) = state_with_one_thread();
        let delays = state.delays;
        delays.set_active(true);
        delays.global.store(60 * ms, Ordering::Release);
        let sleeper = std::thread::spawn(move || state.add_delays(st));
        // The next experiment starts 20 ms into the 60 ms sleep.
        std::thread::sleep(std::time::Duration::from_millis(20));
        st.reset(state.global());
        sleeper.join().unwrap();
        let g = state.global();
        // At most the sleep's overshoot on top; the sleep added again
        // would make it 120 ms.
        assert!(g <= 61 * ms, "global delay {} ms", g / ms);
        assert_eq!(st.local.load(Ordering::Acquire), 60 * ms);
    }

    /// Time spent draining the ring before a wakeup is paid delay: owed,
    /// it is slept less; ahead, it is published; across an experiment's
    /// start, it is dropped with the rest.
    #[test]
    fn a_drain_before_a_wakeup_counts_as_delay_paid() {
        let ms = 1_000_000;
        let (state, st) = state_with_one_thread();
        state.delays.set_active(true);
        state.delays.global.store(5 * ms, Ordering::Release);
        st.local.store(4 * ms, Ordering::Release);
        let resets = st.resets.load(Ordering::Acquire);
        state.paid_draining(st, 3 * ms, resets);
        assert_eq!(st.local.load(Ordering::Acquire), 7 * ms);
        // Ahead of the global delay by 2 ms: nothing slept, all published.
        let t0 = now_ns();
        state.add_delays(st);
        assert!(now_ns() - t0 < ms, "slept while ahead");
        assert_eq!(state.global(), 7 * ms);
        // A drain that an experiment's start overtook is not counted.
        let resets = st.resets.load(Ordering::Acquire);
        st.reset(state.global());
        state.paid_draining(st, 3 * ms, resets);
        assert_eq!(st.local.load(Ordering::Acquire), 7 * ms);
        assert_eq!(state.drained.load(Ordering::Relaxed), 3 * ms);
    }

    fn state_with_one_thread() -> (&'static State, &'static ThreadState) {
        let ms = 1_000_000;
        let cfg = Config {
            ring_fd: -1,
            ring_bytes: 0,
            period_ns: ms,
            output_fd: -1,
            scope: None,
            granularity: holdup_symbolize::lines::Granularity::Line,
            line: None,
            speedup: None,
            subclass: None,
            process: None,
            end_to_end: false,
            experiment_ns: 200 * ms,
            verbose: false,
            probes: Vec::new(),
            system: None,
        };
        let delays: &'static Delays = Box::leak(Box::default());
        let state: &'static State = Box::leak(Box::new(State::new(cfg, delays, None, None)));
        (state, state.threads.find_or_claim(1, 0).unwrap())
    }
}
