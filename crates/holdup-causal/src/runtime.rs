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

use crate::clock::{now_ns, sleep_ns, Rng};
use crate::config::{scope_match, Config, Subclass};
use crate::lines::{self, LineTable, Locations};
use crate::modules::{Modules, Role};
use crate::progress::{self, Point, Snapshot};
use crate::threads::{self, ThreadState, ThreadTable};
use crate::unwind::{Unwinder, UserStack};
use holdup_bpf::records::{self, Record, SampleRec};
use holdup_bpf::ringbuf::RingReader;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;

/// How often the profiler thread drains the ring.
const TICK_NS: u64 = 2_000_000;
/// CPU time between two delay checks of a running thread.
const DELAY_TICK_NS: u64 = 2_000_000;
/// Most of a delay's overshoot that is credited (see add_delays).
const MAX_OVERSHOOT_NS: u64 = 1_000_000;
/// Pause between experiments, so that one's delays do not leak into the next.
const COOL_OFF_NS: u64 = 10_000_000;
/// Visits of every progress point wanted per experiment (COZ's value).
const TARGET_DELTA: usize = 5;
/// Speedups are drawn in 5% steps; 0% is drawn ZERO_WEIGHT times in
/// STEPS + ZERO_WEIGHT (≈ 26%), as in COZ, so every target has a baseline.
const STEPS: u64 = 20;
const ZERO_WEIGHT: u64 = 7;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Line(u32),
    Subclass(Subclass),
}

struct Experiment {
    target: Target,
    start_ns: u64,
    delay_ns: u64,
    selected: u64,
}

/// Points of one sample that can be charged to a line, to io, to runqueue.
#[derive(Clone, Copy, Default, Debug)]
struct Points {
    line: u64,
    io: u64,
    sched: u64,
}

/// The share of `w` points spread over [a, b) that falls at or after
/// `from`. The recorder counts points on per-thread clocks, so a part of an
/// interval gets its proportional share of the interval's weight.
fn share_after(w: u64, a: u64, b: u64, from: u64) -> u64 {
    if w == 0 || from <= a {
        return w;
    }
    if from >= b {
        return 0;
    }
    let (part, len) = ((b - from) as u128, (b - a) as u128);
    ((w as u128 * part + len / 2) / len) as u64
}

/// The points of `r` at or after `from` (0: all of them).
fn points_of(r: &SampleRec, from: u64) -> Points {
    if r.class == records::CLASS_CPU {
        // Steal time in a line is the line's: doing less there also takes
        // less of it. More cores would not give it back, so it is no
        // runqueue time here.
        let line = u64::from(r.weight + r.sched_weight) * u64::from(r.start >= from);
        return Points {
            line,
            io: 0,
            sched: 0,
        };
    }
    let wake = if r.wake == 0 {
        r.end
    } else {
        r.wake.clamp(r.start, r.end)
    };
    let (blocked, runq) = if r.class == records::CLASS_SCHED {
        (0, share_after(r.sched_weight.into(), r.start, r.end, from))
    } else {
        (
            share_after(r.weight.into(), r.start, wake, from),
            share_after(r.sched_weight.into(), wake, r.end, from),
        )
    };
    Points {
        // For a line, a whole off-CPU interval counts: doing less I/O (or
        // sleeping less) also saves the wait for a CPU after each wakeup.
        // A faster disk does not, so `io` has the blocked part only.
        line: match r.class {
            records::CLASS_LOCK => 0,
            records::CLASS_SCHED => runq,
            _ => blocked + runq,
        },
        io: if r.class == records::CLASS_IO {
            blocked
        } else {
            0
        },
        sched: runq,
    }
}

/// Everything needed to turn ring records into delays, behind one lock.
pub struct Processor {
    ring: Option<RingReader>,
    modules: Modules,
    tables: Vec<LineTable>,
    pub locs: Locations,
    unwinder: Unwinder,
    frames: Vec<u64>,
    slot_of: HashMap<i32, usize>,
    ready: bool,
    last_refresh_ns: u64,
    /// Weighted sample points per location, and for io / runqueue.
    pub counts: HashMap<u32, u64>,
    pub io_points: u64,
    pub sched_points: u64,
    exp: Option<Experiment>,
    /// Weighted reservoir of candidate targets since the last experiment began.
    pick: Option<Target>,
    pick_total: u64,
    rng: Rng,
    allow_subclasses: bool,
    pub samples_seen: u64,
    /// Records drained and time spent on them, for --verbose.
    records: u64,
    busy_ns: u64,
}

impl Processor {
    fn new(ring: Option<RingReader>) -> Processor {
        Processor {
            ring,
            modules: Modules::default(),
            tables: Vec::new(),
            locs: Locations::default(),
            unwinder: Unwinder::default(),
            frames: Vec::with_capacity(128),
            slot_of: HashMap::new(),
            ready: false,
            last_refresh_ns: 0,
            counts: HashMap::new(),
            io_points: 0,
            sched_points: 0,
            exp: None,
            pick: None,
            pick_total: 0,
            rng: Rng::seeded(),
            allow_subclasses: true,
            samples_seen: 0,
            records: 0,
            busy_ns: 0,
        }
    }

    fn offer(&mut self, t: Target, w: u64) {
        if w == 0 {
            return;
        }
        self.pick_total += w;
        if self.rng.below(self.pick_total) < w {
            self.pick = Some(t);
        }
    }

    fn thread(
        &mut self,
        threads: &'static ThreadTable,
        tid: i32,
        global: u64,
    ) -> Option<&'static ThreadState> {
        if let Some(&i) = self.slot_of.get(&tid) {
            let s = threads.slot(i);
            if s.tid.load(Ordering::Acquire) == tid {
                return Some(s);
            }
        }
        // A thread the runtime did not start (or a reused slot): claim one
        // so its credit still raises the global delay.
        let s = threads.find_or_claim(tid, global)?;
        if let Some(i) = threads.index_of(tid) {
            self.slot_of.insert(tid, i);
        }
        Some(s)
    }

    fn process(&mut self, rt: &'static Runtime, bytes: &[u8]) {
        let Ok(Record::Sample(s)) = records::parse(bytes) else {
            return;
        };
        let r = s.rec;
        if r.pid != rt.pid || r.tid as i32 == rt.profiler_tid.load(Ordering::Relaxed) {
            return;
        }
        if r.flags & records::SF_USER_REGS == 0 || r.flags & records::SF_BLOCKED_TAIL != 0 {
            return;
        }
        let all = points_of(&r, 0);
        if all.line + all.io + all.sched == 0 {
            return;
        }
        let fp = s.fp_chain();
        let stack = UserStack {
            ip: r.ip,
            sp: r.sp,
            bp: r.bp,
            fp_chain: &fp,
            copy: s.copy,
        };
        let mut frames = std::mem::take(&mut self.frames);
        self.unwinder.unwind(&self.modules, &stack, &mut frames);

        let target_line = match self.exp.as_ref().map(|e| e.target) {
            Some(Target::Line(l)) => Some(l),
            _ => None,
        };
        let mut first = None;
        let mut hit = false;
        let mut saw_main = false;
        let mut own = false;
        let mut unknown = false;
        for (i, &f) in frames.iter().enumerate() {
            let addr = if i == 0 { f } else { f.wrapping_sub(1) };
            let Some(mi) = self.modules.find(addr) else {
                unknown = true;
                continue;
            };
            let m = &self.modules.list[mi];
            match m.role {
                // The runtime's own work (paying delays, processing
                // samples) is not the program's. A blocked sample that
                // merely passes through an interposed pthread call is.
                Role::Runtime
                    if !saw_main
                        && (i == 0
                            || !matches!(r.class, records::CLASS_LOCK | records::CLASS_IO)) =>
                {
                    own = true;
                    break;
                }
                Role::Main => saw_main = true,
                _ => {}
            }
            if let Some(t) = m.lines {
                if let Some(loc) = self.tables[t].lookup(addr - m.bias) {
                    first.get_or_insert(loc);
                    if Some(loc) == target_line {
                        hit = true;
                    }
                    if target_line.is_none() || hit {
                        break;
                    }
                }
            }
        }
        self.frames = frames;
        if own {
            return;
        }
        if unknown {
            self.maybe_refresh_modules(rt);
        }
        self.samples_seen += 1;
        if let Some(loc) = first {
            *self.counts.entry(loc).or_insert(0) += all.line;
        }
        self.io_points += all.io;
        self.sched_points += all.sched;

        if let Some(exp) = &self.exp {
            let (target, start, delay) = (exp.target, exp.start_ns, exp.delay_ns);
            let p = points_of(&r, start);
            let credit = match target {
                Target::Line(_) if hit => p.line,
                Target::Line(_) => 0,
                Target::Subclass(Subclass::Io) => p.io,
                Target::Subclass(Subclass::Sched) => p.sched,
            };
            if credit > 0 {
                if let Some(e) = self.exp.as_mut() {
                    e.selected += credit;
                }
                if delay > 0 {
                    let g = rt.global.load(Ordering::Acquire);
                    if let Some(st) = self.thread(&rt.threads, r.tid as i32, g) {
                        st.local.fetch_add(credit * delay, Ordering::AcqRel);
                        rt.credited.fetch_add(credit * delay, Ordering::Relaxed);
                        rt.global.fetch_max(st.published(), Ordering::AcqRel);
                    }
                }
            }
        }
        if let Some(loc) = first {
            if !lines::is_progress_header(self.locs.name(loc)) {
                self.offer(Target::Line(loc), all.line);
            }
        }
        if self.allow_subclasses {
            self.offer(Target::Subclass(Subclass::Io), all.io);
            self.offer(Target::Subclass(Subclass::Sched), all.sched);
        }
    }

    /// A library loaded by dlopen shows up as unknown addresses.
    fn maybe_refresh_modules(&mut self, rt: &Runtime) {
        let now = now_ns();
        if now - self.last_refresh_ns < 1_000_000_000 {
            return;
        }
        self.last_refresh_ns = now;
        let mut fresh = Modules::load(runtime_address());
        for m in &mut fresh.list {
            m.lines = self
                .modules
                .list
                .iter()
                .find(|o| o.path == m.path && o.bias == m.bias)
                .and_then(|o| o.lines);
        }
        self.modules = fresh;
        let _ = rt;
    }
}

/// An address inside this library.
fn runtime_address() -> u64 {
    runtime_address as *const () as usize as u64
}

/// Read-only views of the ring's positions, to tell without the lock
/// whether anything is waiting.
struct RingPeek {
    cons: *const AtomicU64,
    prod: *const AtomicU64,
}

unsafe impl Send for RingPeek {}
unsafe impl Sync for RingPeek {}

impl RingPeek {
    fn new(fd: i32) -> Option<RingPeek> {
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let map = |off: usize| unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                off as libc::off_t,
            );
            (p != libc::MAP_FAILED).then_some(p as *const AtomicU64)
        };
        Some(RingPeek {
            cons: map(0)?,
            prod: map(page)?,
        })
    }

    fn pending(&self) -> bool {
        unsafe { (*self.prod).load(Ordering::Acquire) > (*self.cons).load(Ordering::Acquire) }
    }
}

pub struct Runtime {
    pub cfg: Config,
    pub pid: u32,
    /// An experiment is running.
    pub active: AtomicBool,
    /// Its delay per sampling point (0 for a 0% experiment).
    pub delay: AtomicU64,
    /// COZ's global delay, ns.
    pub global: AtomicU64,
    /// Delay paid with sleeps and credited by target hits, for --verbose.
    paid: AtomicU64,
    credited: AtomicU64,
    pub threads: ThreadTable,
    pub processor: Mutex<Processor>,
    peek: Option<RingPeek>,
    pub profiler_tid: AtomicI32,
    profiler_thread: AtomicU64,
    stopping: AtomicBool,
    shut_down: AtomicBool,
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

fn log(cfg_verbose: bool, msg: &str) {
    if cfg_verbose {
        eprintln!("holdup causal: {msg}");
    }
}

/// Start the runtime if `holdup causal run` asked for it. Runs in the
/// library constructor, on the main thread, before `main`.
pub fn init() {
    let Some(cfg) = Config::from_env() else {
        return;
    };
    scrub_environment(cfg.ring_fd);
    let ring = RingReader::new(
        unsafe { BorrowedFd::borrow_raw(cfg.ring_fd) },
        cfg.ring_bytes,
    )
    .ok();
    if ring.is_none() {
        eprintln!("holdup causal: cannot map the recorder's ring buffer; profiling is off");
        return;
    }
    let rt: &'static Runtime = Box::leak(Box::new(Runtime {
        pid: std::process::id(),
        active: AtomicBool::new(false),
        delay: AtomicU64::new(0),
        global: AtomicU64::new(0),
        paid: AtomicU64::new(0),
        credited: AtomicU64::new(0),
        threads: ThreadTable::default(),
        processor: Mutex::new(Processor::new(ring)),
        peek: RingPeek::new(cfg.ring_fd),
        profiler_tid: AtomicI32::new(0),
        profiler_thread: AtomicU64::new(0),
        stopping: AtomicBool::new(false),
        shut_down: AtomicBool::new(false),
        disabled: AtomicBool::new(false),
        cfg,
    }));
    install_signal_handler();
    RT.store(rt as *const Runtime as *mut Runtime, Ordering::Release);
    rt.register_current_thread(0);
    unsafe {
        libc::pthread_atfork(None, None, Some(after_fork_in_child));
        libc::atexit(at_exit);
    }
    if rt.cfg.end_to_end {
        progress::counter(progress::THROUGHPUT, progress::END_TO_END);
    }
    rt.spawn_profiler();
}

/// Keep what `holdup causal run` set from reaching programs this one starts:
/// our entry leaves LD_PRELOAD, the ring's fd is closed on exec.
fn scrub_environment(ring_fd: i32) {
    unsafe { libc::fcntl(ring_fd, libc::F_SETFD, libc::FD_CLOEXEC) };
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

extern "C" fn after_fork_in_child() {
    if let Some(rt) = get() {
        rt.disabled.store(true, Ordering::Release);
    }
}

extern "C" fn at_exit() {
    if let Some(rt) = get() {
        rt.shutdown();
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

    /// COZ's add_delays: pay what this thread owes, or publish what it is
    /// ahead by.
    pub fn add_delays(&self, st: &ThreadState) {
        let g = self.global.load(Ordering::Acquire);
        if !self.active.load(Ordering::Acquire) {
            st.reset(g);
            return;
        }
        if st.blocked.load(Ordering::Acquire) {
            return;
        }
        let local = st.local.load(Ordering::Acquire);
        if local > g {
            self.global.fetch_max(st.published(), Ordering::AcqRel);
        } else if local < g {
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
            self.global.fetch_max(st.published(), Ordering::AcqRel);
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
            st.pre_block
                .store(self.global.load(Ordering::Acquire), Ordering::Release);
            st.blocked.store(true, Ordering::Release);
        }
    }

    /// After a blocking call; `woken` when another thread of the program
    /// ended the wait, so that the delays added meanwhile were paid by it.
    pub fn post_block(&self, woken: bool) {
        if let Some(st) = threads::current() {
            if woken {
                let g = self.global.load(Ordering::Acquire);
                let pre = st.pre_block.load(Ordering::Acquire);
                st.local.fetch_add(g.saturating_sub(pre), Ordering::AcqRel);
            }
            st.blocked.store(false, Ordering::Release);
        }
    }

    /// Before waking another thread: account for every sample taken so far
    /// (BCOZ: the blocked sample of an I/O this thread just finished), then
    /// pay what this thread owes.
    pub fn catch_up(&'static self) {
        let Some(st) = threads::current() else { return };
        if !self.active.load(Ordering::Acquire) || st.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        // A 0% experiment delays nobody: nothing to catch up on.
        let pending = self.delay.load(Ordering::Acquire) > 0
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
        let Some(mut ring) = p.ring.take() else {
            return;
        };
        let t0 = now_ns();
        let n = ring.drain(|bytes| p.process(self, bytes));
        p.ring = Some(ring);
        p.busy_ns += now_ns() - t0;
        p.records += n as u64;
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
        if t != 0 {
            unsafe {
                (crate::real::real().pthread_join)(t as libc::pthread_t, std::ptr::null_mut())
            };
        }
        self.active.store(false, Ordering::Release);
    }
}

/// The profiler thread: runs experiments and writes the profile.
struct Profiler {
    rt: &'static Runtime,
    out: Option<File>,
    start_ns: u64,
    rng: Rng,
    length_ns: u64,
    experiments: u64,
    fixed_line: Option<u32>,
    log_countdown: u64,
    log_interval: u64,
}

/// Saved progress counts at an experiment's start.
struct Saved {
    snaps: Vec<Snapshot>,
    start_ns: u64,
    global: u64,
    target: Target,
    speedup_pct: u64,
    windows: Vec<Window>,
}

/// When a throughput point was first and last seen to move during an
/// experiment: (time, count, global delay) at each. Visits come in bursts
/// (a round of work, a batch); counting whole visits between the first and
/// the last one, instead of over the experiment's fixed length, removes the
/// error of the partial bursts at both ends.
#[derive(Clone, Copy, Default)]
struct Window {
    last_count: usize,
    first: Option<(u64, usize, u64)>,
    last: Option<(u64, usize, u64)>,
}

impl Saved {
    fn observe(&mut self, now: u64, global: u64) {
        let Ok(points) = progress::POINTS.lock() else {
            return;
        };
        for (i, pt) in points.iter().enumerate() {
            if i >= self.windows.len() {
                let base = self.snaps.get(i).map_or(0, |s| s.a);
                self.windows.push(Window {
                    last_count: base,
                    ..Window::default()
                });
            }
            let Point::Throughput { counter, .. } = pt else {
                continue;
            };
            let c = counter.count.load(Ordering::Relaxed);
            let w = &mut self.windows[i];
            if c != w.last_count {
                w.last_count = c;
                w.first.get_or_insert((now, c, global));
                w.last = Some((now, c, global));
            }
        }
    }
}

impl Profiler {
    fn new(rt: &'static Runtime) -> Profiler {
        Profiler {
            rt,
            out: None,
            start_ns: now_ns(),
            rng: Rng::seeded(),
            length_ns: rt.cfg.experiment_ns,
            experiments: 0,
            fixed_line: None,
            log_countdown: 16,
            log_interval: 16,
        }
    }

    fn verbose(&self, msg: &str) {
        log(self.rt.cfg.verbose, msg);
    }

    fn write(&mut self, text: &str) {
        if let Some(f) = self.out.as_mut() {
            // One write per record group: a crash leaves whole experiments.
            let _ = f.write_all(text.as_bytes());
        }
    }

    fn run(mut self) {
        let rt = self.rt;
        self.out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&rt.cfg.output)
            .ok();
        if self.out.is_none() {
            eprintln!(
                "holdup causal: cannot write {}; profiling is off",
                rt.cfg.output.display()
            );
            return;
        }
        let unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let startup = format!(
            "startup\ttime={unix_ns}\ttool=holdup\tpid={}\tperiod={}\n",
            rt.pid, rt.cfg.period_ns
        );
        self.write(&startup);
        self.load_lines();

        let mut state = State::WaitProgress;
        let mut saved: Option<Saved> = None;
        while !rt.stopping.load(Ordering::Acquire) {
            sleep_ns(TICK_NS);
            rt.process_pending();
            let now = now_ns();
            if let Some(s) = saved.as_mut() {
                s.observe(now, rt.global.load(Ordering::Acquire));
            }
            state = match state {
                State::WaitProgress if progress::count() > 0 => State::WaitTarget,
                State::WaitTarget => match self.next_target() {
                    Some(target) => {
                        saved = Some(self.start(target));
                        State::Running(now + self.length_ns)
                    }
                    None => State::WaitTarget,
                },
                State::Running(until) if now >= until && !rt.cfg.end_to_end => {
                    if let Some(s) = saved.take() {
                        self.finish(s);
                    }
                    State::CoolOff(now_ns() + COOL_OFF_NS)
                }
                State::CoolOff(until) if now >= until => State::WaitTarget,
                s => s,
            };
        }
        rt.process_pending();
        if let Some(s) = saved.take() {
            self.finish(s);
        }
        self.log_samples();
        if let Ok(p) = rt.processor.lock() {
            self.verbose(&format!(
                "{} records, {} samples of the program, {:.1} µs per record",
                p.records,
                p.samples_seen,
                p.busy_ns as f64 / 1e3 / p.records.max(1) as f64
            ));
        }
        let runtime = format!(
            "runtime\ttime={}\tprogress-points={}\texperiments={}\n",
            now_ns() - self.start_ns,
            progress::count(),
            self.experiments
        );
        self.write(&runtime);
    }

    fn load_lines(&mut self) {
        let rt = self.rt;
        let t0 = now_ns();
        let mut modules = Modules::load(runtime_address());
        let mut locs = Locations::default();
        let mut tables = Vec::new();
        let scope = rt.cfg.scope.clone();
        for m in &mut modules.list {
            if m.role == Role::Runtime || m.path.is_empty() || m.path.starts_with("linux-vdso") {
                continue;
            }
            let wanted_object = match &scope {
                None => m.role == Role::Main,
                Some(g) => m.role == Role::Main || scope_match(g, &m.path),
            };
            if !wanted_object {
                continue;
            }
            let object_matches = scope.as_ref().is_some_and(|g| scope_match(g, &m.path));
            let keep = |file: &str| match &scope {
                None => true,
                Some(g) => object_matches || scope_match(g, file),
            };
            match lines::load(std::path::Path::new(&m.path), &mut locs, &keep) {
                Ok(t) if !t.is_empty() => {
                    m.lines = Some(tables.len());
                    tables.push(t);
                }
                Ok(_) => {
                    if m.role == Role::Main {
                        eprintln!(
                            "holdup causal: {} has no line table in scope; build it with -g",
                            m.path
                        );
                    }
                }
                Err(e) => eprintln!("holdup causal: {}: {e}", m.path),
            }
        }
        self.verbose(&format!(
            "{} line tables, {} source lines, in {} ms",
            tables.len(),
            locs.len(),
            (now_ns() - t0) / 1_000_000
        ));
        if let Some(spec) = &rt.cfg.line {
            self.fixed_line = locs.find(spec);
            if self.fixed_line.is_none() {
                eprintln!("holdup causal: line {spec} is not in the program's line tables; no experiments will run");
            }
        }
        let Ok(mut p) = rt.processor.lock() else {
            return;
        };
        p.modules = modules;
        p.tables = tables;
        p.locs = locs;
        p.allow_subclasses = rt.cfg.line.is_none();
        p.ready = true;
    }

    fn next_target(&mut self) -> Option<Target> {
        let rt = self.rt;
        if rt.cfg.line.is_some() {
            return self.fixed_line.map(Target::Line);
        }
        if let Some(s) = rt.cfg.subclass {
            return Some(Target::Subclass(s));
        }
        let mut p = rt.processor.lock().ok()?;
        p.pick.take()
    }

    fn start(&mut self, target: Target) -> Saved {
        let rt = self.rt;
        let speedup_pct = match rt.cfg.speedup {
            Some(s) => s as u64,
            None => match self.rng.below(STEPS + ZERO_WEIGHT) {
                r if r < ZERO_WEIGHT => 0,
                r => (r - ZERO_WEIGHT + 1) * (100 / STEPS),
            },
        };
        let delay_ns = rt.cfg.period_ns * speedup_pct / 100;
        let snaps: Vec<Snapshot> = progress::POINTS
            .lock()
            .map(|pts| pts.iter().map(Point::snapshot).collect())
            .unwrap_or_default();
        let global = rt.global.load(Ordering::Acquire);
        // Delays left unpaid by the last experiment must not leak into
        // this one; blocked threads settle theirs in post_block.
        for st in rt.threads.iter() {
            if !st.blocked.load(Ordering::Acquire) {
                st.reset(global);
            }
        }
        let start_ns = now_ns();
        if let Ok(mut p) = rt.processor.lock() {
            p.exp = Some(Experiment {
                target,
                start_ns,
                delay_ns,
                selected: 0,
            });
            p.pick = None;
            p.pick_total = 0;
        }
        rt.delay.store(delay_ns, Ordering::Release);
        rt.active.store(true, Ordering::Release);
        let windows = snaps
            .iter()
            .map(|s| Window {
                last_count: s.a,
                ..Window::default()
            })
            .collect();
        Saved {
            snaps,
            start_ns,
            global,
            target,
            speedup_pct,
            windows,
        }
    }

    fn finish(&mut self, mut s: Saved) {
        let rt = self.rt;
        rt.process_pending();
        let end_ns = now_ns();
        let global = rt.global.load(Ordering::Acquire);
        s.observe(end_ns, global);
        let (selected, name) = match rt.processor.lock() {
            Ok(mut p) => {
                let sel = p.exp.take().map_or(0, |e| e.selected);
                let name = match s.target {
                    Target::Line(l) => p.locs.name(l).to_string(),
                    Target::Subclass(sc) => sc.name().to_string(),
                };
                (sel, name)
            }
            Err(_) => return,
        };
        rt.active.store(false, Ordering::Release);
        let elapsed = end_ns - s.start_ns;
        let delay = global - s.global;
        let duration = elapsed.saturating_sub(delay);
        let kind = match s.target {
            Target::Line(_) => "line",
            Target::Subclass(_) => "subclass",
        };
        let mut text = format!(
            "experiment\tselected={}\tspeedup={:.2}\tduration={duration}\tselected-samples={selected}\telapsed={elapsed}\tdelay={delay}\tkind={kind}\n",
            clean(&name),
            s.speedup_pct as f64 / 100.0,
        );
        let mut min_delta = usize::MAX;
        if let Ok(points) = progress::POINTS.lock() {
            for (i, pt) in points.iter().enumerate() {
                let before = s.snaps.get(i).copied().unwrap_or_default();
                let now = pt.snapshot();
                match pt {
                    Point::Throughput { name, .. } => {
                        let delta = now.a.saturating_sub(before.a);
                        min_delta = min_delta.min(delta);
                        let _ = write!(
                            text,
                            "throughput-point\tname={}\tdelta={delta}",
                            clean(name)
                        );
                        if let Some(Window {
                            first: Some(f),
                            last: Some(l),
                            ..
                        }) = s.windows.get(i)
                        {
                            let span = (l.0 - f.0).saturating_sub(l.2 - f.2);
                            let _ = write!(
                                text,
                                "\twindow-delta={}\twindow-duration={span}",
                                l.1 - f.1
                            );
                        }
                        text.push('\n');
                    }
                    Point::Latency { name, .. } => {
                        let arrivals = now.a.saturating_sub(before.a);
                        let departures = now.b.saturating_sub(before.b);
                        min_delta = min_delta.min(arrivals).min(departures);
                        let _ = writeln!(
                            text,
                            "latency-point\tname={}\tarrivals={arrivals}\tdepartures={departures}\tdifference={}",
                            clean(name),
                            now.a.saturating_sub(now.b)
                        );
                    }
                }
            }
        }
        self.write(&text);
        self.experiments += 1;
        self.verbose(text.lines().next().unwrap_or(""));
        // Where the delay went: credited by the target's points, paid with
        // sleeps, still owed by each thread (the rest was excused by waits).
        let (paid, credited) = (
            rt.paid.swap(0, Ordering::Relaxed),
            rt.credited.swap(0, Ordering::Relaxed),
        );
        if rt.cfg.verbose {
            let per_thread: Vec<(i64, u64)> = rt
                .threads
                .iter()
                .map(|t| {
                    (
                        global as i64 - t.local.load(Ordering::Acquire) as i64,
                        t.paid.swap(0, Ordering::Relaxed),
                    )
                })
                .collect();
            self.verbose(&format!(
                "delay credited {credited} ns, paid with sleeps {paid} ns, (owed, paid) per thread {per_thread:?} ns"
            ));
        }
        // COZ's adaptive length: longer until progress points are seen
        // often enough, shorter again when they are seen plenty.
        let min_len = rt.cfg.experiment_ns;
        if min_delta < TARGET_DELTA {
            self.length_ns = (self.length_ns * 2).min(min_len * 16);
        } else if min_delta > TARGET_DELTA * 2 && self.length_ns >= min_len * 2 {
            self.length_ns /= 2;
        }
        self.log_countdown -= 1;
        if self.log_countdown == 0 {
            self.log_samples();
            self.log_interval = (self.log_interval * 2).min(256);
            self.log_countdown = self.log_interval;
        }
    }

    /// Cumulative sample counts, written now and then so that a profile cut
    /// short still has them; readers keep the last count of each location.
    fn log_samples(&mut self) {
        let mut text = format!("runtime\ttime={}\n", now_ns() - self.start_ns);
        if let Ok(p) = self.rt.processor.lock() {
            let mut locs: Vec<(&u32, &u64)> = p.counts.iter().filter(|(_, &c)| c > 0).collect();
            locs.sort();
            for (&loc, &count) in locs {
                let _ = writeln!(
                    text,
                    "samples\tlocation={}\tcount={count}",
                    clean(p.locs.name(loc))
                );
            }
            for (name, count) in [
                ("subclass:io", p.io_points),
                ("subclass:sched", p.sched_points),
            ] {
                if count > 0 {
                    let _ = writeln!(text, "samples\tlocation={name}\tcount={count}");
                }
            }
        }
        self.write(&text);
    }
}

#[derive(Clone, Copy, Debug)]
enum State {
    WaitProgress,
    WaitTarget,
    Running(u64),
    CoolOff(u64),
}

/// Field values may not contain the format's separators.
fn clean(s: &str) -> String {
    s.replace(['\t', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(
        class: u8,
        start: u64,
        wake: u64,
        end: u64,
        weight: u32,
        sched_weight: u32,
    ) -> SampleRec {
        SampleRec {
            class,
            start,
            wake,
            end,
            weight,
            sched_weight,
            ..Default::default()
        }
    }

    #[test]
    fn points_keep_the_recorders_weights() {
        // io: 3 blocked points, 1 runqueue point.
        let r = rec(records::CLASS_IO, 500_000, 3_500_000, 4_500_000, 3, 1);
        let all = points_of(&r, 0);
        assert_eq!((all.line, all.io, all.sched), (4, 3, 1));
        // An experiment that began in the middle of the wait gets its share.
        let part = points_of(&r, 2_500_000);
        assert_eq!((part.line, part.io, part.sched), (2, 1, 1));
        assert_eq!(points_of(&r, 5_000_000).line, 0);
        // A short wait that the thread's clock gave a point keeps it whole.
        let short = rec(records::CLASS_IO, 1_000, 200_000, 250_000, 1, 0);
        assert_eq!(points_of(&short, 500).io, 1);
        // Lock waits never count for lines.
        let l = points_of(&rec(records::CLASS_LOCK, 1, 3_000_001, 3_000_001, 3, 0), 0);
        assert_eq!((l.line, l.io, l.sched), (0, 0, 0));
        // Preempted: runqueue throughout, and for the line it ran.
        let s = points_of(&rec(records::CLASS_SCHED, 1, 0, 2_000_001, 0, 2), 0);
        assert_eq!((s.line, s.io, s.sched), (2, 0, 2));
        // On-CPU with steal: all of it is the line's, none is runqueue.
        let c = points_of(&rec(records::CLASS_CPU, 10, 0, 10, 2, 3), 0);
        assert_eq!((c.line, c.io, c.sched), (5, 0, 0));
        assert_eq!(
            points_of(&rec(records::CLASS_CPU, 10, 0, 10, 2, 3), 11).line,
            0
        );
    }
}
