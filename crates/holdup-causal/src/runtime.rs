//! The runtime's lifecycle: started by the library's constructor if
//! `holdup causal run` asked for it (connect to the samples, build the
//! [`State`] and the [`Samples`], start the profiler thread), carried into
//! forked children, and shut down at exit. The wrappers reach the running
//! runtime through [`get`]; nothing below this module calls back into it.
//! See [`crate::state`] for COZ's accounting.

use crate::clock::now_ns;
use crate::config::Config;
use crate::counter::THROUGHPUT;
use crate::domain::Domain;
use crate::fork;
use crate::processor::Samples;
use crate::profiler::Profiler;
use crate::progress;
use crate::source::Source;
use crate::state::State;
use crate::threads;
use holdup_bpf::ringbuf::{RingPeek, RingReader};
use holdup_coz::probe_list::ProbePoint;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{AtomicPtr, Ordering};

/// A running runtime: its state and its sampling half.
pub struct Runtime {
    pub state: State,
    pub samples: Samples,
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
    (!rt.state.disabled.load(Ordering::Relaxed)).then_some(rt)
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
    let channel = source.socket();
    let rt: &'static Runtime = Box::leak(Box::new(Runtime {
        state: State::new(cfg, delays, domain, channel),
        samples: Samples::new(source, peek),
    }));
    let first = RT
        .swap(rt as *const Runtime as *mut Runtime, Ordering::AcqRel)
        .is_null();
    let st = &rt.state;
    st.register_current_thread(st.global());
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
    if st.cfg.end_to_end {
        progress::counter(THROUGHPUT, progress::END_TO_END, st.shared_points());
    }
    progress::add_probes(&st.cfg.probes);
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
    let system = get().and_then(|rt| rt.state.cfg.system);
    fork::child(system.is_some());
    let Some(rt) = get() else { return };
    let st = &rt.state;
    st.disabled.store(true, Ordering::Release);
    let Some(sys) = system else {
        return;
    };
    // The parent's socket carries the parent's samples: not for this
    // process (which may go on as another user). The parent's runtime,
    // which owns it, is never used or dropped here.
    if let Some(fd) = st.channel {
        unsafe { libc::close(fd) };
    }
    // The forking thread's state belongs to the parent's table.
    threads::detach();
    match handed(sys.channel_fd, "channel").and_then(Source::register) {
        Ok(source) => start(st.cfg.clone(), source, st.domain),
        Err(e) => eprintln!("holdup causal: cannot reach holdup causal run: {e}; profiling is off"),
    }
}

extern "C" fn at_exit() {
    if let Some(rt) = get() {
        rt.shutdown();
        if let Some(d) = rt.state.domain {
            d.resign(rt.state.pid as i32);
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
    rt.state.add_delays(st);
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
    /// Before waking another thread: account for every sample taken so far
    /// (BCOZ: the blocked sample of an I/O this thread just finished), then
    /// pay what this thread owes.
    #[inline(never)]
    pub fn catch_up(&'static self) {
        let Some(t) = threads::current() else { return };
        let st = &self.state;
        if !st.delays.active() || t.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        // A 0% experiment delays nobody: nothing to catch up on.
        if st.delays.delay(st.cfg.period_ns) > 0 && self.samples.pending() {
            let (resets, t0) = (t.resets.load(Ordering::Acquire), now_ns());
            self.samples.process_pending(st);
            st.paid_draining(t, now_ns() - t0, resets);
        }
        st.add_delays(t);
        t.busy.store(false, Ordering::Release);
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
            rt.state
                .profiler_tid
                .store(threads::gettid(), Ordering::Release);
            Profiler::new(&rt.state, &rt.samples).run();
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
            self.state
                .profiler_thread
                .store(t as u64, Ordering::Release);
        } else {
            eprintln!("holdup causal: cannot start the profiler thread; profiling is off");
        }
    }

    /// End profiling: finish the running experiment and write the last
    /// records. Runs once, from `exit` or `_exit`.
    pub fn shutdown(&'static self) {
        let st = &self.state;
        if st.shut_down.swap(true, Ordering::AcqRel) {
            return;
        }
        if st.cfg.end_to_end {
            let end_to_end =
                progress::counter(THROUGHPUT, progress::END_TO_END, st.shared_points());
            if let Some(c) = end_to_end {
                c.count.fetch_add(1, Ordering::Relaxed);
            }
        }
        st.stopping.store(true, Ordering::Release);
        let t = st.profiler_thread.load(Ordering::Acquire);
        if t != 0 && !join_within(t as libc::pthread_t, PROFILER_STOP_S) {
            // The program's exit must not wait on its profiler.
            eprintln!(
                "holdup causal: the profiler of process {} did not stop within {PROFILER_STOP_S} s; its last records are lost",
                st.pid
            );
        }
        st.delays.set_active(false);
    }
}
