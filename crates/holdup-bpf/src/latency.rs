//! Loads `latency.bpf.c` (log2 latency histograms aggregated in the kernel),
//! attaches it to the requested operations and reads the histograms.

use crate::bindings::latency as c;
use crate::bindings::{read, u16_of, u8_of};
use crate::skel::latency::{LatencySkel, LatencySkelBuilder, OpenLatencySkel};
use crate::Target;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, UprobeOpts};
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::path::PathBuf;

/// Buckets per histogram: bucket `s` holds latencies in `[2^s, 2^(s+1))` ns.
pub const SLOTS: usize = c::LAT_SLOTS as usize;
/// Kernel functions that can be traced at once (fentry/fexit pairs).
pub const MAX_KFUNCS: usize = c::LAT_KFUNC_SLOTS as usize;

/// Causes, as in `latency.h`: off-CPU ones (I/O wait, futex wait,
/// preempted, other blocking), then time taken by interrupts: the local
/// timer, device interrupts (a slot each for the first few, then one for
/// the rest) and each softirq vector.
pub const CAUSES: usize = c::LAT_CAUSES as usize;
pub const CAUSE_IRQ_TIMER: usize = c::LAT_CAUSE_IRQ_TIMER as usize;
pub const CAUSE_IRQ_DEV: usize = c::LAT_CAUSE_IRQ_DEV as usize;
pub const IRQ_DEV_SLOTS: usize = c::LAT_IRQ_DEV_SLOTS as usize;
pub const CAUSE_IRQ_OTHER: usize = c::LAT_CAUSE_IRQ_OTHER as usize;
pub const CAUSE_SOFTIRQ: usize = c::LAT_CAUSE_SOFTIRQ as usize;

/// Operation kinds, as in `latency.h`.
pub const KIND_SYSCALL: u16 = u16_of(c::LAT_SYSCALL);
pub const KIND_KFUNC: u16 = u16_of(c::LAT_KFUNC);
pub const KIND_UFUNC: u16 = u16_of(c::LAT_UFUNC);
pub const KIND_BLOCK: u16 = u16_of(c::LAT_BLOCK);
pub const KIND_LOCK: u16 = u16_of(c::LAT_LOCK);

/// Why an event was not counted (`enum latency_lost`), and what it is
/// called in a latency file.
pub const LOST: [(u32, &str); c::LAT_LOST_KINDS as usize] = [
    (c::LAT_LOST_HIST_FULL, "calls (histogram table full)"),
    (c::LAT_LOST_START_FULL, "calls (no room for their start)"),
    (
        c::LAT_LOST_NO_STACK,
        "system-call waits (no kernel stack for their site)",
    ),
    (
        c::LAT_LOST_SITES_FULL,
        "system-call waits (more wait sites in one call than kept)",
    ),
];

/// User functions that can be timed at once (operations and callees).
pub const MAX_UFUNCS: usize = c::LAT_UFUNCS as usize;

/// What a user function is timed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UfuncRole {
    /// An operation with its own histogram.
    Operation,
    /// An operation whose calls also collect the time of its callees.
    Root,
    /// Timed only inside a root's calls, for the root's peaks; no
    /// histogram of its own.
    Callee,
}

/// A user function to time: `symbol` in the ELF file `binary`.
#[derive(Clone, Debug)]
pub struct UserFunc {
    pub binary: PathBuf,
    pub symbol: String,
    pub role: UfuncRole,
    /// Where its code starts in the file, when the caller found it (in a
    /// separate debug file, for a stripped binary); otherwise the probe
    /// looks `symbol` up in the binary's own symbol tables.
    pub offset: Option<u64>,
}

/// Call paths below the roots that can be timed at once (DARC's fnodes).
pub const MAX_FNODES: usize = c::LAT_FNODES as usize;
/// `fnode_parent` of a root's node.
const LAT_NO_PARENT: u8 = u8_of(c::LAT_NO_PARENT);

/// A node of DARC's ftree: a call path below a root. A root's node has no
/// parent; the child of `parent` that calls user function `func` (an
/// index into `ufuncs`) is node `id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FNode {
    pub id: u32,
    pub parent: Option<u32>,
    pub func: u32,
}

/// The time call path `fnode` took inside the calls of root `root` (a
/// user-function index) whose latency fell in bucket `slot`, summed over
/// CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalleeRow {
    pub tgid: u32,
    pub root: u32,
    pub fnode: u32,
    pub slot: u32,
    pub calls: u64,
    pub ns: u64,
    /// Of `ns`, the time the callee spent off-CPU, by cause.
    pub cause_ns: [u64; CAUSES],
    /// Root calls in which this path was the largest contributor below
    /// its caller (DARC's maxcount), and those in which its own time was
    /// larger than each of its timed callees'.
    pub largest: u64,
    pub own_largest: u64,
}

#[derive(Clone, Debug)]
pub struct LatencyOptions {
    pub target: Target,
    pub follow_children: bool,
    /// CLOCK_MONOTONIC ns that interval 0 starts at.
    pub start_ns: u64,
    /// Width of one time-lapse interval.
    pub interval_ns: u64,
    pub syscalls: bool,
    pub block: bool,
    /// Time each futex wait of the traced threads (the `lock` operation).
    pub lock: bool,
    /// Kernel functions; operation id = index.
    pub kfuncs: Vec<String>,
    /// User functions; operation id = index.
    pub ufuncs: Vec<UserFunc>,
    /// The call paths below the roots whose time is collected.
    pub ftree: Vec<FNode>,
    /// Note the first user-function call at least this long
    /// ([`LatencyProbe::slow_call`]); 0: none.
    pub slow_ns: u64,
}

/// A user-function call that took at least [`LatencyOptions::slow_ns`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowCall {
    pub tgid: u32,
    pub tid: u32,
    /// The operation: an index into [`LatencyOptions::ufuncs`].
    pub op: u32,
    /// CLOCK_MONOTONIC at its return, and its length.
    pub end_ns: u64,
    pub ns: u64,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(
        "holdup latency needs root: it loads eBPF programs and reads the stacks of other processes"
    )]
    Permission,
    #[error("at most {MAX_KFUNCS} kernel functions can be timed at once")]
    TooManyKfuncs,
    #[error("at most {MAX_UFUNCS} user functions and {MAX_FNODES} call paths below them can be timed at once (try a smaller --callees)")]
    TooManyUfuncs,
    #[error("unknown kernel function '{0}' (not in /proc/kallsyms)")]
    UnknownKfunc(String),
    #[error("cannot time kernel function '{name}' with fentry/fexit: {msg}")]
    Kfunc { name: String, msg: String },
    #[error("function '{symbol}' not found in {binary} (no such symbol: misspelled, or the binary is stripped)")]
    NoSymbol { symbol: String, binary: String },
    #[error("cannot attach a uprobe to '{symbol}' in {binary}: {msg}")]
    Uprobe {
        symbol: String,
        binary: String,
        msg: String,
    },
    #[error("could not load the eBPF latency programs: {0}")]
    Load(String),
    #[error("could not attach {what}: {msg}")]
    Attach { what: String, msg: String },
    #[error("reading the latency histograms: {0}")]
    Read(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// One histogram as the kernel aggregated it, summed over CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistRow {
    pub tgid: u32,
    pub kind: u16,
    pub id: u32,
    pub interval: u32,
    pub count: [u64; SLOTS],
    pub ns: [u64; SLOTS],
    /// Of `ns`, the time the calls spent off-CPU, by cause.
    pub cause_ns: [[u64; SLOTS]; CAUSES],
}

impl HistRow {
    /// Add `other`'s counts (a row with the same key).
    pub fn merge(&mut self, other: &HistRow) {
        for s in 0..SLOTS {
            self.count[s] += other.count[s];
            self.ns[s] += other.ns[s];
            for c in 0..CAUSES {
                self.cause_ns[c][s] += other.cause_ns[c][s];
            }
        }
    }
}

/// The off-CPU time of system call `nr` in bucket `slot`, spent blocked
/// with `cause` at kernel stack `stack` (addresses, leaf first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteRow {
    pub tgid: u32,
    pub nr: u32,
    pub slot: u32,
    pub cause: u32,
    pub stack: Vec<u64>,
    pub count: u64,
    pub ns: u64,
}

/// Role bits of a uprobe cookie, as in `latency.h`.
const UFUNC_ROOT: u64 = c::LAT_UFUNC_ROOT as u64;
const UFUNC_CALLEE: u64 = c::LAT_UFUNC_CALLEE as u64;

/// Every key and value of a hash map.
fn entries(map: &impl MapCore) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    for k in map.keys() {
        if let Some(v) = map
            .lookup(&k, MapFlags::ANY)
            .map_err(|e| Error::Read(e.to_string()))?
        {
            out.push((k, v));
        }
    }
    Ok(out)
}

/// The `fnode_children` key of the child of node `parent` that calls user
/// function `func`.
fn fnode_key(parent: u32, func: u32) -> [u8; 8] {
    // SAFETY: two u32s, 8 bytes without padding (transmute checks the size).
    unsafe { std::mem::transmute(c::lat_fnode_key { parent, func }) }
}

/// Whether `name` is a function in the running kernel's symbol table.
fn kernel_has_function(name: &str) -> bool {
    let Ok(text) = std::fs::read_to_string("/proc/kallsyms") else {
        return true; // cannot tell: let the loader say
    };
    text.lines().any(|l| {
        let mut f = l.split_whitespace();
        let (_, ty, sym) = (f.next(), f.next(), f.next());
        matches!(ty, Some("t" | "T")) && sym == Some(name)
    })
}

fn kfunc_msg(e: &libbpf_rs::Error) -> String {
    if e.kind() == libbpf_rs::ErrorKind::PermissionDenied {
        // Seen where function tracing (ftrace) is locked down, e.g. in some
        // sandboxed virtual machines, although tracepoints work.
        "the kernel refused the fentry program (operation not permitted): function tracing is disabled on this system".into()
    } else {
        e.to_string()
    }
}

/// The loaded and attached programs. Dropping it detaches them.
pub struct LatencyProbe {
    // Field order is drop order: links before the skeleton.
    _links: Vec<Link>,
    skel: LatencySkel<'static>,
}

impl LatencyProbe {
    pub fn start(options: &LatencyOptions) -> Result<Self> {
        if unsafe { libc::geteuid() } != 0 {
            return Err(Error::Permission);
        }
        if options.kfuncs.len() > MAX_KFUNCS {
            return Err(Error::TooManyKfuncs);
        }
        if options.ufuncs.len() > MAX_UFUNCS || options.ftree.len() > MAX_FNODES {
            return Err(Error::TooManyUfuncs);
        }
        for name in &options.kfuncs {
            if !kernel_has_function(name) {
                return Err(Error::UnknownKfunc(name.clone()));
            }
        }
        // Our errors say what failed (a missing symbol, a function without
        // BTF); libbpf's own log lines would only repeat it, less clearly.
        // HOLDUP_BPF_LOG=1 shows them, with the verifier's log.
        if std::env::var_os("HOLDUP_BPF_LOG").is_some() {
            libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, |_, m| eprint!("{m}"))));
        } else {
            libbpf_rs::set_print(None);
        }
        // The skeleton borrows its object storage for its whole life.
        let storage: &'static mut MaybeUninit<libbpf_rs::OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open: OpenLatencySkel<'static> = LatencySkelBuilder::default()
            .open(storage)
            .map_err(|e| Error::Load(e.to_string()))?;
        {
            let ro = open
                .maps
                .rodata_data
                .as_deref_mut()
                .expect("rodata is mmapable");
            ro.trace_all = options.target == Target::All;
            ro.follow_children = options.follow_children;
            ro.self_tgid = std::process::id();
            ro.start_ns = options.start_ns;
            ro.interval_ns = options.interval_ns.max(1);
            ro.lock_waits = options.lock;
            ro.slow_ns = options.slow_ns;
            ro.fnode_parent = [LAT_NO_PARENT; MAX_FNODES];
            for n in &options.ftree {
                if let (Some(slot), Some(p)) = (ro.fnode_parent.get_mut(n.id as usize), n.parent) {
                    *slot = p as u8;
                }
            }
        }
        let p = &mut open.progs;
        let mut kfunc_progs = [
            (&mut p.lat_kfunc_enter0, &mut p.lat_kfunc_exit0),
            (&mut p.lat_kfunc_enter1, &mut p.lat_kfunc_exit1),
            (&mut p.lat_kfunc_enter2, &mut p.lat_kfunc_exit2),
            (&mut p.lat_kfunc_enter3, &mut p.lat_kfunc_exit3),
            (&mut p.lat_kfunc_enter4, &mut p.lat_kfunc_exit4),
            (&mut p.lat_kfunc_enter5, &mut p.lat_kfunc_exit5),
            (&mut p.lat_kfunc_enter6, &mut p.lat_kfunc_exit6),
            (&mut p.lat_kfunc_enter7, &mut p.lat_kfunc_exit7),
        ];
        for (slot, (enter, exit)) in kfunc_progs.iter_mut().enumerate() {
            match options.kfuncs.get(slot) {
                Some(name) => {
                    for prog in [&mut **enter, &mut **exit] {
                        prog.set_attach_target(0, Some(name.clone())).map_err(|e| {
                            Error::Kfunc {
                                name: name.clone(),
                                msg: e.to_string(),
                            }
                        })?;
                    }
                }
                None => {
                    enter.set_autoload(false);
                    exit.set_autoload(false);
                }
            }
        }
        p.lat_sys_enter.set_autoload(options.syscalls);
        p.lat_sys_exit.set_autoload(options.syscalls);
        p.lat_rq_issue.set_autoload(options.block);
        p.lat_rq_complete.set_autoload(options.block);
        p.lat_ufunc_enter.set_autoload(!options.ufuncs.is_empty());
        p.lat_ufunc_exit.set_autoload(!options.ufuncs.is_empty());
        p.lat_ufunc_enter.set_autoattach(false);
        p.lat_ufunc_exit.set_autoattach(false);
        let skel = open.load().map_err(|e| match options.kfuncs.first() {
            // A kernel function without BTF (or not traceable) fails here.
            Some(name) if options.kfuncs.len() == 1 => Error::Kfunc {
                name: name.clone(),
                msg: kfunc_msg(&e),
            },
            Some(_) if e.kind() == libbpf_rs::ErrorKind::PermissionDenied => {
                Error::Load(kfunc_msg(&e))
            }
            _ => Error::Load(e.to_string()),
        })?;
        for n in &options.ftree {
            let (map, key) = match n.parent {
                None => (&skel.maps.root_fnodes, n.func.to_ne_bytes().to_vec()),
                Some(parent) => (
                    &skel.maps.fnode_children,
                    fnode_key(parent, n.func).to_vec(),
                ),
            };
            map.update(&key, &n.id.to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| Error::Load(format!("the call-path tree: {e}")))?;
        }
        let mut links = Vec::new();
        macro_rules! attach {
            ($($prog:ident: $what:expr),*) => {$(
                if skel.progs.$prog.autoload() {
                    links.push(skel.progs.$prog.attach().map_err(|e| Error::Attach {
                        what: $what,
                        msg: e.to_string(),
                    })?);
                }
            )*};
        }
        attach!(
            lat_fork: "sched_process_fork".into(),
            lat_switch: "sched_switch".into(),
            lat_sys_enter: "sys_enter".into(),
            lat_sys_exit: "sys_exit".into(),
            lat_rq_issue: "block_rq_issue".into(),
            lat_rq_complete: "block_rq_complete".into(),
            // Exits before entries: an entry seen without its exit would
            // leave the CPU "inside an interrupt" for the whole recording,
            // and no later interrupt there would be timed.
            lat_irq_exit: "irq_handler_exit".into(),
            lat_irq_entry: "irq_handler_entry".into(),
            lat_softirq_exit: "softirq_exit".into(),
            lat_softirq_entry: "softirq_entry".into()
        );
        // The local timer's tracepoints are x86's; without them the timer
        // interrupt's time stays in the calls' own time.
        if let (Ok(exit), Ok(entry)) = (
            skel.progs.lat_timer_exit.attach(),
            skel.progs.lat_timer_entry.attach(),
        ) {
            links.push(entry);
            links.push(exit);
        }
        let kname = |slot: usize| format!("kernel function {}", options.kfuncs[slot]);
        if !options.kfuncs.is_empty() {
            attach!(lat_kfunc_enter0: kname(0), lat_kfunc_exit0: kname(0));
        }
        if options.kfuncs.len() > 1 {
            attach!(lat_kfunc_enter1: kname(1), lat_kfunc_exit1: kname(1));
        }
        if options.kfuncs.len() > 2 {
            attach!(lat_kfunc_enter2: kname(2), lat_kfunc_exit2: kname(2));
        }
        if options.kfuncs.len() > 3 {
            attach!(lat_kfunc_enter3: kname(3), lat_kfunc_exit3: kname(3));
        }
        if options.kfuncs.len() > 4 {
            attach!(lat_kfunc_enter4: kname(4), lat_kfunc_exit4: kname(4));
        }
        if options.kfuncs.len() > 5 {
            attach!(lat_kfunc_enter5: kname(5), lat_kfunc_exit5: kname(5));
        }
        if options.kfuncs.len() > 6 {
            attach!(lat_kfunc_enter6: kname(6), lat_kfunc_exit6: kname(6));
        }
        if options.kfuncs.len() > 7 {
            attach!(lat_kfunc_enter7: kname(7), lat_kfunc_exit7: kname(7));
        }
        for (op, f) in options.ufuncs.iter().enumerate() {
            for (prog, retprobe) in [
                (&skel.progs.lat_ufunc_enter, false),
                (&skel.progs.lat_ufunc_exit, true),
            ] {
                let role = match f.role {
                    UfuncRole::Operation => 0,
                    UfuncRole::Root => UFUNC_ROOT,
                    UfuncRole::Callee => UFUNC_CALLEE,
                };
                // libbpf adds the offset to the symbol's place, if named.
                let (func_name, offset) = match f.offset {
                    Some(offset) => (None, offset as usize),
                    None => (Some(f.symbol.clone()), 0),
                };
                let opts = UprobeOpts {
                    cookie: op as u64 | role,
                    retprobe,
                    func_name,
                    ..Default::default()
                };
                let link = prog
                    .attach_uprobe_with_opts(-1, &f.binary, offset, opts)
                    .map_err(|e| {
                        let binary = f.binary.display().to_string();
                        if e.kind() == libbpf_rs::ErrorKind::NotFound {
                            Error::NoSymbol {
                                symbol: f.symbol.clone(),
                                binary,
                            }
                        } else {
                            Error::Uprobe {
                                symbol: f.symbol.clone(),
                                binary,
                                msg: e.to_string(),
                            }
                        }
                    })?;
                links.push(link);
            }
        }
        Ok(Self {
            _links: links,
            skel,
        })
    }

    /// Trace process `pid` (and, if so configured, its future children).
    pub fn track(&self, pid: u32) -> Result<()> {
        crate::tracked::track(&self.skel.maps.tracked_tgids, pid)
            .map_err(|e| Error::Read(e.to_string()))
    }

    /// The first call at least `slow_ns` long, once there was one.
    pub fn slow_call(&self) -> Option<SlowCall> {
        let bss = self.skel.maps.bss_data.as_deref()?;
        // SAFETY: the .bss stays mapped while the skeleton lives; the
        // program writes `ns` last, so once it is set the rest is too.
        let ns = unsafe { std::ptr::read_volatile(&bss.slow_call.ns) };
        if ns == 0 {
            return None;
        }
        let s = unsafe { std::ptr::read_volatile(&bss.slow_call) };
        Some(SlowCall {
            tgid: s.tgid,
            tid: s.tid,
            op: s.id,
            end_ns: s.end,
            ns,
        })
    }

    /// Every histogram so far, summed over CPUs.
    pub fn read(&self) -> Result<Vec<HistRow>> {
        self.take(u32::MAX, false)
    }

    /// Take the histograms of intervals before `interval` out of the kernel
    /// map, so that a long recording does not fill it. A call that ended
    /// just before an interval's end may still land in it after it was
    /// taken: the caller merges rows with the same key.
    pub fn take_before(&self, interval: u32) -> Result<Vec<HistRow>> {
        self.take(interval, true)
    }

    fn take(&self, before: u32, delete: bool) -> Result<Vec<HistRow>> {
        let map = &self.skel.maps.hists;
        let mut rows = Vec::new();
        // The keys are listed first: deleting during a get-next-key walk
        // would restart it.
        let keys: Vec<Vec<u8>> = map.keys().collect();
        for kb in keys {
            let Some(key) = read::<c::lat_key>(&kb) else {
                continue;
            };
            if key.interval >= before {
                continue;
            }
            let Some(per_cpu) = map
                .lookup_percpu(&kb, MapFlags::ANY)
                .map_err(|e| Error::Read(e.to_string()))?
            else {
                continue;
            };
            let mut row = HistRow {
                tgid: key.tgid,
                kind: key.kind,
                id: key.id,
                interval: key.interval,
                count: [0; SLOTS],
                ns: [0; SLOTS],
                cause_ns: [[0; SLOTS]; CAUSES],
            };
            for hist in per_cpu.iter().filter_map(|v| read::<c::lat_hist>(v)) {
                for (s, slot) in hist.slots.iter().enumerate() {
                    row.count[s] += slot.count;
                    row.ns[s] += slot.ns;
                    for (cause, ns) in row.cause_ns.iter_mut().zip(slot.cause_ns) {
                        cause[s] += ns;
                    }
                }
            }
            rows.push(row);
            if delete {
                let _ = map.delete(&kb);
            }
        }
        Ok(rows)
    }

    /// The callee times collected inside root calls (DARC's next level).
    pub fn callees(&self) -> Result<Vec<CalleeRow>> {
        let mut rows = Vec::new();
        for (kb, v) in entries(&self.skel.maps.callee_times)? {
            let (Some(k), Some(t)) = (
                read::<c::lat_callee_key>(&kb),
                read::<c::lat_callee_time>(&v),
            ) else {
                continue;
            };
            rows.push(CalleeRow {
                tgid: k.tgid,
                root: k.root.into(),
                fnode: k.fnode.into(),
                slot: k.slot,
                calls: t.calls,
                ns: t.ns,
                cause_ns: t.cause_ns,
                largest: t.largest,
                own_largest: t.own_largest,
            });
        }
        Ok(rows)
    }

    /// The kernel wait sites of system calls, with their stacks.
    pub fn wait_sites(&self) -> Result<Vec<SiteRow>> {
        let stacks = &self.skel.maps.wait_stacks;
        let mut rows = Vec::new();
        for (kb, v) in entries(&self.skel.maps.wait_sites)? {
            let (Some(k), Some(t)) = (read::<c::lat_site_key>(&kb), read::<c::lat_site_time>(&v))
            else {
                continue;
            };
            let stack = stacks
                .lookup(&k.stack.to_ne_bytes(), MapFlags::ANY)
                .ok()
                .flatten()
                .map(|b| {
                    b.chunks_exact(8)
                        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
                        .take_while(|&ip| ip != 0)
                        .collect()
                })
                .unwrap_or_default();
            rows.push(SiteRow {
                tgid: k.tgid,
                nr: k.nr,
                slot: k.slot,
                cause: k.cause,
                stack,
                count: t.count,
                ns: t.ns,
            });
        }
        Ok(rows)
    }

    /// The handler name (or number) of the device interrupt of each
    /// device slot, `CAUSE_IRQ_DEV + i`; `None` for a slot never given.
    pub fn device_irqs(&self) -> Vec<Option<String>> {
        let map = &self.skel.maps.irq_names;
        (0..IRQ_DEV_SLOTS as u32)
            .map(|slot| {
                let v = map.lookup(&slot.to_ne_bytes(), MapFlags::ANY).ok()??;
                let n = read::<c::lat_irq_name>(&v)?;
                match crate::records::c_str(&n.name) {
                    name if name.is_empty() => Some(n.irq.to_string()),
                    name => Some(name),
                }
            })
            .collect()
    }

    /// The process names seen, by pid.
    pub fn comms(&self) -> HashMap<u32, String> {
        let map = &self.skel.maps.comms;
        let mut out = HashMap::new();
        for kb in map.keys() {
            let Ok(Some(v)) = map.lookup(&kb, MapFlags::ANY) else {
                continue;
            };
            let Ok(pid) = kb[..].try_into().map(u32::from_ne_bytes) else {
                continue;
            };
            let end = v.iter().position(|&c| c == 0).unwrap_or(v.len());
            out.insert(pid, String::from_utf8_lossy(&v[..end]).into_owned());
        }
        out
    }

    /// Events not counted so far, by what and why ([`LOST`]'s names).
    pub fn lost(&self) -> Vec<(&'static str, u64)> {
        let map = &self.skel.maps.lost;
        LOST.iter()
            .map(|&(kind, what)| {
                let n = map
                    .lookup_percpu(&kind.to_ne_bytes(), MapFlags::ANY)
                    .ok()
                    .flatten()
                    .into_iter()
                    .flatten()
                    .map(|v| {
                        v.get(..8)
                            .map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap()))
                    })
                    .sum();
                (what, n)
            })
            .collect()
    }
}
