//! The per-core handler threads of core-level virtual speedups (SCOZ
//! §3.3, §3.5), without SCOZ's delay system call.
//!
//! SCOZ's handler asks its kernel to spin with preemption off. A stock
//! kernel gets close with a thread pinned to its core at the highest
//! real-time priority: nothing but the kernel's own stop tasks and
//! interrupts runs there while it spins, so the core is held as SCOZ's
//! ndelay holds it. A handler wakes every tick, and spins off what its
//! core owes, unless the core is idle (then the kernel side settles the
//! debt when the core wakes; see `cores.bpf.c`).

use holdup_bpf::cores::Cores;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// How often a handler looks at its core's debt during an experiment.
const TICK_NS: u64 = 1_000_000;
/// Between experiments nothing new is owed, so a handler with no debt
/// sleeps until woken, or this long: a wake-up of a real-time thread every
/// tick on every core is not free. It ticks in every experiment, those at
/// 0% too, so that its cost is the same in the baseline.
const PARKED_NS: u64 = 50_000_000;
/// The longest spin before the handler sleeps a tick: a debt of seconds
/// (an idle core woken by an interrupt after a long experiment) must not
/// hold the core for seconds at once.
const MAX_SPIN_NS: u64 = 20_000_000;

pub struct Handlers {
    stop: Arc<AtomicBool>,
    /// An experiment runs: debts may grow.
    experimenting: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Delay spun off by all handlers, in ns.
    pub spun: Arc<AtomicU64>,
}

impl Handlers {
    /// One handler per CPU in `cpus`; fails if a real-time thread cannot
    /// be made (no CAP_SYS_NICE, or real-time scheduling disabled).
    pub fn start(cores: Cores, cpus: &[usize]) -> anyhow::Result<Handlers> {
        let stop = Arc::new(AtomicBool::new(false));
        let experimenting = Arc::new(AtomicBool::new(false));
        let spun = Arc::new(AtomicU64::new(0));
        let mut threads = Vec::new();
        let (tx, rx) = std::sync::mpsc::channel();
        for &cpu in cpus {
            let (stop, experimenting, spun, tx) = (
                stop.clone(),
                experimenting.clone(),
                spun.clone(),
                tx.clone(),
            );
            threads.push(
                std::thread::Builder::new()
                    .name(format!("holdup-core{cpu}"))
                    .spawn(move || {
                        let ready = become_handler(cpu, cores);
                        let ok = ready.is_ok();
                        let _ = tx.send(ready);
                        if ok {
                            handle(cpu, cores, &stop, &experimenting, &spun);
                        }
                    })?,
            );
        }
        let handlers = Handlers {
            stop,
            experimenting,
            threads,
            spun,
        };
        for _ in cpus {
            rx.recv()??;
        }
        Ok(handlers)
    }

    /// Whether an experiment runs; the handlers wake at once when one
    /// starts.
    pub fn set_experimenting(&self, on: bool) {
        if on && !self.experimenting.swap(true, Ordering::AcqRel) {
            for t in &self.threads {
                t.thread().unpark();
            }
        } else if !on {
            self.experimenting.store(false, Ordering::Release);
        }
    }
}

impl Drop for Handlers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Pin this thread to `cpu` at the highest real-time priority, and tell
/// the kernel side that it is the core's handler.
fn become_handler(cpu: usize, cores: Cores) -> anyhow::Result<()> {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            anyhow::bail!(
                "cannot pin a delay handler to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            );
        }
        let param = libc::sched_param {
            sched_priority: libc::sched_get_priority_max(libc::SCHED_FIFO),
        };
        if libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) != 0 {
            anyhow::bail!(
                "cannot give the delay handler of CPU {cpu} a real-time priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    let tid = unsafe { libc::gettid() } as u32;
    if let Some(c) = cores.core(cpu) {
        c.handler_tid.store(tid, Ordering::Release);
    }
    Ok(())
}

fn handle(
    cpu: usize,
    cores: Cores,
    stop: &AtomicBool,
    experimenting: &AtomicBool,
    spun: &AtomicU64,
) {
    let Some(core) = cores.core(cpu) else { return };
    let mut next = holdup_bpf::monotonic_ns();
    while !stop.load(Ordering::Acquire) {
        if !experimenting.load(Ordering::Acquire) && cores.owed(cpu) == 0 {
            std::thread::park_timeout(std::time::Duration::from_nanos(PARKED_NS));
            next = holdup_bpf::monotonic_ns();
            continue;
        }
        next += TICK_NS;
        let now = holdup_bpf::monotonic_ns();
        if next < now {
            next = now;
        }
        sleep_until(next);
        if core.idle.load(Ordering::Acquire) != 0 {
            continue;
        }
        let owed = cores.owed(cpu).min(MAX_SPIN_NS);
        if owed == 0 {
            continue;
        }
        let start = holdup_bpf::monotonic_ns();
        while holdup_bpf::monotonic_ns() - start < owed {
            std::hint::spin_loop();
        }
        core.paid.fetch_add(owed, Ordering::AcqRel);
        spun.fetch_add(owed, Ordering::Relaxed);
    }
    core.handler_tid.store(0, Ordering::Release);
}

fn sleep_until(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}
