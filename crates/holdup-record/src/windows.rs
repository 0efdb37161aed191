//! A recording that never ends in a file: the session's recorder and
//! converter, their trace kept in memory and handed over one window of
//! time after another (`holdup agent`). Each window is symbolized when it
//! closes, while its processes' files are at hand; what the trace needs
//! across windows (stacks, files, mappings, thread names, symbols) stays,
//! the samples of a window go once it was handed over, and so do the
//! threads and mappings of processes that exited.
//!
//! A blocked sample is written when its wait ends, so it belongs to the
//! window in which the thread ran again.

use crate::convert::Converter;
use crate::embed_symbols;
use crate::recording::{Flow, Recording, Stop, Until};
use crate::session::{self, Config, DrainPolicy, Losses};
use anyhow::Context;
use holdup_bpf::Recorder;
use holdup_trace::fxhash::FxHashSet;
use holdup_trace::{Frame, Reader, Trace};
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
    /// The recording ends with this window.
    pub last: bool,
}

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
    symbolized: FxHashSet<Frame>,
    start_ns: u64,
    start_unix_ns: u64,
    lost_before: u64,
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
        embed_symbols::symbolize_frames(d, &fresh).context("symbolizing")?;
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
    fn close(
        &mut self,
        d: &mut Converter<Pipe>,
        last: bool,
        on_window: &mut impl FnMut(Window) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        self.read_window(d)?;
        let end_ns = holdup_bpf::monotonic_ns();
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
            last,
        })?;
        self.lost_before = lost;
        self.start_ns = end_ns;
        self.start_unix_ns = wall_ns();
        forget_window(t);
        Ok(())
    }
}

/// What a window held that the next one does not need: its events, the
/// threads that exited, the mappings of processes with no thread left.
fn forget_window(t: &mut Trace) {
    t.samples.clear();
    t.segments.clear();
    t.bio_issues.clear();
    t.bio_done.clear();
    t.syscalls.clear();
    t.threads.retain(|_, th| !th.exited);
    let live: FxHashSet<u32> = t.threads.values().map(|th| th.pid).collect();
    t.mmaps.retain(|m| live.contains(&m.pid));
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
    d.python.hand_over(&rec);
    // The header is in the pipe already: the reader takes it now.
    let reader = Reader::new(pipe, "the trace in memory")?;
    let mut windows = Windows {
        trace: Trace {
            header: reader.header.clone(),
            features: reader.features,
            ..Default::default()
        },
        reader,
        symbolized: FxHashSet::default(),
        start_ns,
        start_unix_ns: wall_ns(),
        lost_before: 0,
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
        if closing || policy.due(rec.ring_pending()) {
            session::drain(&mut rec, &mut d, &mut losses)?;
            policy.drained(rec.ring_pending());
            d.jit.refresh();
        }
        if closing {
            windows.close(&mut d, false, &mut on_window)?;
            // A window that took long to close does not make the next ones
            // short.
            next_window = (next_window + interval).max(Instant::now() + interval / 2);
        }
        Ok(Flow::Continue)
    })?;
    // Threads still off-CPU end the last window.
    rec.flush_open()?;
    session::drain(&mut rec, &mut d, &mut losses)?;
    windows.close(&mut d, true, &mut on_window)?;
    Ok(stop)
}
