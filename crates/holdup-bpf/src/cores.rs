//! Core-level delays (SCOZ): loads `cores.bpf.c`, which keeps the idle
//! half of the accounting in the scheduler's tracepoints, and shares the
//! per-core state with user space through its mapped `.bss`.
//!
//! The global delay only grows. Each core has settled `paid` of it (its
//! local delay); it owes the difference, which its handler thread spins
//! off. User space credits the core that ran the target (it owes nothing
//! for its own speedup); the kernel side credits an idle core woken by
//! another core.

use crate::recorder::{Error, Result};
use crate::skel::cores::{CoresSkel, CoresSkelBuilder, OpenCoresSkel};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::Link;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// As in `cores.h`.
pub const MAX_CORES: usize = crate::bindings::cores::MAX_CORES as usize;

/// The delay state shared with the kernel, for the whole process's life.
#[derive(Clone, Copy)]
pub struct Cores {
    global: &'static AtomicU64,
    io_is_target: &'static AtomicU32,
    cores: &'static [CoreState],
}

/// `struct holdup_core`, as atomics (the kernel side updates it too): the
/// generated struct's layout, field by field.
#[repr(C)]
pub struct CoreState {
    pub paid: AtomicU64,
    pub idle_global: AtomicU64,
    pub skipped: AtomicU64,
    pub idle: AtomicU32,
    pub in_irq: AtomicU32,
    _pad: [u32; 8],
}

crate::bindings::assert_same_layout!(
    CoreState,
    crate::bindings::cores::holdup_core,
    paid = paid,
    idle_global = idle_global,
    skipped = skipped,
    idle = idle,
    in_irq = in_irq,
);

/// The loaded programs; detached when dropped.
pub struct CoreDelays {
    pub cores: Cores,
    _links: Vec<Link>,
}

impl CoreDelays {
    pub fn start() -> Result<CoreDelays> {
        if unsafe { libc::geteuid() } != 0 {
            return Err(Error::Permission);
        }
        // Loaded once per process and never unloaded before exit: the
        // skeleton and its storage are leaked, so the mapped state is
        // 'static for the handler threads.
        let storage: &'static mut MaybeUninit<libbpf_rs::OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open: OpenCoresSkel<'static> = CoresSkelBuilder::default()
            .open(storage)
            .map_err(|e| Error::Load(e.to_string()))?;
        open.maps
            .rodata_data
            .as_deref_mut()
            .expect("rodata is mmapable")
            .self_tgid = std::process::id();
        let skel: &'static mut CoresSkel<'static> = Box::leak(Box::new(
            open.load().map_err(|e| Error::Load(e.to_string()))?,
        ));
        let p = &skel.progs;
        let mut links = Vec::new();
        for (name, prog) in [
            ("core_waking", &p.core_waking),
            ("core_switch", &p.core_switch),
            ("core_irq_entry", &p.core_irq_entry),
            ("core_irq_exit", &p.core_irq_exit),
            ("core_softirq_entry", &p.core_softirq_entry),
            ("core_softirq_exit", &p.core_softirq_exit),
            ("core_timer_entry", &p.core_timer_entry),
            ("core_timer_exit", &p.core_timer_exit),
        ] {
            links.push(prog.attach().map_err(|e| Error::Attach {
                prog: name,
                msg: e.to_string(),
            })?);
        }
        let bss = skel.maps.bss_data.as_deref_mut().expect("bss is mmapable");
        // SAFETY: the .bss stays mapped (the skeleton is leaked); the
        // fields are aligned u64/u32 that the kernel side also updates
        // atomically, and CoreState mirrors struct holdup_core.
        let cores = unsafe {
            Cores {
                global: AtomicU64::from_ptr(&mut bss.global_delay),
                io_is_target: AtomicU32::from_ptr(&mut bss.io_is_target),
                cores: std::slice::from_raw_parts(
                    bss.cores.as_ptr() as *const CoreState,
                    MAX_CORES,
                ),
            }
        };
        Ok(CoreDelays {
            cores,
            _links: links,
        })
    }
}

impl Cores {
    pub fn global(&self) -> u64 {
        self.global.load(Ordering::Acquire)
    }

    pub fn core(&self, cpu: usize) -> Option<&'static CoreState> {
        self.cores.get(cpu)
    }

    /// Core `cpu` ran the target for `delay` ns of virtual speedup: its
    /// local delay moves on by `delay`, and the global delay to it if it
    /// was behind (COZ's rule). Two cores that run the target at once are
    /// both sped up: they owe each other nothing, and the experiment's
    /// delay is one core's, not the sum (which would stop each core for
    /// the other's credits, and count the speedup twice).
    pub fn credit(&self, cpu: usize, delay: u64) {
        match self.core(cpu) {
            Some(c) => {
                let local = c.paid.fetch_add(delay, Ordering::AcqRel) + delay;
                self.global.fetch_max(local, Ordering::AcqRel);
            }
            None => self.credit_wait(cpu, delay),
        }
    }

    /// A thread waited in the target (I/O, the runqueue, a line's blocked
    /// time) for `delay` ns of virtual speedup. Its core `cpu` is idle or
    /// runs something else, and an idle core's local delay stands still
    /// (post_idle settles it), so it is no measure of how far the target
    /// got: every other core owes the whole delay.
    pub fn credit_wait(&self, cpu: usize, delay: u64) {
        if let Some(c) = self.core(cpu) {
            c.paid.fetch_add(delay, Ordering::AcqRel);
        }
        self.global.fetch_add(delay, Ordering::AcqRel);
    }

    /// Whether the experiment speeds up I/O: a core woken from idle by the
    /// device skips the delays inserted meanwhile.
    pub fn set_io_target(&self, on: bool) {
        self.io_is_target.store(u32::from(on), Ordering::Release);
    }

    /// What core `cpu` owes now (0 if it is ahead).
    pub fn owed(&self, cpu: usize) -> u64 {
        let g = self.global();
        self.core(cpu)
            .map_or(0, |c| g.saturating_sub(c.paid.load(Ordering::Acquire)))
    }

    /// A new experiment: running cores start even (the last one's delays
    /// must not leak into it); idle cores keep their gap, which post_idle
    /// settles, as blocked threads keep theirs in COZ.
    pub fn settle_running(&self, cpus: &[usize]) {
        for &cpu in cpus {
            let Some(c) = self.core(cpu) else { continue };
            if c.idle.load(Ordering::Acquire) == 0 {
                let owed = self.owed(cpu);
                c.paid.fetch_add(owed, Ordering::AcqRel);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Delay state in plain memory, as the mapped `.bss` would hold it.
    fn cores(n: usize) -> Cores {
        let global = Box::leak(Box::new(AtomicU64::new(0)));
        let io_is_target = Box::leak(Box::new(AtomicU32::new(0)));
        let cores: Vec<CoreState> = (0..n)
            .map(|_| CoreState {
                paid: AtomicU64::new(0),
                idle_global: AtomicU64::new(0),
                skipped: AtomicU64::new(0),
                idle: AtomicU32::new(0),
                in_irq: AtomicU32::new(0),
                _pad: [0; 8],
            })
            .collect();
        Cores {
            global,
            io_is_target,
            cores: cores.leak(),
        }
    }

    #[test]
    fn cores_that_run_the_target_together_owe_each_other_nothing() {
        let c = cores(3);
        for _ in 0..10 {
            c.credit(0, 500);
            c.credit(1, 500);
        }
        assert_eq!(c.global(), 5000, "one core's speedup, not the sum");
        assert_eq!((c.owed(0), c.owed(1), c.owed(2)), (0, 0, 5000));
    }

    #[test]
    fn a_core_behind_that_runs_the_target_owes_less() {
        let c = cores(2);
        c.credit(0, 3000);
        assert_eq!(c.owed(1), 3000);
        c.credit(1, 1000);
        assert_eq!((c.global(), c.owed(1)), (3000, 2000));
        c.credit(1, 4000);
        assert_eq!((c.global(), c.owed(0), c.owed(1)), (5000, 2000, 0));
    }

    /// A wait's core may be idle, its local delay left behind: the wait
    /// adds its delay whatever the core's.
    #[test]
    fn waits_in_the_target_add_to_the_global_delay() {
        let c = cores(2);
        c.credit(0, 3000);
        c.credit_wait(1, 1000);
        assert_eq!(c.global(), 4000);
        assert_eq!((c.owed(0), c.owed(1)), (1000, 3000));
    }
}
