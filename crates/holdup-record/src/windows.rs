//! A recording that never ends in a file: the session's recorder and
//! converter, their trace kept in memory and handed over one window of
//! time after another (`holdup agent`). Each window is symbolized when it
//! closes, while its processes' files are at hand, by a symbolizer kept
//! from window to window (a file's symbol tables are read once while its
//! processes live); what the trace needs across windows (stacks, files,
//! mappings, thread names, symbols) stays, the samples of a window go once
//! it was handed over, and so do the threads and mappings of processes
//! that exited.
//!
//! An agent stays on, so nothing may grow with time alone: a stack no
//! window's events used for [`STACK_KEPT_WINDOWS`] windows is forgotten
//! (the converter gives it a new id if it comes back), and with it the
//! symbols of frames no stack kept holds; a process that exited is
//! forgotten by the converter a window later (its address space, its
//! threads' names and stacks), and the symbolizer forgets the files no
//! live process maps.
//!
//! A blocked sample is written when its wait ends, so it belongs to the
//! window in which the thread ran again.

use crate::convert::Converter;
use crate::embed_symbols::Symbols;
use crate::recording::{Flow, Recording, Stop, Until};
use crate::session::{self, Config, DrainPolicy, Losses};
use anyhow::Context;
use holdup_bpf::{Recorder, StackBudgetCounts};
use holdup_trace::fxhash::{FxHashMap, FxHashSet};
use holdup_trace::{DsoId, Frame, Reader, StackId, Trace};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// One window of the recording, handed to the caller.
pub struct Window<'a> {
    /// The samples of the window, with everything needed to resolve them;
    /// its header's start is the window's.
    pub trace: &'a Trace,
    /// Wall-clock start (ns since the epoch) and length of the window.
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    /// Events the recorder lost in this window (its ring was full).
    pub lost_events: u64,
    /// Blocked intervals per blocked-sample stack taken in this window (1:
    /// every one had its stacks; R: the stack budget took 1 in R and scaled
    /// their weights by it).
    pub stack_sampling_ratio: f64,
    /// Blocked samples of threads without rseq written without their user
    /// stack in this window ([`holdup_bpf::Recorder::user_stacks_given_up`]).
    pub user_stacks_given_up: u64,
    /// What the recording holds at the end of this window (before it
    /// forgets what the next ones do not need).
    pub held: Held,
    /// The recording ends with this window.
    pub last: bool,
}

/// Counts of what a long recording keeps across windows: bounded by what
/// the live processes and the last windows used, not by time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// Interned stacks, and those made since the start.
    pub stacks: usize,
    pub stacks_made: u64,
    /// Frames with symbols.
    pub symbols: usize,
    /// Files whose symbol tables the symbolizer holds.
    pub files: usize,
    /// Processes whose address space the converter holds.
    pub processes: usize,
}

/// Windows a stack is kept after the last one whose events used it.
pub const STACK_KEPT_WINDOWS: u64 = 6;

/// The bytes the trace writer writes and the trace reader reads: chunks go
/// in whole, and are read back when a window closes.
#[derive(Clone, Default)]
struct Pipe(Rc<RefCell<VecDeque<u8>>>);

impl Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Read for Pipe {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().read(buf)
    }
}

/// The in-memory trace and what closing a window needs.
struct Windows {
    reader: Reader<Pipe>,
    trace: Trace,
    symbols: Symbols,
    symbolized: FxHashSet<Frame>,
    /// Files given to the symbolizer, by dso.
    read_files: FxHashSet<DsoId>,
    /// Per stack, the last window whose events used it.
    stack_used: FxHashMap<StackId, u64>,
    /// Processes and threads that exited in the last window: the converter
    /// forgets them at the end of the next one, when no record of theirs
    /// can still be in the ring.
    exited: Exited,
    /// Windows closed so far.
    number: u64,
    start_ns: u64,
    start_unix_ns: u64,
    lost_before: u64,
    counts_before: Counts,
}

/// What the recorder counted up to a window's last drain.
#[derive(Clone, Copy, Default)]
struct Counts {
    budget: StackBudgetCounts,
    user_stacks_given_up: u64,
}

impl Counts {
    /// Read before a drain: every sample they counted is in the ring.
    fn of(rec: &Recorder) -> Self {
        Self {
            budget: rec.stack_budget_counts(),
            user_stacks_given_up: rec.user_stacks_given_up(),
        }
    }
}

fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Windows {
    /// Symbols for the frames first seen in this window, then every record
    /// written since the last window into the trace.
    fn read_window(&mut self, d: &mut Converter<Pipe>) -> anyhow::Result<()> {
        let fresh: Vec<Frame> = d
            .frames()
            .filter(|f| !self.symbolized.contains(f))
            .copied()
            .collect();
        self.symbols
            .symbolize_frames(d, &fresh)
            .context("symbolizing")?;
        self.read_files.extend(fresh.iter().map(|f| f.dso));
        self.symbolized.extend(fresh);
        d.writer.flush_chunk().context("writing the trace")?;
        let trace = &mut self.trace;
        self.reader
            .for_each(|r| trace.add(r))
            .context("reading the trace back")?;
        if let Some(damage) = self.reader.damage() {
            anyhow::bail!("the trace in memory is damaged: {damage}");
        }
        Ok(())
    }

    /// Hand the window over, then forget its samples and what exited.
    /// `counts` are the recorder's up to the window's last drain.
    fn close(
        &mut self,
        d: &mut Converter<Pipe>,
        last: bool,
        counts: Counts,
        on_window: &mut impl FnMut(Window) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        self.read_window(d)?;
        let end_ns = holdup_bpf::monotonic_ns();
        let held = self.held(d);
        let t = &mut self.trace;
        t.header.start_ns = self.start_ns;
        t.header.start_unix_ns = self.start_unix_ns;
        t.end_ns = end_ns;
        for th in t.threads.values_mut().filter(|th| !th.exited) {
            th.end = end_ns;
        }
        let lost = t.lost_total();
        on_window(Window {
            trace: t,
            start_unix_ns: self.start_unix_ns,
            duration_ns: end_ns.saturating_sub(self.start_ns),
            lost_events: lost.saturating_sub(self.lost_before),
            stack_sampling_ratio: window_ratio(&self.counts_before.budget, &counts.budget),
            user_stacks_given_up: counts.user_stacks_given_up
                - self.counts_before.user_stacks_given_up,
            held,
            last,
        })?;
        self.lost_before = lost;
        self.counts_before = counts;
        self.start_ns = end_ns;
        self.start_unix_ns = wall_ns();
        self.number += 1;
        self.mark_used();
        let mut exited = forget_window(&mut self.trace);
        let live: FxHashSet<u32> = self.trace.threads.values().map(|th| th.pid).collect();
        exited.pids.extend(d.processes_gone(&live));
        let before = std::mem::replace(&mut self.exited, exited);
        d.forget_exited(&before.pids, &before.tids);
        self.forget_stacks(d);
        self.forget_files(d);
        Ok(())
    }

    /// What is held now.
    fn held(&self, d: &Converter<Pipe>) -> Held {
        Held {
            stacks: d.stacks_held(),
            stacks_made: d.stacks_made(),
            symbols: self.trace.symbols.len(),
            files: self.symbols.files_held(),
            processes: d.processes_held(),
        }
    }

    /// Note the stacks this window's events used.
    fn mark_used(&mut self) {
        let t = &self.trace;
        let n = self.number;
        let used = t
            .samples
            .iter()
            .flat_map(|s| [s.stack, s.waker_stack])
            .chain(t.syscalls.iter().map(|s| s.stack))
            .chain(t.go_waits.iter().map(|g| g.stack));
        for id in used {
            self.stack_used.insert(id, n);
        }
    }

    /// Forget the stacks no event used for [`STACK_KEPT_WINDOWS`] windows,
    /// here and in the converter, and the symbols of frames no kept stack
    /// holds.
    fn forget_stacks(&mut self, d: &mut Converter<Pipe>) {
        let n = self.number;
        // A stack made but not used yet (a system call's, waiting for its
        // record) counts from now.
        for &id in self.trace.stacks.keys() {
            self.stack_used.entry(id).or_insert(n);
        }
        let gone: FxHashSet<StackId> = self
            .stack_used
            .iter()
            .filter(|&(_, &last)| last + STACK_KEPT_WINDOWS < n)
            .map(|(&id, _)| id)
            .collect();
        if gone.is_empty() {
            return;
        }
        self.stack_used.retain(|id, _| !gone.contains(id));
        self.trace.stacks.retain(|id, _| !gone.contains(id));
        d.forget_stacks(&gone);
        let kept: FxHashSet<Frame> = self.trace.stacks.values().flatten().copied().collect();
        self.trace.symbols.retain(|f, _| kept.contains(f));
        self.symbolized.retain(|f| kept.contains(f));
    }

    /// The symbolizer forgets the files no live process maps.
    fn forget_files(&mut self, d: &Converter<Pipe>) {
        let mapped = d.mapped_files();
        let paths: FxHashMap<DsoId, &str> =
            d.dsos.iter().map(|(id, p, _)| (*id, p.as_str())).collect();
        let symbols = &mut self.symbols;
        self.read_files.retain(|dso| match paths.get(dso) {
            Some(path) if !mapped.contains(path) => {
                symbols.evict(path);
                false
            }
            Some(_) => true,
            // The kernel, generated code, interpreters: no file to forget.
            None => false,
        });
    }
}

/// Blocked intervals per stack taken between two readings of the stack
/// budget's counts; 1 when no interval passed a sampling point.
fn window_ratio(before: &StackBudgetCounts, now: &StackBudgetCounts) -> f64 {
    let intervals = now.intervals.saturating_sub(before.intervals);
    let stacks = now.stacks.saturating_sub(before.stacks);
    if intervals == 0 || stacks == 0 {
        return 1.0;
    }
    intervals as f64 / stacks as f64
}

/// Threads that exited, and the processes with no thread left.
#[derive(Default)]
struct Exited {
    pids: Vec<u32>,
    tids: Vec<u32>,
}

/// What a window held that the next one does not need: its events, the
/// threads that exited, the mappings of processes with no thread left.
/// Returns what exited.
fn forget_window(t: &mut Trace) -> Exited {
    t.samples.clear();
    t.segments.clear();
    t.bio_issues.clear();
    t.bio_done.clear();
    t.syscalls.clear();
    t.go_waits.clear();
    let mut exited = Exited::default();
    let mut pids = FxHashSet::default();
    t.threads.retain(|&tid, th| {
        if th.exited {
            exited.tids.push(tid);
            pids.insert(th.pid);
        }
        !th.exited
    });
    let live: FxHashSet<u32> = t.threads.values().map(|th| th.pid).collect();
    t.mmaps.retain(|m| live.contains(&m.pid));
    exited.pids = pids.into_iter().filter(|p| !live.contains(p)).collect();
    exited
}

/// Record as `cfg` says (its output is not used) until the duration is
/// over or a signal arrives, handing each `interval` of it to `on_window`,
/// and what is left at the end as the last window. The `-p` processes
/// exiting does not end it: others may come.
pub fn record_windows(
    cfg: &Config,
    interval: Duration,
    mut on_window: impl FnMut(Window) -> anyhow::Result<()>,
) -> anyhow::Result<Stop> {
    let until = Until {
        duration: cfg.duration,
        pids: Vec::new(),
    };
    let mut recording = Recording::launch(&[], until)?;
    let mut rec = Recorder::start(cfg.options.clone()).context("starting the recorder")?;
    let start_ns = holdup_bpf::monotonic_ns();
    rec.set_start(start_ns);
    let pipe = Pipe::default();
    let mut d = session::start_trace(cfg, &session::header(cfg, start_ns), pipe.clone())?;
    d.set_waker_stacks(rec.waker_stacks());
    d.python.hand_over(&mut rec);
    // The header is in the pipe already: the reader takes it now.
    let reader = Reader::new(pipe, "the trace in memory")?;
    let mut windows = Windows {
        trace: Trace {
            header: reader.header.clone(),
            features: reader.features,
            ..Default::default()
        },
        reader,
        symbols: Symbols::new(),
        symbolized: FxHashSet::default(),
        read_files: FxHashSet::default(),
        stack_used: FxHashMap::default(),
        exited: Exited::default(),
        number: 0,
        start_ns,
        start_unix_ns: wall_ns(),
        lost_before: 0,
        counts_before: Counts::default(),
    };
    session::drain_ahead_of_the_target();
    recording.start()?;

    let mut losses = Losses::default();
    let mut policy = DrainPolicy::new(cfg.options.ring_bytes);
    // Windows are counted from here: loading the processes that exist
    // already can take a while on a busy machine.
    let mut next_window = Instant::now() + interval;
    let stop = recording.run(Duration::from_millis(50), &[], || {
        let closing = Instant::now() >= next_window;
        let counts = closing.then(|| Counts::of(&rec));
        if closing || policy.due(rec.ring_pending()) {
            session::drain(&mut rec, &mut d, &mut losses)?;
            policy.drained(rec.ring_pending());
            d.jit.refresh();
        }
        if let Some(counts) = counts {
            windows.close(&mut d, false, counts, &mut on_window)?;
            // A window that took long to close does not make the next ones
            // short.
            next_window = (next_window + interval).max(Instant::now() + interval / 2);
        }
        Ok(Flow::Continue)
    })?;
    // Threads still off-CPU end the last window.
    rec.flush_open()?;
    let counts = Counts::of(&rec);
    session::drain(&mut rec, &mut d, &mut losses)?;
    windows.close(&mut d, true, counts, &mut on_window)?;
    Ok(stop)
}
