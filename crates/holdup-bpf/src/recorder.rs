//! Loads and attaches the recorder, and gives access to what it records.

use crate::bindings::{
    intf::{kstack_counts, stack_budget_counts},
    read,
};
use crate::load_cost::LoadCost;
use crate::perf::{self, AddressEvent, MmapEvents};
use crate::records::{
    GoConfig, GoCounts, PyConfig, PyCounts, RawRecord, SyscallKey, SyscallTotals, LOST_CAUSES,
    REC_KINDS,
};
use crate::ringbuf::RingReader;
use crate::skel::recorder::{OpenRecorderSkel, RecorderSkel, RecorderSkelBuilder};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags};
use std::io::Read;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, IntoRawFd};

/// Which tasks are recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Every task on the system except the recorder itself (`-a`).
    All,
    /// These processes (thread-group ids); more can be added with
    /// [`Recorder::track`], for a command that is started after loading.
    Pids(Vec<u32>),
}

#[derive(Clone, Debug)]
pub struct RecorderOptions {
    pub target: Target,
    pub period_ns: u64,
    /// Also record processes forked by recorded processes.
    pub follow_children: bool,
    /// Write a segment record for every off-CPU interval (wait-for graph).
    pub segments: bool,
    /// Record block-device requests.
    pub block_io: bool,
    /// Bytes of user stack copied per sample for CFI unwinding.
    pub stack_copy_bytes: u32,
    /// Size of the ring buffer, a power of two ≥ one page.
    pub ring_bytes: u32,
    /// Record system calls (`--syscalls`).
    pub syscalls: Option<SyscallOptions>,
    /// This process's own threads preempt recorded threads to delay them
    /// (causal `-a`/`-p`): the time they wait for it is the delay, not
    /// runqueue time, and is not sampled.
    pub own_preemption_is_delay: bool,
    /// Only tasks in this cgroup or below it (`--cgroup`), decided in the
    /// programs; with the target's own test.
    pub cgroup: Option<CgroupFilter>,
    /// Blocked-sample stacks per second at most, over all CPUs (0: every
    /// blocked sample has its stacks, bperf's definition). Above it, each
    /// CPU samples by threshold: an interval shorter than the threshold has
    /// its stacks taken with odds in proportion to its points and weighs
    /// the threshold, a longer one is always taken
    /// (`bpf/recorder/clocks.bpf.h`); [`Recorder::stack_budget_counts`] has
    /// the exact points.
    pub stack_budget: u32,
    /// Follow goroutines' parks in Go processes (`--goroutines`): uprobes
    /// on the Go scheduler, attached per process with
    /// [`Recorder::follow_goroutines`].
    pub goroutines: bool,
    /// Take the wakers' stacks at the wakeups of blocked samples
    /// ([`Recorder::waker_stacks`]).
    pub waker_stacks: bool,
}

/// A cgroup (v2) as the programs test membership: its id (the inode number
/// of its directory) and its depth below the root (0: the root itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CgroupFilter {
    pub id: u64,
    pub level: u32,
}

/// Where the Go scheduler's functions are probed in one binary: file
/// offsets of the instruction after each one's stack-check prologue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoProbes {
    pub gopark: u64,
    pub ready: u64,
    pub execute: u64,
    /// `runtime.netpollblock`, for what IO waits wait on (optional).
    pub netpollblock: Option<u64>,
}

/// Which system call invocations become records (all are counted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyscallOptions {
    /// Invocations at least this long are kept, as are those that slept or
    /// took a major page fault.
    pub keep_ns: u64,
    /// One in this many of the other invocations is kept.
    pub sample_every: u32,
    /// Let the programs read the results of their own last call
    /// (`include/holdup_debox.h`) from a map they map (see
    /// [`Recorder::debox_fd`]).
    pub inband: bool,
}

impl Default for SyscallOptions {
    fn default() -> Self {
        Self {
            keep_ns: 1_000_000,
            sample_every: 256,
            inband: false,
        }
    }
}

impl Default for RecorderOptions {
    fn default() -> Self {
        Self {
            target: Target::Pids(Vec::new()),
            period_ns: 1_000_000,
            follow_children: true,
            segments: true,
            block_io: true,
            stack_copy_bytes: 2048,
            ring_bytes: 64 << 20,
            syscalls: None,
            own_preemption_is_delay: false,
            cgroup: None,
            stack_budget: 0,
            goroutines: false,
            waker_stacks: true,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(
        "holdup record needs root: it loads eBPF programs and reads the stacks of other processes"
    )]
    Permission,
    #[error("could not load the eBPF recorder: {0}")]
    Load(String),
    #[error("could not attach the eBPF program {prog}: {msg}")]
    Attach { prog: &'static str, msg: String },
    #[error("could not open perf event: {0}")]
    Perf(std::io::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

fn load_err(e: libbpf_rs::Error) -> Error {
    Error::Load(e.to_string())
}

/// Records not written so far, per cause (`records::LOST_*`) and record
/// kind (`records::REC_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lost {
    pub counts: [[u64; REC_KINDS]; LOST_CAUSES],
}

impl Lost {
    /// Records of `kind` not written for `cause`.
    pub fn get(&self, cause: u32, kind: u32) -> u64 {
        self.counts[cause as usize][kind as usize]
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().flatten().sum()
    }
}

/// The stacks wakers had at their wakeups, by the id a blocked sample
/// carries (`waker_kstack`, `waker_ustack`: the map's id plus one). A
/// handle of its own, so that it can be read while records are drained.
pub struct WakerStacks(libbpf_rs::MapHandle);

impl WakerStacks {
    /// The addresses of stack `id` (as a sample carries it), leaf first;
    /// none for 0 or a stack the map does not hold.
    pub fn get(&self, id: u32) -> Option<Vec<u64>> {
        let key = id.checked_sub(1)?.to_ne_bytes();
        let v = self.0.lookup(&key, MapFlags::ANY).ok()??;
        Some(
            v.chunks_exact(8)
                .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
                .take_while(|&a| a != 0)
                .collect(),
        )
    }
}

/// The loaded and attached recorder. Dropping it detaches everything.
pub struct Recorder {
    // Field order is drop order: links before the skeleton.
    _links: Vec<Link>,
    /// The sys_exit fallback, once threads without rseq were seen.
    sys_exit: Option<Link>,
    /// The goroutine probes of each Go process followed.
    go_links: Vec<(u32, Vec<Link>)>,
    /// The uprobes that count the code objects Python processes free: one
    /// per interpreter file and deallocator offset, for every process that
    /// maps it (see [`Recorder::count_code_frees`]).
    py_links: Vec<((std::path::PathBuf, u64), Link)>,
    ring: RingReader,
    mmaps: MmapEvents,
    skel: RecorderSkel<'static>,
    options: RecorderOptions,
    load_cost: LoadCost,
}

fn is_eperm(e: &libbpf_rs::Error) -> bool {
    e.kind() == libbpf_rs::ErrorKind::PermissionDenied
}

impl Recorder {
    /// Load, configure and attach the recorder. Sampling starts at once for
    /// the tasks in `options.target`. With `HOLDUP_NO_TASK_WORK` set in the
    /// environment it does without BPF task work, as on kernels before 6.18.
    pub fn start(options: RecorderOptions) -> Result<Self> {
        if unsafe { libc::geteuid() } != 0 {
            // Without root the kernel refuses in many different ways; say it once.
            return Err(Error::Permission);
        }
        // The skeleton borrows its object storage for its whole life; one
        // recorder lives as long as the process, so the storage is leaked.
        let cpus = perf::online_cpus()?;
        let storage: &'static mut MaybeUninit<libbpf_rs::OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open: OpenRecorderSkel<'static> = RecorderSkelBuilder::default()
            .open(storage)
            .map_err(load_err)?;
        {
            let ro = open
                .maps
                .rodata_data
                .as_deref_mut()
                .expect("rodata is mmapable");
            ro.period_ns = options.period_ns;
            ro.trace_all = options.target == Target::All;
            ro.follow_children = options.follow_children;
            ro.emit_segments = options.segments;
            ro.emit_bio = options.block_io;
            ro.stack_copy_bytes = options
                .stack_copy_bytes
                .min(crate::records::STACK_COPY_MAX as u32);
            ro.self_tgid = std::process::id();
            // Tests of the path of kernels before 6.18, on any kernel.
            ro.no_task_work = std::env::var_os("HOLDUP_NO_TASK_WORK").is_some();
            ro.own_preemption_is_delay = options.own_preemption_is_delay;
            ro.wakers_stacks = options.waker_stacks;
            if options.stack_budget > 0 {
                ro.budget_per_window = budget_per_window(options.stack_budget, cpus.len());
            }
            if let Some(cg) = options.cgroup {
                ro.cgroup_id = cg.id;
                ro.cgroup_level = cg.level;
            }
            if let Some(sc) = &options.syscalls {
                ro.count_syscalls = true;
                ro.syscall_keep_ns = sc.keep_ns;
                ro.syscall_sample_every = sc.sample_every.max(1);
                ro.debox_inband = sc.inband;
            }
        }
        if !options.syscalls.as_ref().is_some_and(|s| s.inband) {
            open.maps.debox.set_max_entries(1).map_err(load_err)?;
        }
        if options.syscalls.is_none() {
            // Not loading what is not used: the per-CPU totals map alone
            // takes ~50 ms to preallocate, half of a start-up.
            open.maps
                .syscall_totals
                .set_max_entries(1)
                .map_err(load_err)?;
            open.progs.on_syscall_enter.set_autoload(false);
            open.progs.on_syscall_exit.set_autoload(false);
        }
        if !options.goroutines {
            open.maps.go_gs.set_max_entries(1).map_err(load_err)?;
        }
        if !options.waker_stacks {
            // 8 MiB of kernel memory otherwise.
            open.maps
                .waker_stacks
                .set_max_entries(1)
                .map_err(load_err)?;
        }
        for p in [
            &mut open.progs.go_park,
            &mut open.progs.go_ready,
            &mut open.progs.go_execute,
            &mut open.progs.go_netpoll,
        ] {
            p.set_autoattach(false);
            if !options.goroutines {
                p.set_autoload(false);
            }
        }
        open.maps
            .events
            .set_max_entries(options.ring_bytes)
            .map_err(load_err)?;
        open.progs.flush_open.set_autoattach(false);
        open.progs.py_code_freed.set_autoattach(false);
        open.progs.on_sys_exit.set_autoattach(false);
        open.progs.on_syscall_enter.set_autoattach(false);
        open.progs.on_syscall_exit.set_autoattach(false);
        let loading = std::time::Instant::now();
        let skel = open.load().map_err(load_err)?;
        let load_cost = LoadCost::of(skel.object(), loading.elapsed());

        if let Target::Pids(pids) = &options.target {
            for &pid in pids {
                track(&skel, pid)?;
            }
        }

        // Mappings first, so that nothing the target maps from now on is missed.
        let mmaps = MmapEvents::open(&cpus).map_err(Error::Perf)?;

        let mut links = Vec::new();
        macro_rules! attach {
            ($($prog:ident),* $(,)?) => {$(
                links.push(skel.progs.$prog.attach().map_err(|e| Error::Attach {
                    prog: stringify!($prog),
                    msg: if is_eperm(&e) { "permission denied".into() } else { e.to_string() },
                })?);
            )*};
        }
        // Exits before entries: an entry without its exit would leave a
        // CPU marked as in interrupt context.
        attach!(
            on_irq_exit,
            on_softirq_exit,
            on_hrtimer_exit,
            on_local_timer_exit,
            on_ipi_single_exit,
            on_ipi_exit,
            on_irq_entry,
            on_softirq_raise,
            on_softirq_entry,
            on_hrtimer_entry,
            on_local_timer_entry,
            on_ipi_single_entry,
            on_ipi_entry,
            on_contention_begin,
            on_contention_end,
            on_fork,
            on_exec,
            on_rename,
            on_exit,
            on_rq_issue,
            on_rq_complete,
            on_waking,
            on_wakeup_new,
            on_rseq_update,
            on_switch,
        );
        if options.syscalls.is_some() {
            // Exit first: an entry is only counted once its exit is seen.
            attach!(on_syscall_exit, on_syscall_enter);
        }
        for &cpu in &cpus {
            // The link owns the perf event fd from here on and closes it.
            let fd = perf::cpu_clock(cpu, options.period_ns).map_err(Error::Perf)?;
            links.push(
                skel.progs
                    .on_cpu_sample
                    .attach_perf_event(fd.into_raw_fd())
                    .map_err(|e| Error::Attach {
                        prog: "on_cpu_sample",
                        msg: e.to_string(),
                    })?,
            );
        }
        let ring = RingReader::new(skel.maps.events.as_fd(), options.ring_bytes as u64)?;
        Ok(Self {
            _links: links,
            sys_exit: None,
            go_links: Vec::new(),
            py_links: Vec::new(),
            ring,
            mmaps,
            skel,
            options,
            load_cost,
        })
    }

    /// What loading the programs cost (most of the start-up).
    pub fn load_cost(&self) -> &LoadCost {
        &self.load_cost
    }

    pub fn options(&self) -> &RecorderOptions {
        &self.options
    }

    /// Record process `pid` (and, with follow_children, what it forks).
    pub fn track(&self, pid: u32) -> Result<()> {
        track(&self.skel, pid)
    }

    /// Whether process `pid` is recorded: every process but this one with
    /// [`Target::All`], else those tracked and their children as they were
    /// started (with `follow_children`). A process gone is not. `--cgroup`
    /// is the caller's to test.
    pub fn tracks(&self, pid: u32) -> bool {
        if pid == 0 || pid == std::process::id() {
            return false;
        }
        self.options.target == Target::All
            || crate::tracked::is_tracked(&self.skel.maps.tracked_tgids, pid)
    }

    /// Intervals that began before `ns` (CLOCK_MONOTONIC) are cut there.
    pub fn set_start(&mut self, ns: u64) {
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            bss.start_ns = ns;
        }
    }

    /// The ring buffer map, for a consumer in another process.
    pub fn ring_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.skel.maps.events.as_fd()
    }

    /// The in-band map (`--inband`): an array of `struct debox_info`
    /// indexed by `tid % DEBOX_SLOTS`, mappable read-only.
    pub fn debox_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.skel.maps.debox.as_fd()
    }

    /// Bytes waiting in the ring buffer.
    pub fn ring_pending(&self) -> u64 {
        self.ring.pending_bytes()
    }

    /// Hand new address-space events (mmaps, execs) to `f`, per CPU in order.
    pub fn drain_address_events(&mut self, f: impl FnMut(AddressEvent)) {
        self.mmaps.drain(f);
    }

    /// Attach what the threads seen so far need: the sys_exit fallback that
    /// takes the user stacks of blocked samples for threads without rseq,
    /// where no task work could (kernels before 6.18). Never with a stack
    /// budget: the hook runs at every system call on the machine, which
    /// costs a context-switch storm more than all the rest of the recorder;
    /// those samples go without their user stack instead, counted
    /// ([`Recorder::user_stacks_given_up`]). Cheap to call on every drain.
    pub fn attach_fallbacks(&mut self) -> Result<()> {
        if self.options.stack_budget > 0 {
            return Ok(());
        }
        let (late, unserved) = self
            .skel
            .maps
            .bss_data
            .as_deref()
            .map_or((0, 0), |b| (b.late_without_rseq, b.park_works_unavailable));
        // A thread parked before it registered rseq at startup is emitted
        // once, late; more than a few mean threads that never will.
        if late > 2 && unserved > 0 && self.sys_exit.is_none() {
            self.sys_exit =
                Some(
                    self.skel
                        .progs
                        .on_sys_exit
                        .attach()
                        .map_err(|e| Error::Attach {
                            prog: "on_sys_exit",
                            msg: e.to_string(),
                        })?,
                );
        }
        Ok(())
    }

    /// Blocked samples of threads without rseq whose user stack a task work
    /// took on their way back to user space.
    pub fn task_work_stacks(&self) -> u64 {
        self.skel
            .maps
            .bss_data
            .as_deref()
            .map_or(0, |b| b.park_works_run)
    }

    /// Blocked samples of threads without rseq written without their user
    /// stack: no task work served them, and a stack budget attaches no
    /// sys_exit fallback.
    pub fn user_stacks_given_up(&self) -> u64 {
        self.skel
            .maps
            .bss_data
            .as_deref()
            .map_or(0, |b| b.ustacks_given_up)
    }

    /// Whether the sys_exit fallback had to be attached.
    pub fn fallback_attached(&self) -> bool {
        self.sys_exit.is_some()
    }

    /// Hand new ring-buffer records to `f`. Records the parser does not
    /// understand are counted, never dropped silently.
    pub fn drain_records(&mut self, mut f: impl FnMut(&RawRecord<'_>)) -> DrainStats {
        let mut stats = DrainStats::default();
        stats.records = self.ring.drain(|bytes| match crate::records::parse(bytes) {
            Ok(r) => f(&r),
            Err(_) => stats.unparsable += 1,
        });
        stats
    }

    /// Mmap events lost by the kernel.
    pub fn lost_mmaps(&self) -> u64 {
        self.mmaps.lost
    }

    /// A handle on the wakers' stacks, to read them while draining.
    pub fn waker_stacks(&self) -> Option<WakerStacks> {
        libbpf_rs::MapHandle::try_from(&self.skel.maps.waker_stacks)
            .ok()
            .map(WakerStacks)
    }

    /// Records the kernel side did not write so far, and why.
    pub fn lost(&self) -> Lost {
        let mut lost = Lost::default();
        for (cause, kinds) in lost.counts.iter_mut().enumerate() {
            for (kind, slot) in kinds.iter_mut().enumerate() {
                let key = ((cause * REC_KINDS + kind) as u32).to_ne_bytes();
                if let Ok(Some(per_cpu)) = self.skel.maps.lost.lookup_percpu(&key, MapFlags::ANY) {
                    *slot = per_cpu
                        .iter()
                        .map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap()))
                        .sum();
                }
            }
        }
        lost
    }

    /// What the stack budget took and left so far, summed over CPUs (all
    /// zero without a budget).
    pub fn stack_budget_counts(&self) -> StackBudgetCounts {
        let mut c = StackBudgetCounts::default();
        let key = 0u32.to_ne_bytes();
        let map = &self.skel.maps.stack_budget;
        if let Ok(Some(per_cpu)) = map.lookup_percpu(&key, MapFlags::ANY) {
            for v in per_cpu
                .iter()
                .filter_map(|v| read::<stack_budget_counts>(v))
            {
                c.intervals += v.intervals;
                c.stacks += v.stacks;
                c.waker_stacks += v.waker_stacks;
                for i in 0..c.points.len() {
                    c.points[i] += v.points[i];
                    c.scaled[i] += v.scaled[i];
                }
            }
        }
        c
    }

    /// How the kernel stacks of blocked samples were taken so far.
    pub fn kstack_counts(&self) -> KstackCounts {
        let mut c = KstackCounts::default();
        let key = 0u32.to_ne_bytes();
        if let Ok(Some(per_cpu)) = self
            .skel
            .maps
            .kstack_counts
            .lookup_percpu(&key, MapFlags::ANY)
        {
            for v in per_cpu.iter().filter_map(|v| read::<kstack_counts>(v)) {
                c.walked += v.walked;
                c.reused += v.reused;
                c.checked += v.checked;
                c.differed += v.differed;
                c.shared += v.shared;
            }
        }
        c
    }

    /// The exact per-process per-call totals of system calls so far,
    /// summed over CPUs.
    pub fn syscall_totals(&self) -> Vec<(SyscallKey, SyscallTotals)> {
        let map = &self.skel.maps.syscall_totals;
        let mut out = Vec::new();
        for key in map.keys() {
            let Ok(Some(per_cpu)) = map.lookup_percpu(&key, MapFlags::ANY) else {
                continue;
            };
            let Ok(k) = crate::records::syscall_key(&key) else {
                continue;
            };
            let mut sum: Option<SyscallTotals> = None;
            for v in per_cpu {
                let Ok(t) = crate::records::syscall_totals(&v) else {
                    continue;
                };
                match &mut sum {
                    None => sum = Some(t),
                    Some(s) => s.add(&t),
                }
            }
            if let Some(t) = sum.filter(|t| t.count > 0) {
                out.push((k, t));
            }
        }
        out.sort_by_key(|(k, _)| (k.pid, k.nr));
        out
    }

    /// Whether process `pid`'s CPython frames are walked already: a forked
    /// child of a walked process is, from its fork (py_inherit).
    pub fn walks_python(&self, pid: u32) -> bool {
        matches!(
            self.skel
                .maps
                .py_procs
                .lookup(&pid.to_ne_bytes(), MapFlags::ANY),
            Ok(Some(_))
        )
    }

    /// Walk the CPython frames of process `pid`'s samples, with the
    /// layout of its interpreter.
    pub fn set_python(&self, pid: u32, config: &PyConfig) -> Result<()> {
        // SAFETY: PyConfig is plain data, viewed as its bytes.
        let value = unsafe {
            std::slice::from_raw_parts(
                (config as *const PyConfig).cast::<u8>(),
                size_of::<PyConfig>(),
            )
        };
        self.skel
            .maps
            .py_procs
            .update(&pid.to_ne_bytes(), value, MapFlags::ANY)
            .map_err(|e| Error::Load(format!("cannot set the interpreter of pid {pid}: {e}")))
    }

    /// Count the code objects process `pid` frees: a uprobe on the code
    /// type's deallocator, at file offset `at` of `binary`. Then the
    /// recorder may trust what it learnt of a code object from sample to
    /// sample (see py_code_known); the configuration given to
    /// [`Recorder::set_python`] after it says so (`frees_counted`).
    ///
    /// The uprobe is the file's, for every process that maps it, and is
    /// attached once: it counts only in the processes the recorder walks
    /// (py_procs), and a code object is freed rarely. One per process
    /// would cost each process that exits a detach, and the kernel runs
    /// those one at a time, each waiting for a grace period: a program
    /// that forks hundreds of interpreters left the recording seconds
    /// after its end.
    pub fn count_code_frees(&mut self, binary: &std::path::Path, at: u64) -> Result<()> {
        if self
            .py_links
            .iter()
            .any(|((b, a), _)| b == binary && *a == at)
        {
            return Ok(());
        }
        let link = self
            .skel
            .progs
            .py_code_freed
            .attach_uprobe(false, -1, binary, at as usize)
            .map_err(|e| Error::Attach {
                prog: "py_code_freed",
                msg: e.to_string(),
            })?;
        self.py_links.push(((binary.to_path_buf(), at), link));
        Ok(())
    }

    /// Process `pid` no longer runs the interpreter it was set (it exec'd
    /// or exited).
    pub fn forget_python(&mut self, pid: u32) {
        let _ = self.skel.maps.py_procs.delete(&pid.to_ne_bytes());
    }

    /// How the interpreter frame walks went so far, summed over CPUs.
    pub fn python_counts(&self) -> PyCounts {
        sum_per_cpu(&self.skel.maps.py_counts_map, PyCounts::add)
    }

    /// Follow the goroutines of process `pid`, whose executable `binary`
    /// has its scheduler at `probes` and its runtime laid out as `config`
    /// says. The uprobes are the process's alone (a copy of the binary
    /// run by another process does not trap).
    pub fn follow_goroutines(
        &mut self,
        pid: u32,
        binary: &std::path::Path,
        probes: &GoProbes,
        config: &GoConfig,
    ) -> Result<()> {
        // SAFETY: GoConfig is plain data, viewed as its bytes.
        let value = unsafe {
            std::slice::from_raw_parts(
                (config as *const GoConfig).cast::<u8>(),
                size_of::<GoConfig>(),
            )
        };
        self.skel
            .maps
            .go_procs
            .update(&pid.to_ne_bytes(), value, MapFlags::ANY)
            .map_err(|e| Error::Load(format!("cannot follow the goroutines of pid {pid}: {e}")))?;
        let progs = &self.skel.progs;
        let mut links = Vec::new();
        let mut sites = vec![
            (&progs.go_park, "go_park", probes.gopark),
            (&progs.go_ready, "go_ready", probes.ready),
            (&progs.go_execute, "go_execute", probes.execute),
        ];
        if let Some(at) = probes.netpollblock {
            sites.push((&progs.go_netpoll, "go_netpoll", at));
        }
        for (prog, name, at) in sites {
            let link = prog
                .attach_uprobe(false, pid as i32, binary, at as usize)
                .map_err(|e| Error::Attach {
                    prog: name,
                    msg: e.to_string(),
                })?;
            links.push(link);
        }
        self.go_links.push((pid, links));
        Ok(())
    }

    /// Process `pid` no longer runs the Go binary it was followed in.
    pub fn forget_goroutines(&mut self, pid: u32) {
        let _ = self.skel.maps.go_procs.delete(&pid.to_ne_bytes());
        self.go_links.retain(|(p, _)| *p != pid);
    }

    /// How the goroutine probes went so far, summed over CPUs.
    pub fn go_counts(&self) -> GoCounts {
        sum_per_cpu(&self.skel.maps.go_counts_map, GoCounts::add)
    }

    /// Write out the intervals still open (threads off-CPU right now) and
    /// samples still waiting for their user stack, as if they ended now.
    pub fn flush_open(&mut self) -> Result<()> {
        let link = self
            .skel
            .progs
            .flush_open
            .attach_iter_with_opts(libbpf_rs::IterOpts::None)
            .map_err(|e| Error::Attach {
                prog: "flush_open",
                msg: e.to_string(),
            })?;
        let mut iter = libbpf_rs::Iter::new(&link).map_err(load_err)?;
        let mut sink = Vec::new();
        iter.read_to_end(&mut sink)?;
        Ok(())
    }
}

/// What a stack budget took: see [`RecorderOptions::stack_budget`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackBudgetCounts {
    /// Off-CPU intervals that passed a sampling point.
    pub intervals: u64,
    /// Those whose stacks were taken.
    pub stacks: u64,
    /// Wakers' stacks taken at the wakeups of such intervals: drawn at the
    /// wakeup, only for those whose stacks will be taken.
    pub waker_stacks: u64,
    /// Points of every such interval, by class (`records::CLASS_*`): exact.
    pub points: [u64; 5],
    /// Points of the samples written, scaled by the inverse of the odds each was taken at.
    pub scaled: [u64; 5],
}

impl StackBudgetCounts {
    /// Intervals per stack taken (1: every one).
    pub fn ratio(&self) -> f64 {
        self.intervals as f64 / self.stacks.max(1) as f64
    }
}

/// The stacks one CPU may take per 100 ms window for `per_second` over all
/// `cpus` (at least one).
fn budget_per_window(per_second: u32, cpus: usize) -> u32 {
    (per_second as u64 / 10 / cpus.max(1) as u64).max(1) as u32
}

/// How the kernel stacks of blocked samples were taken: walked, reused from
/// one of the thread's last two walks when it blocked at the same place, or
/// taken from another thread's walk on the same CPU (`shared`). A thread's
/// 8th reuse is walked anyway (`checked`), then the 16th after, and so on
/// up to every 128th while they agree, to see whether the reused stack
/// would have been wrong (`differed`); a thread found wrong is walked from
/// then on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KstackCounts {
    pub walked: u64,
    pub reused: u64,
    pub checked: u64,
    pub differed: u64,
    pub shared: u64,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct DrainStats {
    pub records: usize,
    pub unparsable: usize,
}

/// The one value of a per-CPU array of counts, summed over CPUs with `add`.
fn sum_per_cpu<T: crate::bindings::Plain + Default>(map: &impl MapCore, add: fn(&mut T, &T)) -> T {
    let mut c = T::default();
    let key = 0u32.to_ne_bytes();
    let Ok(Some(per_cpu)) = map.lookup_percpu(&key, MapFlags::ANY) else {
        return c;
    };
    for v in per_cpu.iter().filter_map(|v| read::<T>(v)) {
        add(&mut c, &v);
    }
    c
}

fn track(skel: &RecorderSkel<'_>, pid: u32) -> Result<()> {
    crate::tracked::track(&skel.maps.tracked_tgids, pid)
        .map_err(|e| Error::Load(format!("cannot track pid {pid}: {e}")))
}
