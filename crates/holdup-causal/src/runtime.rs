//! The runtime: COZ's delay accounting, fed by the holdup recorder's ring.
//!
//! Virtual speedup (COZ): while line L is the experiment's target and has
//! speedup s, every sampling point of a thread T inside L stands for P·s of
//! time that a faster L would not take. Instead of making T faster, all
//! other threads are delayed by P·s. Bookkeeping uses a global delay G (the
//! delay every thread must have seen) and a per-thread local delay: a
//! sample of T in L adds P·s to T's local and raises G to it; a thread whose
//! local is behind G sleeps the difference. A thread that blocks in a pthread
//! call and is woken by another thread skips the delays added meanwhile
//! (its waker paid them before waking it — COZ's catch-up).
//!
//! Blocked samples (BCOZ): a blocked sample of weight w whose user stack
//! contains L counts as w points of L (lock waits excepted: waiting is no
//! fix). They reach the ring only when the blocked thread is switched back
//! in, so a thread about to wake another first drains the ring: the wakee
//! then skips the delay of the I/O it waited for instead of paying it twice.
//! A subclass target (`subclass:io`, `subclass:sched`) counts the io or
//! runqueue points of every thread.

use crate::clock::{now_ns, sleep_ns};
use crate::config::Config;
use crate::domain::{Delays, Domain};
use crate::fork;
use crate::processor::{Experiment, Processor};
use crate::profiler::Profiler;
use crate::progress;
use crate::source::Source;
use crate::threads::{self, ThreadState, ThreadTable};
use holdup_bpf::ringbuf::{RingPeek, RingReader};
use holdup_coz::probe_list::ProbePoint;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;

/// CPU time between two delay checks of a running thread.
const DELAY_TICK_NS: u64 = 2_000_000;
/// Most of a delay's overshoot that is credited (see add_delays).
const MAX_OVERSHOOT_NS: u64 = 1_000_000;
/// What the global delay may hold beyond twice the time since the epoch
/// before it is taken for damage (see `plausible`).
const GLOBAL_SLACK_NS: u64 = 1_000_000_000;

pub struct Runtime {
    pub cfg: Config,
    pub pid: u32,
    /// Whether an experiment runs, its delay, the global delay.
    pub delays: &'static Delays,
    /// When the global delay was 0 (CLOCK_MONOTONIC ns).
    epoch_ns: u64,
    /// `--system`: the domain all processes share (where `delays` live),
    /// and the experiment this process last saw in it.
    pub domain: Option<&'static Domain>,
    pub(crate) seen_experiment: AtomicU64,
    /// `--system`: this process's socket to `holdup causal run`, where the
    /// profile records go.
    pub channel: Option<RawFd>,
    /// The domain's table of progress points stayed locked: counters are
    /// this process's own from then on.
    pub(crate) points_stuck: AtomicBool,
    /// Payments refused because the global delay was beyond what the
    /// program could have reached (damage); said at the end.
    pub(crate) refused: AtomicU64,
    /// Delay paid with sleeps and credited by target hits, for --verbose.
    pub(crate) paid: AtomicU64,
    pub(crate) credited: AtomicU64,
    pub threads: ThreadTable,
    pub processor: Mutex<Processor>,
    peek: Option<RingPeek>,
    pub profiler_tid: AtomicI32,
    pub(crate) profiler_thread: AtomicU64,
    pub(crate) stopping: AtomicBool,
    pub(crate) shut_down: AtomicBool,
    /// Set in a forked child: nothing of the runtime works there.
    pub disabled: AtomicBool,
}

static RT: AtomicPtr<Runtime> = AtomicPtr::new(std::ptr::null_mut());

/// The runtime, when this process is being profiled.
pub fn get() -> Option<&'static Runtime> {
    let p = RT.load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: set once from a leaked Box, never freed.
    let rt = unsafe { &*p };
    (!rt.disabled.load(Ordering::Relaxed)).then_some(rt)
}

pub(crate) fn log(cfg_verbose: bool, msg: &str) {
    if cfg_verbose {
        eprintln!("holdup causal: {msg}");
    }
}

/// Whether a global delay of `g` can be reached in `elapsed` ns, with room
/// to spare (twice the time, and a second).
fn within_reach(g: u64, elapsed: u64) -> bool {
    g <= elapsed.saturating_mul(2).saturating_add(GLOBAL_SLACK_NS)
}

/// Start the runtime if `holdup causal run` asked for it. Runs in the
/// library constructor, on the main thread, before `main`.
pub fn init() {
    let Some(cfg) = Config::from_env() else {
        return;
    };
    if cfg.system.is_none() {
        scrub_environment(&cfg);
    }
    match connect(&cfg) {
        Ok((source, domain)) => {
            install_signal_handler();
            start(cfg, source, domain);
        }
        Err(e) => eprintln!("holdup causal: {e}; profiling is off"),
    }
}

/// Borrow an fd number that `holdup causal run` handed over.
fn handed(fd: RawFd, what: &str) -> Result<BorrowedFd<'static>, String> {
    if fd < 0 {
        return Err(format!("no {what} was handed over"));
    }
    // SAFETY: checked before use by the callers; never closed here.
    Ok(unsafe { BorrowedFd::borrow_raw(fd) })
}

/// Where the samples come from and, with `--system`, the shared domain:
/// both from fds inherited from `holdup causal run`.
fn connect(cfg: &Config) -> Result<(Source, Option<&'static Domain>), String> {
    match cfg.system {
        Some(sys) => {
            let domain = Domain::map(handed(sys.domain_fd, "domain")?)
                .map_err(|e| format!("cannot use the shared domain: {e}"))?;
            let source = Source::register(handed(sys.channel_fd, "channel")?)
                .map_err(|e| format!("cannot reach holdup causal run: {e}"))?;
            Ok((source, Some(domain)))
        }
        None => RingReader::new(handed(cfg.ring_fd, "ring buffer")?, cfg.ring_bytes)
            .map(|r| (Source::Ring(r), None))
            .map_err(|e| format!("cannot reach the recorder's samples: {e}")),
    }
}

/// Build the runtime, register the calling thread and start the profiler.
fn start(cfg: Config, source: Source, domain: Option<&'static Domain>) {
    let peek = match &source {
        Source::Ring(_) => RingPeek::new(unsafe { BorrowedFd::borrow_raw(cfg.ring_fd) }).ok(),
        Source::Socket { .. } => None,
    };
    let delays = match domain {
        Some(d) => &d.delays,
        None => &*Box::leak(Box::default()),
    };
    let rt: &'static Runtime = Box::leak(Box::new(Runtime {
        pid: std::process::id(),
        delays,
        epoch_ns: cfg.system.map_or_else(now_ns, |s| s.epoch_ns),
        domain,
        seen_experiment: AtomicU64::new(0),
        channel: source.socket(),
        points_stuck: AtomicBool::new(false),
        refused: AtomicU64::new(0),
        paid: AtomicU64::new(0),
        credited: AtomicU64::new(0),
        threads: ThreadTable::default(),
        processor: Mutex::new(Processor::new(Some(source))),
        peek,
        profiler_tid: AtomicI32::new(0),
        profiler_thread: AtomicU64::new(0),
        stopping: AtomicBool::new(false),
        shut_down: AtomicBool::new(false),
        disabled: AtomicBool::new(false),
        cfg,
    }));
    let first = RT
        .swap(rt as *const Runtime as *mut Runtime, Ordering::AcqRel)
        .is_null();
    rt.register_current_thread(rt.global());
    if first {
        unsafe {
            libc::pthread_atfork(
                Some(fork::prepare),
                Some(fork::parent),
                Some(after_fork_in_child),
            );
            libc::atexit(at_exit);
        }
    }
    if rt.cfg.end_to_end {
        progress::counter(progress::THROUGHPUT, progress::END_TO_END);
    }
    progress::add_probes(&rt.cfg.probes);
    rt.spawn_profiler();
}

/// Keep what `holdup causal run` set from reaching programs this one starts:
/// our entry leaves LD_PRELOAD, the ring's and the profile's fds are closed
/// on exec.
fn scrub_environment(cfg: &Config) {
    let probes = cfg.probes.iter().flat_map(ProbePoint::fds);
    for fd in [cfg.ring_fd, cfg.output_fd].into_iter().chain(probes) {
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    if let Ok(pre) = std::env::var("LD_PRELOAD") {
        let kept: Vec<&str> = pre
            .split([':', ' '])
            .filter(|p| !p.is_empty() && !p.ends_with("libholdup_causal.so"))
            .collect();
        if kept.is_empty() {
            std::env::remove_var("LD_PRELOAD");
        } else {
            std::env::set_var("LD_PRELOAD", kept.join(":"));
        }
    }
    for v in crate::config::env::ALL {
        std::env::remove_var(v);
    }
}

/// How long the exit of a program waits for its profiler thread to write
/// the last records.
const PROFILER_STOP_S: i64 = 10;

/// Join thread `t` unless it runs `seconds` longer; true if joined.
fn join_within(t: libc::pthread_t, seconds: i64) -> bool {
    let mut deadline: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut deadline) };
    deadline.tv_sec += seconds;
    // The real function: this is the runtime's wait, not the program's.
    let rc =
        unsafe { (crate::real::real().pthread_timedjoin_np)(t, std::ptr::null_mut(), &deadline) };
    rc == 0
}

/// In a forked child, the parent's runtime is a copy whose threads and
/// profiler are gone. Thread-level: nothing of it works there. `--system`:
/// the child is one more process of the program, with a runtime of its own
/// in the same domain.
extern "C" fn after_fork_in_child() {
    let system = get().and_then(|rt| rt.cfg.system);
    fork::child(system.is_some());
    let Some(rt) = get() else { return };
    rt.disabled.store(true, Ordering::Release);
    let Some(sys) = system else {
        return;
    };
    // The parent's socket carries the parent's samples: not for this
    // process (which may go on as another user). The parent's runtime,
    // which owns it, is never used or dropped here.
    if let Some(fd) = rt.channel {
        unsafe { libc::close(fd) };
    }
    // The forking thread's state belongs to the parent's table.
    threads::detach();
    match handed(sys.channel_fd, "channel").and_then(Source::register) {
        Ok(source) => start(rt.cfg.clone(), source, rt.domain),
        Err(e) => eprintln!("holdup causal: cannot reach holdup causal run: {e}; profiling is off"),
    }
}

extern "C" fn at_exit() {
    if let Some(rt) = get() {
        rt.shutdown();
        if let Some(d) = rt.domain {
            d.resign(rt.pid as i32);
        }
    }
}

extern "C" fn on_delay_signal(
    _sig: libc::c_int,
    _info: *mut libc::siginfo_t,
    _ctx: *mut libc::c_void,
) {
    let Some(rt) = get() else { return };
    let Some(st) = threads::current() else { return };
    if st.busy.swap(true, Ordering::AcqRel) {
        return;
    }
    let errno = unsafe { *libc::__errno_location() };
    rt.add_delays(st);
    unsafe { *libc::__errno_location() = errno };
    st.busy.store(false, Ordering::Release);
}

fn install_signal_handler() {
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_delay_signal as *const () as usize;
        // SA_RESTART: a delay check must not make the program's own
        // system calls fail with EINTR.
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        (crate::real::real().sigaction)(threads::DELAY_SIGNAL, &sa, std::ptr::null_mut());
    }
}

impl Runtime {
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
    /// ahead by.
    pub fn add_delays(&self, st: &ThreadState) {
        let g = self.global();
        if !self.delays.active() {
            st.reset(g);
            return;
        }
        if st.blocked.load(Ordering::Acquire) {
            return;
        }
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
            st.free.fetch_add(free, Ordering::AcqRel);
            self.paid.fetch_add(waited, Ordering::Relaxed);
            st.paid.fetch_add(waited, Ordering::Relaxed);
            st.local.fetch_add(waited, Ordering::AcqRel);
            self.delays
                .global
                .fetch_max(st.published(), Ordering::AcqRel);
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
            st.pre_block.store(self.global(), Ordering::Release);
            st.blocked.store(true, Ordering::Release);
        }
    }

    /// After a blocking call; `woken` when another thread of the program
    /// ended the wait, so that the delays added meanwhile were paid by it.
    pub fn post_block(&self, woken: bool) {
        if let Some(st) = threads::current() {
            if woken {
                let g = self.global();
                let pre = st.pre_block.load(Ordering::Acquire);
                if g > pre && self.plausible(g) {
                    st.local.fetch_add(g - pre, Ordering::AcqRel);
                }
            }
            st.blocked.store(false, Ordering::Release);
        }
    }

    /// Before waking another thread: account for every sample taken so far
    /// (BCOZ: the blocked sample of an I/O this thread just finished), then
    /// pay what this thread owes.
    pub fn catch_up(&'static self) {
        let Some(st) = threads::current() else { return };
        if !self.delays.active() || st.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        // A 0% experiment delays nobody: nothing to catch up on.
        let pending = self.delays.delay(self.cfg.period_ns) > 0
            && match &self.peek {
                Some(p) => p.pending(),
                None => true,
            };
        if pending {
            self.process_pending();
        }
        self.add_delays(st);
        st.busy.store(false, Ordering::Release);
    }

    /// Drain the ring into the processor.
    pub fn process_pending(&'static self) {
        let Ok(mut guard) = self.processor.lock() else {
            return;
        };
        let p = &mut *guard;
        if !p.ready {
            return;
        }
        self.follow_experiment(p);
        let Some(mut ring) = p.ring.take() else {
            return;
        };
        let t0 = now_ns();
        let n = ring.drain(|bytes| p.process(self, bytes));
        p.ring = Some(ring);
        p.busy_ns += now_ns() - t0;
        p.records += n as u64;
    }

    /// `--system`: take up the experiment that the leading process started
    /// (or ended) in the shared domain, with its target as this process
    /// knows it (a line of another binary is no target here).
    fn follow_experiment(&self, p: &mut Processor) {
        let Some(d) = self.domain else { return };
        if !self.delays.active() {
            p.exp = None;
            return;
        }
        let n = d.experiment.load(Ordering::Acquire);
        if self.seen_experiment.swap(n, Ordering::AcqRel) == n {
            return;
        }
        let g = self.global();
        for st in self.threads.iter() {
            if !st.blocked.load(Ordering::Acquire) {
                st.reset(g);
            }
        }
        p.exp = p.resolve(&d.target()).map(|target| Experiment {
            target,
            start_ns: d.start_ns(now_ns()),
            delay_ns: self.delays.delay(self.cfg.period_ns),
            selected: 0,
        });
        p.pick = None;
        p.pick_total = 0;
    }

    /// A thread exits: it may wake a joiner, so it catches up first.
    pub fn thread_exit(&'static self) {
        self.catch_up();
        threads::detach();
    }

    fn spawn_profiler(&'static self) {
        extern "C" fn main(arg: *mut libc::c_void) -> *mut libc::c_void {
            // SAFETY: the runtime pointer passed below.
            let rt: &'static Runtime = unsafe { &*(arg as *const Runtime) };
            rt.profiler_tid.store(threads::gettid(), Ordering::Release);
            Profiler::new(rt).run();
            std::ptr::null_mut()
        }
        let mut t: libc::pthread_t = 0;
        // The real pthread_create: this thread is the profiler's, not the
        // program's, and gets no delay state.
        let rc = unsafe {
            (crate::real::real().pthread_create)(
                &mut t,
                std::ptr::null(),
                main,
                self as *const Runtime as *mut libc::c_void,
            )
        };
        if rc == 0 {
            self.profiler_thread.store(t as u64, Ordering::Release);
        } else {
            eprintln!("holdup causal: cannot start the profiler thread; profiling is off");
        }
    }

    /// End profiling: finish the running experiment and write the last
    /// records. Runs once, from `exit` or `_exit`.
    pub fn shutdown(&'static self) {
        if self.shut_down.swap(true, Ordering::AcqRel) {
            return;
        }
        if self.cfg.end_to_end {
            if let Some(c) = progress::counter(progress::THROUGHPUT, progress::END_TO_END) {
                c.count.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.stopping.store(true, Ordering::Release);
        let t = self.profiler_thread.load(Ordering::Acquire);
        if t != 0 && !join_within(t as libc::pthread_t, PROFILER_STOP_S) {
            // The program's exit must not wait on its profiler.
            eprintln!(
                "holdup causal: the profiler of process {} did not stop within {PROFILER_STOP_S} s; its last records are lost",
                self.pid
            );
        }
        self.delays.set_active(false);
    }
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
}
