//! What a trace holds, record by record.

use serde::Serialize;

/// Sample classes: on-CPU, or one of the blocked subclasses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    Cpu,
    Io,
    Lock,
    Sched,
    Other,
}

impl Class {
    pub const ALL: [Class; 5] = [
        Class::Cpu,
        Class::Io,
        Class::Lock,
        Class::Sched,
        Class::Other,
    ];

    pub fn from_u8(v: u8) -> Option<Class> {
        Class::ALL.get(v as usize).copied()
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// Lower-case name used in JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Class::Cpu => "cpu",
            Class::Io => "io",
            Class::Lock => "lock",
            Class::Sched => "sched",
            Class::Other => "other",
        }
    }

    /// The perf-style tag shown before a symbol: `[.]` is added by reports
    /// for user code, these are the blocked subclasses (bperf).
    pub fn tag(self) -> &'static str {
        match self {
            Class::Cpu => "[.]",
            Class::Io => "[I]",
            Class::Lock => "[L]",
            Class::Sched => "[S]",
            Class::Other => "[B]",
        }
    }
}

/// Who made a blocked thread runnable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Waker {
    /// Preempted, or no wakeup seen.
    None,
    Thread(u32),
    /// A hardware interrupt handler (irq number, [`IRQ_IPI`] or [`IRQ_UNKNOWN`]).
    Irq(u32),
    /// A softirq (vector: 0 HI, 1 TIMER, 2 NET_TX, 3 NET_RX, 4 BLOCK, …).
    Softirq(u32),
    /// An hrtimer or the tick, in interrupt context.
    Timer,
}

/// Irq "number" of wakeups from inter-processor interrupts: work another CPU
/// handed over (a block completion run on the submitting CPU, say).
pub const IRQ_IPI: u32 = u32::MAX - 1;
pub const IRQ_UNKNOWN: u32 = u32::MAX;

pub const SOFTIRQ_NAMES: [&str; 10] = [
    "hi", "timer", "net_tx", "net_rx", "block", "irq_poll", "tasklet", "sched", "hrtimer", "rcu",
];

impl Waker {
    pub fn is_interrupt(self) -> bool {
        matches!(self, Waker::Irq(_) | Waker::Softirq(_) | Waker::Timer)
    }
}

/// Id of a deduplicated stack; 0 is the empty stack.
pub type StackId = u32;
/// Id of a mapped file (dso). [`KERNEL_DSO`] is the kernel.
pub type DsoId = u32;
pub const KERNEL_DSO: DsoId = 0;
/// Frame whose address is in no known mapping; `addr` is the raw address.
pub const UNKNOWN_DSO: DsoId = u32::MAX;

/// One stack frame: a kernel address, or a file offset in a dso. Return
/// addresses are stored minus one, so that every frame symbolizes to the
/// call instruction and not to the one after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frame {
    pub dso: DsoId,
    pub addr: u64,
}

impl Frame {
    pub fn is_kernel(&self) -> bool {
        self.dso == KERNEL_DSO
    }
}

/// An on-CPU sample (class `Cpu`, `time == end`, `weight` sampling points of
/// the thread's on-CPU time since its previous sample, usually 1) or a
/// blocked sample: the thread was off-CPU over `[time, end)`; `[time, wake)`
/// is in `class` with `weight` sampling points, `[wake, end)` runnable with
/// `sched_weight` points (for class `Sched` the whole interval is runnable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    pub time: u64,
    pub wake: u64,
    pub end: u64,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u16,
    pub class: Class,
    pub weight: u32,
    pub sched_weight: u32,
    pub waker: Waker,
    /// Kernel frames then user frames, leaf first.
    pub stack: StackId,
    /// The user part of the stack was read after the thread ran again (may
    /// not be the stack it blocked with) or could not be read.
    pub late_user_stack: bool,
    /// A blocked sample a thread woke: that thread's stack at the wakeup
    /// (kernel frames then user frames, leaf first); 0 when not taken (an
    /// interrupt woke it, the interval passed no sampling point before the
    /// wakeup, an older recorder).
    pub waker_stack: StackId,
}

/// One off-CPU interval of a thread: `[start, wake)` waiting, `[wake, end)`
/// runnable. `wake == 0`: no wakeup (preempted, or still blocked at `end`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
    pub wake: u64,
    pub end: u64,
    pub class: Class,
    pub waker: Waker,
    /// CPU it was switched in on; `None` if still off-CPU when recording ended.
    pub cpu: Option<u16>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BioOp {
    Read,
    Write,
    Flush,
    Discard,
    Other,
}

impl BioOp {
    pub fn from_u8(v: u8) -> BioOp {
        match v {
            0 => BioOp::Read,
            1 => BioOp::Write,
            2 => BioOp::Flush,
            3 => BioOp::Discard,
            _ => BioOp::Other,
        }
    }
    pub fn as_u8(self) -> u8 {
        self as u8
    }
}

/// A block request issued to or completed by a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bio {
    pub time: u64,
    /// `major << 20 | minor`, the kernel's dev_t.
    pub dev: u32,
    pub sector: u64,
    pub bytes: u32,
    pub op: BioOp,
    /// Issuing thread (issue records only; 0 for completions).
    pub pid: u32,
    pub tid: u32,
    /// The issuing thread belongs to the recorded target.
    pub tracked: bool,
    pub error: u16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mmap {
    pub time: u64,
    pub pid: u32,
    pub start: u64,
    pub end: u64,
    pub file_offset: u64,
    pub dso: DsoId,
}

/// A build-id in lowercase hex, the way `readelf -n` prints it.
pub fn build_id_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dso {
    pub id: DsoId,
    pub path: String,
    pub build_id: Option<Vec<u8>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stack {
    pub id: StackId,
    pub frames: Vec<Frame>,
}

/// One (possibly inlined) function at an address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SymFrame {
    pub function: String,
    pub file: Option<String>,
    pub line: u32,
}

/// Symbolization of one frame address, innermost inlined function first.
/// Written at the end of a recording so that reports need no binaries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub frame: Frame,
    pub frames: Vec<SymFrame>,
}

/// Events lost so far (cumulative), by what was lost. What the recorder
/// saw but dropped names its cause in parentheses (`samples (no thread
/// state)`); what a full ring buffer lost names none (`samples`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lost {
    pub what: String,
    pub count: u64,
}

impl Lost {
    /// Why the recorder dropped it; None for records lost to a full ring
    /// buffer (or not parsed).
    pub fn cause(&self) -> Option<&str> {
        lost_cause(&self.what)
    }
}

/// The cause in a lost count's name: `no thread state` in `samples (no
/// thread state)`.
pub fn lost_cause(what: &str) -> Option<&str> {
    let (_, rest) = what.split_once(" (")?;
    rest.strip_suffix(')')
}

/// Lost counts by name, split: the total lost to a full ring buffer (or
/// not parsed), and what the recorder dropped (its cause named), nonzero
/// ones only.
pub fn split_lost<'a>(
    counts: impl IntoIterator<Item = (&'a str, u64)>,
) -> (u64, Vec<(&'a str, u64)>) {
    let mut lost = 0u64;
    let mut dropped = Vec::new();
    for (what, n) in counts {
        if lost_cause(what).is_some() {
            if n > 0 {
                dropped.push((what, n));
            }
        } else {
            lost = lost.saturating_add(n);
        }
    }
    (lost, dropped)
}

/// `12 samples (no thread state), 4 wait segments (no thread state)`.
pub fn dropped_text(dropped: &[(&str, u64)]) -> String {
    let parts: Vec<String> = dropped.iter().map(|(w, n)| format!("{n} {w}")).collect();
    parts.join(", ")
}

/// The recording ended cleanly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finish {
    pub time: u64,
    /// Exit status of a launched command (`None` for -p / -a).
    pub exit_code: Option<i32>,
}

/// One system call invocation of a thread over `[time, end)` (DeBox's
/// per-call result). `blocked` is its off-CPU time by subclass (io, lock,
/// sched, other; see [`Syscall::blocked`]); the rest was on a CPU. The waker
/// and the kernel part of `stack` are those of its longest sleep; the user
/// part is the stack at the call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Syscall {
    pub time: u64,
    pub end: u64,
    pub pid: u32,
    pub tid: u32,
    pub nr: u32,
    pub blocked: [u64; 4],
    pub sleeps: u32,
    pub min_flt: u32,
    pub maj_flt: u32,
    pub waker: Waker,
    pub stack: StackId,
    /// Kept as one of every `sample_every` ordinary invocations (see
    /// [`SyscallConfig`]), not for being slow, blocked or faulting.
    pub sampled: bool,
}

/// Blocked subclasses in the order of [`Syscall::blocked`].
pub const SYSCALL_BLOCKED: [Class; 4] = [Class::Io, Class::Lock, Class::Sched, Class::Other];

impl Syscall {
    pub fn wall_ns(&self) -> u64 {
        self.end.saturating_sub(self.time)
    }

    /// Time asleep (io, lock, other), runqueue time not included.
    pub fn slept_ns(&self) -> u64 {
        self.blocked[0]
            .saturating_add(self.blocked[1])
            .saturating_add(self.blocked[3])
    }

    pub fn on_cpu_ns(&self) -> u64 {
        let blocked = self.blocked.iter().fold(0u64, |a, &b| a.saturating_add(b));
        self.wall_ns().saturating_sub(blocked)
    }
}

/// Exact totals of one system call of one process over the recording.
/// `hist[k]` counts calls of `[2^k, 2^(k+1))` ns (0 ns in bucket 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyscallTotals {
    pub pid: u32,
    pub nr: u32,
    pub count: u64,
    pub total_ns: u64,
    pub blocked: [u64; 4],
    pub min_flt: u64,
    pub maj_flt: u64,
    pub hist: Vec<u64>,
}

/// How the system calls of a recording were kept (written once, first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyscallConfig {
    pub keep_ns: u64,
    pub sample_every: u32,
}

/// A goroutine's wait (record `--goroutines`): goroutine `goid` of process
/// `pid` parked on OS thread `tid` at `time` for `reason` (the Go runtime's
/// wait reason: `sync.Mutex.Lock`, `chan receive`, `IO wait`…), was made
/// runnable at `wake` by goroutine `waker_goid` on thread `waker_tid` (0:
/// none known, e.g. the network poller or a timer) and ran again at `end`.
/// Sampling points on the threads' clock: `weight` before the wakeup,
/// `sched_weight` after, as a blocked sample's. `stack`: the goroutine's
/// own stack where it parked (user frames, leaf first). `waited_on`: what
/// the network poller waited on for an `IO wait` (`socket:[1234]`, a path,
/// `fd 7`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoWait {
    pub time: u64,
    pub wake: u64,
    pub end: u64,
    pub pid: u32,
    pub tid: u32,
    pub goid: u64,
    pub reason: String,
    pub weight: u32,
    pub sched_weight: u32,
    pub waker_goid: u64,
    pub waker_tid: u32,
    pub stack: StackId,
    pub waited_on: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Sample(Sample),
    Segment(Segment),
    /// A new task (process or thread).
    Fork {
        time: u64,
        parent_pid: u32,
        parent_tid: u32,
        pid: u32,
        tid: u32,
    },
    Exec {
        time: u64,
        pid: u32,
        tid: u32,
        filename: String,
    },
    /// The name of a thread, when first seen and whenever it changes.
    Comm {
        time: u64,
        pid: u32,
        tid: u32,
        comm: String,
    },
    Exit {
        time: u64,
        pid: u32,
        tid: u32,
    },
    BioIssue(Bio),
    BioDone(Bio),
    Mmap(Mmap),
    Dso(Dso),
    Stack(Stack),
    Symbol(Symbol),
    Lost(Lost),
    /// Name of an interrupt line (from /proc/interrupts).
    IrqName {
        irq: u32,
        name: String,
    },
    Finish(Finish),
    Syscall(Syscall),
    SyscallTotals(SyscallTotals),
    SyscallConfig(SyscallConfig),
    /// Something the recorder found that every reader of the trace should
    /// be told once (generated code that nothing names, and how to have it
    /// named).
    Note(String),
    GoWait(GoWait),
}

impl Record {
    /// Short name of the record kind, for statistics.
    pub fn kind(&self) -> &'static str {
        match self {
            Record::Sample(s) if s.class == Class::Cpu => "on-CPU samples",
            Record::Sample(_) => "blocked samples",
            Record::Segment(_) => "wait segments",
            Record::Fork { .. }
            | Record::Exec { .. }
            | Record::Comm { .. }
            | Record::Exit { .. } => "task events",
            Record::BioIssue(_) | Record::BioDone(_) => "block requests",
            Record::Mmap(_) | Record::Dso(_) => "mappings",
            Record::Stack(_) => "stacks",
            Record::Symbol(_) => "symbols",
            Record::Lost(_) | Record::IrqName { .. } | Record::Finish(_) | Record::Note(_) => {
                "other"
            }
            Record::Syscall(_) => "system calls",
            Record::SyscallTotals(_) | Record::SyscallConfig(_) => "system call totals",
            Record::GoWait(_) => "goroutine waits",
        }
    }

    /// The time of the event, for records that happen at a time.
    pub fn time(&self) -> Option<u64> {
        Some(match self {
            Record::Sample(s) => s.time,
            Record::Segment(s) => s.start,
            Record::Fork { time, .. }
            | Record::Exec { time, .. }
            | Record::Comm { time, .. }
            | Record::Exit { time, .. } => *time,
            Record::BioIssue(b) | Record::BioDone(b) => b.time,
            Record::Mmap(m) => m.time,
            Record::Finish(f) => f.time,
            Record::Syscall(s) => s.time,
            Record::GoWait(g) => g.time,
            _ => return None,
        })
    }
}
