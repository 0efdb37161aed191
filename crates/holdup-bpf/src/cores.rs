//! Core-level delays (SCOZ): loads `cores.bpf.c`, which keeps the idle
//! half of the accounting in the scheduler's tracepoints, and shares the
//! per-core state with user space through its mapped `.bss`.
//!
//! The global delay only grows. Each core has settled `paid` of it; it
//! owes the difference, which its handler thread spins off. User space
//! credits the core that ran the target (it owes nothing for its own
//! speedup); the kernel side credits an idle core woken by another core.

use crate::cores_skel::{CoresSkel, CoresSkelBuilder, OpenCoresSkel};
use crate::recorder::{Error, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::Link;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// As in `cores.h`.
pub const MAX_CORES: usize = 256;

/// The delay state shared with the kernel, for the whole process's life.
#[derive(Clone, Copy)]
pub struct Cores {
    global: &'static AtomicU64,
    io_is_target: &'static AtomicU32,
    cores: &'static [CoreState],
}

/// `struct holdup_core`, as atomics.
#[repr(C)]
pub struct CoreState {
    pub paid: AtomicU64,
    pub idle_global: AtomicU64,
    pub skipped: AtomicU64,
    pub idle: AtomicU32,
    pub in_irq: AtomicU32,
    pub handler_tid: AtomicU32,
    _pad: [u32; 7],
}

const _: () = assert!(std::mem::size_of::<CoreState>() == 64);

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
        let open: OpenCoresSkel<'static> = CoresSkelBuilder::default()
            .open(storage)
            .map_err(|e| Error::Load(e.to_string()))?;
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

    /// Core `cpu` ran the target for `delay` ns of virtual speedup: every
    /// other core owes it.
    pub fn credit(&self, cpu: usize, delay: u64) {
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
