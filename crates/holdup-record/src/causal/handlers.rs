//! The per-core handler threads of core-level virtual speedups (SCOZ
//! §3.3, §3.5), without SCOZ's delay system call.
//!
//! SCOZ's handler asks its kernel to spin with preemption off. A stock
//! kernel gets close with a thread pinned to its core at the highest
//! real-time priority: nothing but the kernel's own stop tasks and
//! interrupts runs there while it spins, so the core is held as SCOZ's
//! ndelay holds it. A handler sleeps until the drain that credits samples
//! finds its core owing while it runs something, then spins the debt off.
//! An idle core pays nothing: the kernel side settles its debt when it
//! wakes (see `cores.bpf.c`), and the next drain wakes the handler if
//! some is left.
//!
//! Woken only when owed: a real-time thread that woke every tick on every
//! core, to find nothing owed in most ticks, cost a program that keeps a
//! core busy several percent (two context switches, and the other
//! process's caches, per tick).

use holdup_bpf::cores::Cores;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The longest spin: a debt of seconds (an idle core woken by an
/// interrupt after a long experiment) must not hold the core for seconds
/// at once.
const MAX_SPIN_NS: u64 = 20_000_000;
/// How long the core runs its threads between two such spins.
const BETWEEN_SPINS_NS: u64 = 1_000_000;

pub struct Handlers {
    stop: Arc<AtomicBool>,
    cores: Cores,
    /// The handlers' cores, in the order of `threads`.
    cpus: Vec<usize>,
    threads: Vec<JoinHandle<()>>,
    /// Delay spun off by all handlers, in ns.
    pub spun: Arc<AtomicU64>,
}

impl Handlers {
    /// One handler per CPU in `cpus`; fails if a real-time thread cannot
    /// be made (no CAP_SYS_NICE, or real-time scheduling disabled).
    pub fn start(cores: Cores, cpus: &[usize]) -> anyhow::Result<Handlers> {
        let stop = Arc::new(AtomicBool::new(false));
        let spun = Arc::new(AtomicU64::new(0));
        let mut threads = Vec::new();
        let (tx, rx) = std::sync::mpsc::channel();
        for &cpu in cpus {
            let (stop, spun, tx) = (stop.clone(), spun.clone(), tx.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(format!("holdup-core{cpu}"))
                    .spawn(move || {
                        let ready = become_handler(cpu);
                        let ok = ready.is_ok();
                        let _ = tx.send(ready);
                        if ok {
                            handle(cpu, cores, &stop, &spun);
                        }
                    })?,
            );
        }
        let handlers = Handlers {
            stop,
            cores,
            cpus: cpus.to_vec(),
            threads,
            spun,
        };
        for _ in cpus {
            rx.recv()??;
        }
        Ok(handlers)
    }

    /// Wake the handler of every core that owes and runs something.
    pub fn wake_owing(&self) {
        for (&cpu, t) in self.cpus.iter().zip(&self.threads) {
            let running = self
                .cores
                .core(cpu)
                .is_some_and(|c| c.idle.load(Ordering::Acquire) == 0);
            if running && self.cores.owed(cpu) > 0 {
                t.thread().unpark();
            }
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

/// Pin this thread to `cpu` at the highest real-time priority.
fn become_handler(cpu: usize) -> anyhow::Result<()> {
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
    Ok(())
}

fn handle(cpu: usize, cores: Cores, stop: &AtomicBool, spun: &AtomicU64) {
    let Some(core) = cores.core(cpu) else { return };
    while !stop.load(Ordering::Acquire) {
        // Woken on an idle core (it leaves it idle), nothing is paid.
        let owed = cores.owed(cpu).min(MAX_SPIN_NS);
        if owed == 0 || core.idle.load(Ordering::Acquire) != 0 {
            std::thread::park();
            continue;
        }
        let start = holdup_bpf::monotonic_ns();
        while holdup_bpf::monotonic_ns() - start < owed {
            std::hint::spin_loop();
        }
        core.paid.fetch_add(owed, Ordering::AcqRel);
        spun.fetch_add(owed, Ordering::Relaxed);
        if cores.owed(cpu) > 0 {
            std::thread::sleep(std::time::Duration::from_nanos(BETWEEN_SPINS_NS));
        }
    }
}
