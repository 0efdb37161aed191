//! The sample processor: turns the recorder's ring records into points per
//! location and into delay credit for the running experiment's target.

use crate::clock::{now_ns, seeded_rng, Rng};
use crate::domain::Delays;
use crate::lines::{self, LineTable, Locations, Place};
use crate::modules::{Modules, Role};
use crate::points::{points_of, Crowding};
use crate::python::PythonLocs;
use crate::source::Source;
use crate::state::State;
use crate::threads::{ThreadState, ThreadTable};
use crate::unwind::Unwinder;
use holdup_bpf::records::{self, RawRecord};
use holdup_bpf::ringbuf::RingPeek;
use holdup_coz::names;
use holdup_coz::selection::Floor;
use holdup_coz::target::{Subclass, Target};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SpeedupTarget {
    /// A location: a source line, or a whole function.
    Code(u32),
    Subclass(Subclass),
    /// This whole process (SCOZ's process target, with `--system`): every
    /// on-CPU sample of its threads is in the target.
    Process,
}

pub struct Experiment {
    pub target: SpeedupTarget,
    pub start_ns: u64,
    pub delay_ns: u64,
    pub selected: u64,
    /// The line points of all of this process's samples meanwhile: what a
    /// code target's `selected` is a part of.
    pub program: u64,
}

/// Everything needed to turn ring records into delays, behind one lock.
pub struct Processor {
    pub(crate) ring: Option<Source>,
    pub(crate) modules: Modules,
    pub(crate) tables: Vec<LineTable>,
    pub locs: Locations,
    pub(crate) unwinder: Unwinder,
    pub(crate) frames: Vec<u64>,
    pub(crate) slot_of: HashMap<i32, usize>,
    /// This process's Python frames, when the recorder walks them.
    pub(crate) python: PythonLocs,
    pub(crate) ready: bool,
    /// A library was unloaded before the profiler's first list was in:
    /// that list is made again when it is.
    pub(crate) modules_stale: bool,
    pub(crate) last_refresh_ns: u64,
    /// Weighted sample points per location, and for io / runqueue.
    pub counts: HashMap<u32, u64>,
    pub io_points: u64,
    pub sched_points: u64,
    /// How much the program's runnable threads wait for a CPU.
    pub(crate) crowd: Crowding,
    pub(crate) exp: Option<Experiment>,
    /// Weighted reservoir of candidate targets since the last experiment began.
    pub(crate) pick: Option<SpeedupTarget>,
    pub(crate) pick_total: u64,
    /// Sample points and experiments per target over the run: a target
    /// that matters gets a floor of experiments (see `selection`).
    pub(crate) floor: Floor<SpeedupTarget>,
    pub(crate) rng: Rng,
    /// The wrappers' code (see [`crate::forwarding_ranges`]), sorted.
    pub(crate) forwarding: Vec<Forwarding>,
    pub(crate) allow_subclasses: bool,
    pub samples_seen: u64,
    /// File name of the main executable: `--system` names line targets
    /// with it (`server:/src/server.c:42`), so that targets of several
    /// processes are told apart.
    pub(crate) binary: Option<String>,
    /// Where a record is copied to be read in place (see [`aligned`]).
    aligned: Vec<u64>,
    /// Records drained and time spent on them, for --verbose.
    pub(crate) records: u64,
    pub(crate) busy_ns: u64,
}

impl Processor {
    pub fn new(ring: Option<Source>) -> Processor {
        Processor {
            ring,
            modules: Modules::default(),
            tables: Vec::new(),
            locs: Locations::default(),
            unwinder: Unwinder::default(),
            frames: Vec::with_capacity(128),
            slot_of: HashMap::new(),
            python: PythonLocs::default(),
            ready: false,
            modules_stale: false,
            last_refresh_ns: 0,
            counts: HashMap::new(),
            io_points: 0,
            sched_points: 0,
            crowd: Crowding::default(),
            exp: None,
            pick: None,
            pick_total: 0,
            floor: Floor::default(),
            rng: seeded_rng(),
            forwarding: Vec::new(),
            allow_subclasses: true,
            samples_seen: 0,
            binary: None,
            aligned: Vec::new(),
            records: 0,
            busy_ns: 0,
        }
    }

    /// What the profile calls target `t`.
    pub fn target(&self, t: SpeedupTarget) -> Target {
        match t {
            SpeedupTarget::Subclass(sc) => Target::Subclass(sc),
            SpeedupTarget::Process => Target::Process(process_name()),
            SpeedupTarget::Code(l) => match self.locs.place(l) {
                // One Python file run by several processes is one target.
                Place::Line { file, line } if self.python.is_line(l) => {
                    Target::line(None, file, line)
                }
                Place::Line { file, line } => Target::line(self.binary.as_deref(), file, line),
                Place::Function { binary, symbol } => Target::Function {
                    binary: binary.to_string(),
                    function: names::without_params(symbol),
                },
            },
        }
    }

    /// The target named `name` (of any process, or a user's FILE:LINE) in this process.
    pub fn resolve(&self, name: &str) -> Option<SpeedupTarget> {
        match Target::parse(name) {
            Ok(Target::Subclass(sc)) => Some(SpeedupTarget::Subclass(sc)),
            Ok(Target::Process(p)) => (p == process_name()).then_some(SpeedupTarget::Process),
            Ok(Target::Line {
                binary: Some(b),
                file,
                line,
            }) if self.binary.as_ref() == Some(&b) => self
                .locs
                .id(&format!("{file}:{line}"))
                .or_else(|| self.locs.find(name))
                .map(SpeedupTarget::Code),
            Ok(Target::Function { binary, function }) => self
                .locs
                .functions(&binary, |s| names::answers_to(s, &function))
                .next()
                .map(SpeedupTarget::Code),
            _ => self.locs.find(name).map(SpeedupTarget::Code),
        }
    }

    fn offer(&mut self, t: SpeedupTarget, w: u64) {
        if w == 0 {
            return;
        }
        self.floor.seen(t, w);
        self.pick_total += w;
        if self.rng.below(self.pick_total) < w {
            self.pick = Some(t);
        }
    }

    fn thread(
        &mut self,
        threads: &'static ThreadTable,
        tid: i32,
        global: u64,
    ) -> Option<&'static ThreadState> {
        if let Some(&i) = self.slot_of.get(&tid) {
            let s = threads.slot(i);
            if s.tid.load(Ordering::Acquire) == tid {
                return Some(s);
            }
        }
        // A thread the runtime did not start (or a reused slot): claim one
        // so its credit still raises the global delay.
        let s = threads.find_or_claim(tid, global)?;
        if let Some(i) = threads.index_of(tid) {
            self.slot_of.insert(tid, i);
        }
        Some(s)
    }

    pub fn process(&mut self, rt: &'static State, bytes: &[u8]) {
        let mut buf = std::mem::take(&mut self.aligned);
        self.process_record(rt, aligned(bytes, &mut buf));
        self.aligned = buf;
    }

    fn process_record(&mut self, rt: &'static State, bytes: &[u8]) {
        let s = match records::parse(bytes) {
            Ok(RawRecord::Sample(s)) => s,
            Ok(RawRecord::PyCode(c)) if c.pid == rt.pid => return self.python.code(c),
            _ => return,
        };
        let r = s.rec;
        if r.pid != rt.pid || r.tid as i32 == rt.profiler_tid.load(Ordering::Relaxed) {
            return;
        }
        if r.flags & records::SF_BLOCKED_TAIL != 0 {
            return;
        }
        self.crowd.see(&r);
        if r.flags & records::SF_USER_REGS == 0 {
            return;
        }
        let all = points_of(&r, 0, &self.crowd);
        if all.line + all.io + all.sched + all.lock == 0 {
            return;
        }
        let fp = s.fp_chain();
        let stack = s.user_stack(&fp);
        let mut frames = std::mem::take(&mut self.frames);
        self.unwinder.unwind(&self.modules, &stack, &mut frames);

        let target_line = match self.exp.as_ref().map(|e| e.target) {
            Some(SpeedupTarget::Code(l)) => Some(l),
            _ => None,
        };
        let mut first = None;
        // The first place of the scope above `first`, not itself.
        let mut caller = None;
        let mut hit = false;
        let mut saw_main = false;
        let mut own = false;
        let mut unknown = false;
        // The sample passed through a wrapper that takes a lock.
        let mut taking_lock = false;
        // A sample with interpreter frames: they stand in place of the
        // interpreter's own machine code, at its first frame (or after the
        // native frames, where those end before it).
        let mut python = r.py_len > 0;
        self.python.seen |= python;
        for (i, &f) in frames.iter().enumerate() {
            let addr = if i == 0 { f } else { f.wrapping_sub(1) };
            let Some(mi) = self.modules.find(addr) else {
                unknown = true;
                continue;
            };
            let m = &self.modules.list[mi];
            let wrapper = match m.role {
                Role::Runtime if i > 0 => forwards(&self.forwarding, addr),
                _ => None,
            };
            taking_lock |= wrapper.is_some_and(|w| w.takes_lock);
            match m.role {
                Role::Runtime if !saw_main && runtimes_own(i, wrapper, r.class) => {
                    own = true;
                    break;
                }
                Role::Main => saw_main = true,
                _ => {}
            }
            if m.interpreter && self.python.seen {
                if std::mem::take(&mut python)
                    && self.python_frames(&s, target_line, &mut first, &mut hit)
                {
                    break;
                }
                continue;
            }
            if let Some(t) = m.lines {
                if let Some(loc) = self.tables[t].lookup(addr - m.bias) {
                    if first.is_some_and(|f| f != loc) {
                        caller.get_or_insert(loc);
                    }
                    first.get_or_insert(loc);
                    if Some(loc) == target_line {
                        hit = true;
                    }
                    // A wait for a lock looks for the code above the lock
                    // call too (see the offers below).
                    let looking = taking_lock && all.lock > 0 && caller.is_none();
                    if (target_line.is_none() || hit) && !looking {
                        break;
                    }
                }
            }
        }
        self.frames = frames;
        if own {
            return;
        }
        if python && (first.is_none() || (target_line.is_some() && !hit)) {
            self.python_frames(&s, target_line, &mut first, &mut hit);
        }
        if unknown {
            self.maybe_refresh_modules();
        }
        self.samples_seen += 1;
        if let Some(loc) = first {
            *self.counts.entry(loc).or_insert(0) += all.line;
        }
        self.io_points += all.io;
        self.sched_points += all.sched;

        if let Some(exp) = self.exp.as_mut() {
            let p = points_of(&r, exp.start_ns, &self.crowd);
            let credit = match exp.target {
                SpeedupTarget::Code(_) if hit => p.line,
                SpeedupTarget::Code(_) => 0,
                SpeedupTarget::Process => p.line,
                SpeedupTarget::Subclass(Subclass::Io) => p.io,
                SpeedupTarget::Subclass(Subclass::Sched) => p.sched,
            };
            exp.program += p.line;
            exp.selected += credit;
            let delay = exp.delay_ns;
            if credit > 0 {
                if let Some(d) = rt.domain {
                    d.selected.fetch_add(credit, Ordering::AcqRel);
                }
                if delay > 0 {
                    let g = rt.global();
                    if let Some(st) = self.thread(&rt.threads, r.tid as i32, g) {
                        let ns = credit.saturating_mul(delay);
                        credit_thread(st, ns, rt.delays, r.start.max(r.end));
                        rt.credited.fetch_add(ns, Ordering::Relaxed);
                    }
                }
            }
        }
        if let Some(loc) = first {
            if !lines::is_progress_header(self.locs.name(loc)) {
                // A wait for a lock makes the code that took it worth an
                // experiment, as its own work does; while one runs, only
                // the work and the wait for a CPU after the wakeup are
                // credited (`points_of`). That code is the innermost
                // place of the scope, or its caller where the innermost
                // is the program's own lock function (RocksDB's
                // port::Mutex::Lock, called by the cache shard's Lookup
                // that holds the lock): each gets half. (A condition
                // variable's wait is often for work to come: no sign.)
                let lock = if taking_lock { all.lock } else { 0 };
                let above = caller.map_or(0, |_| lock / 2);
                self.offer(SpeedupTarget::Code(loc), all.line + lock - above);
                if let Some(c) = caller.filter(|&c| !lines::is_progress_header(self.locs.name(c))) {
                    self.offer(SpeedupTarget::Code(c), above);
                }
            }
        }
        if self.allow_subclasses {
            self.offer(SpeedupTarget::Subclass(Subclass::Io), all.io);
            self.offer(SpeedupTarget::Subclass(Subclass::Sched), all.sched);
        }
    }

    /// The sample's Python frames in scope, innermost first, as for the
    /// native frames: the first is the sample's location, and a hit when
    /// one is the experiment's. True when the walk is done (the location is
    /// found and no target is looked for, or the target is found).
    fn python_frames(
        &mut self,
        s: &records::RawSample<'_>,
        target_line: Option<u32>,
        first: &mut Option<u32>,
        hit: &mut bool,
    ) -> bool {
        for f in s.python() {
            let Some(loc) = self.python.loc(&mut self.locs, s.rec.pid, &f) else {
                continue;
            };
            first.get_or_insert(loc);
            *hit |= Some(loc) == target_line;
            if target_line.is_none() || *hit {
                return true;
            }
        }
        false
    }

    /// A library loaded by dlopen shows up as unknown addresses.
    fn maybe_refresh_modules(&mut self) {
        let now = now_ns();
        if now - self.last_refresh_ns < 1_000_000_000 {
            return;
        }
        self.last_refresh_ns = now;
        self.reload_modules();
    }

    /// List the loaded objects again, keeping the line tables of those
    /// still loaded. The list's unwind tables point into the objects'
    /// memory: after a dlclose, an unloaded one must leave the list before
    /// the next unwind.
    pub fn reload_modules(&mut self) {
        let mut fresh = Modules::load(runtime_address());
        for m in &mut fresh.list {
            m.lines = self
                .modules
                .list
                .iter()
                .find(|o| o.path == m.path && o.bias == m.bias)
                .and_then(|o| o.lines);
        }
        self.modules = fresh;
        // Unwind steps cached by address may be an unloaded object's.
        self.unwinder = Unwinder::default();
    }
}

/// Credit thread `st` with `ns` of its target's virtual speedup, for its
/// sample at `time_ns`, and raise the global delay to what it is then ahead
/// by. A sample reaches the ring after the fact (a blocked one when the
/// wait it records has ended) and is processed up to a tick later:
/// - the thread may be waiting in a pthread call by then, and its wakeup
///   skips the rise of the global delay during the wait (COZ's catch-up);
///   the part of that rise that is its own credit is not skipped too:
///   counted twice, it would be published again as a delay of its own.
///   Only the rise counts, not the credit: a thread that was behind when it
///   blocked pays its debt with the credit.
/// - threads whose wait it ended may have woken already: the rise is
///   logged for them (see `late_credits`).
pub(crate) fn credit_thread(st: &ThreadState, ns: u64, delays: &Delays, time_ns: u64) {
    st.local.fetch_add(ns, Ordering::AcqRel);
    let ahead = st.published();
    let before = delays.global.fetch_max(ahead, Ordering::AcqRel);
    let rise = ahead.saturating_sub(before).min(ns);
    if rise == 0 {
        return;
    }
    if st.blocked.load(Ordering::Acquire) {
        st.pre_block.fetch_add(rise, Ordering::AcqRel);
    }
    delays
        .late
        .log(st.tid.load(Ordering::Relaxed), time_ns, rise);
}

/// The code of a wrapper that forwards the program's call to libc.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Forwarding {
    pub start: u64,
    pub end: u64,
    /// It takes a lock (a mutex, a rwlock, a spinlock): a wait below it is
    /// for the lock, not for work or a signal (a condition variable's).
    pub takes_lock: bool,
}

/// Whether a sample whose frame `i` is in the runtime's code (of `wrapper`,
/// where that code forwards a call to libc) is the runtime's own work
/// (paying delays, processing samples), not the program's. The work of the
/// libc call that a wrapper forwards is the program's (a lock's spinning
/// and its system calls, in the caller that took the lock), and so is a
/// wait for a lock or for I/O that passes through any runtime frame. A
/// thread preempted inside a forwarded call is not: mostly the wakeup
/// cascade of a barrier or of a lock handed over, which the wrappers settle
/// the delays of; counted, the runqueue waits inside causal_pool's barrier
/// made "more cores" predict +64% where +48% was measured.
fn runtimes_own(i: usize, wrapper: Option<&Forwarding>, class: u8) -> bool {
    let programs = match class {
        _ if i == 0 => false,
        records::CLASS_LOCK | records::CLASS_IO => true,
        records::CLASS_CPU => wrapper.is_some(),
        _ => false,
    };
    !programs
}

/// The wrapper among `ranges` (sorted, disjoint) whose code holds `addr`.
fn forwards(ranges: &[Forwarding], addr: u64) -> Option<&Forwarding> {
    let i = ranges.partition_point(|f| f.start <= addr);
    let f = ranges.get(i.checked_sub(1)?)?;
    (addr < f.end).then_some(f)
}

/// The processor behind its lock, and what tells whether the ring has
/// records: the sampling half of the runtime, which the profiler thread
/// and the wrappers drive.
pub struct Samples {
    pub processor: Mutex<Processor>,
    peek: Option<RingPeek>,
}

impl Samples {
    pub fn new(source: Source, peek: Option<RingPeek>) -> Samples {
        Samples {
            processor: Mutex::new(Processor::new(Some(source))),
            peek,
        }
    }

    /// Whether the ring may hold records not yet processed (a socket
    /// always may).
    pub fn pending(&self) -> bool {
        match &self.peek {
            Some(p) => p.pending(),
            None => true,
        }
    }

    /// Drain the ring into the processor. Never inlined into a wrapper:
    /// its samples are the runtime's (see `forwarding_ranges`).
    #[inline(never)]
    pub fn process_pending(&self, st: &'static State) {
        let Ok(mut guard) = self.processor.lock() else {
            return;
        };
        let p = &mut *guard;
        if !p.ready {
            return;
        }
        follow_experiment(st, p);
        let Some(mut ring) = p.ring.take() else {
            return;
        };
        let t0 = now_ns();
        let n = ring.drain(|bytes| p.process(st, bytes));
        p.ring = Some(ring);
        p.busy_ns += now_ns() - t0;
        p.records += n as u64;
    }
}

/// `--system`: take up the experiment that the leading process started
/// (or ended) in the shared domain, with its target as this process
/// knows it (a line of another binary is no target here).
fn follow_experiment(st: &State, p: &mut Processor) {
    let Some(d) = st.domain else { return };
    if !st.delays.active() {
        p.exp = None;
        return;
    }
    let n = d.experiment.load(Ordering::Acquire);
    if st.seen_experiment.swap(n, Ordering::AcqRel) == n {
        return;
    }
    let g = st.global();
    for t in st.threads.iter() {
        if !t.blocked.load(Ordering::Acquire) {
            t.reset(g);
        }
    }
    p.exp = p.resolve(&d.target()).map(|target| Experiment {
        target,
        start_ns: d.start_ns(now_ns()),
        delay_ns: st.delays.delay(st.cfg.period_ns),
        selected: 0,
        program: 0,
    });
    p.pick = None;
    p.pick_total = 0;
}

/// `bytes` where a record can be read in place (a Python code record is,
/// and needs the 8-byte alignment the ring keeps): a record that came
/// through a `--system` socket, 4-byte aligned after its frame's length,
/// is copied into `buf`.
fn aligned<'a>(bytes: &'a [u8], buf: &'a mut Vec<u64>) -> &'a [u8] {
    if bytes.as_ptr().align_offset(8) == 0 {
        return bytes;
    }
    buf.clear();
    buf.resize(bytes.len().div_ceil(8), 0);
    // SAFETY: the words hold at least bytes.len() bytes, any bytes are u64s.
    let copy =
        unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), bytes.len()) };
    copy.copy_from_slice(bytes);
    copy
}

/// This process's name (its comm, which a forked child may have changed).
fn process_name() -> String {
    std::fs::read_to_string("/proc/self/comm")
        .map(|c| c.trim_end().to_string())
        .unwrap_or_default()
}

/// An address inside this library.
pub fn runtime_address() -> u64 {
    runtime_address as *const () as usize as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarded_calls_work_and_waits_are_the_programs_its_preemptions_are_not() {
        let lock = Forwarding {
            start: 0x100,
            end: 0x140,
            takes_lock: true,
        };
        let w = Some(&lock);
        // The runtime's code itself, innermost: always its own.
        for class in [
            records::CLASS_CPU,
            records::CLASS_LOCK,
            records::CLASS_SCHED,
        ] {
            assert!(runtimes_own(0, w, class), "{class}");
        }
        // Inside libc's lock below the wrapper: spinning, and waiting.
        assert!(!runtimes_own(1, w, records::CLASS_CPU));
        assert!(!runtimes_own(1, w, records::CLASS_LOCK));
        assert!(!runtimes_own(2, None, records::CLASS_IO));
        // Preempted there, or asleep for another reason: the runtime's.
        assert!(runtimes_own(1, w, records::CLASS_SCHED));
        assert!(runtimes_own(1, w, records::CLASS_OTHER));
        // Below the runtime's own functions (a delay's sleep): its own.
        assert!(runtimes_own(1, None, records::CLASS_CPU));
        assert!(runtimes_own(1, None, records::CLASS_SCHED));
    }

    #[test]
    fn a_credit_that_lands_while_its_thread_waits_is_skipped_once() {
        let ms = 1_000_000;
        let st = ThreadState::default();
        let delays = Delays::default();
        let global = &delays.global;
        // The thread blocks with local delay `local` while the global one is
        // `g`, a credit of 2 ms is processed during the wait, then the
        // others add `more`: its local delay once woken.
        let woken = |local: u64, g: u64, more: u64| {
            st.reset(local);
            global.store(g, Ordering::Release);
            st.pre_block.store(g, Ordering::Release);
            st.blocked.store(true, Ordering::Release);
            credit_thread(&st, 2 * ms, &delays, 1);
            let g = global.fetch_add(more, Ordering::AcqRel) + more;
            let pre = st.pre_block.load(Ordering::Acquire);
            st.local.load(Ordering::Acquire) + g.saturating_sub(pre)
        };
        // Even with the others (10 ms): the credit raises the global delay
        // to 12 ms; awake it is even, not 2 ms ahead (which it would
        // publish as a delay of its own), and skips what the others add.
        assert_eq!(woken(10 * ms, 10 * ms, 0), 12 * ms);
        assert_eq!(woken(10 * ms, 10 * ms, 5 * ms), 17 * ms);
        // Behind by 3 ms: the credit pays 2 of them and the global delay
        // does not move; it still owes 1 ms, also when the others add 5 ms.
        assert_eq!(woken(7 * ms, 10 * ms, 0), 9 * ms);
        assert_eq!(woken(7 * ms, 10 * ms, 5 * ms), 14 * ms);
        // Behind by 1 ms: the credit pays it and raises the global by 1 ms.
        assert_eq!(woken(9 * ms, 10 * ms, 5 * ms), 16 * ms);
        // Not waiting: the credit is its local delay's, and published.
        st.blocked.store(false, Ordering::Release);
        st.reset(10 * ms);
        global.store(10 * ms, Ordering::Release);
        st.pre_block.store(10 * ms, Ordering::Release);
        credit_thread(&st, 2 * ms, &delays, 1);
        assert_eq!(st.local.load(Ordering::Acquire), 12 * ms);
        assert_eq!(global.load(Ordering::Acquire), 12 * ms);
        assert_eq!(st.pre_block.load(Ordering::Acquire), 10 * ms);
    }

    #[test]
    fn an_address_forwards_inside_a_wrappers_range_only() {
        let w = |start, end, takes_lock| Forwarding {
            start,
            end,
            takes_lock,
        };
        let ranges = [w(0x100, 0x140, true), w(0x200, 0x210, false)];
        assert_eq!(forwards(&ranges, 0x100), Some(&ranges[0]));
        assert_eq!(forwards(&ranges, 0x13f), Some(&ranges[0]));
        assert_eq!(forwards(&ranges, 0x20f), Some(&ranges[1]));
        for a in [0xff, 0x140, 0x1ff, 0x210, 0] {
            assert_eq!(forwards(&ranges, a), None, "{a:#x}");
        }
        assert_eq!(forwards(&[], 0x100), None);
    }

    /// A code record forwarded over a `--system` socket sits 4 bytes into
    /// its frame: read in place it is refused, copied it is read.
    #[test]
    fn a_code_record_off_its_alignment_is_read_from_a_copy() {
        let mut r = records::PyCodeRec::named(7, 0x1000, "hot", "/srv/app.py", &[]);
        r.hdr.kind = records::REC_PY_CODE;
        r.hdr.size = std::mem::size_of::<records::PyCodeRec>() as u32;
        // SAFETY: a plain record, viewed as its bytes.
        let rec = unsafe {
            std::slice::from_raw_parts(
                (&*r as *const records::PyCodeRec).cast::<u8>(),
                std::mem::size_of::<records::PyCodeRec>(),
            )
        };
        let mut frame = vec![0u64; rec.len().div_ceil(8) + 1];
        // SAFETY: the words hold the record's bytes and 8 more.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(frame.as_mut_ptr().cast::<u8>(), rec.len() + 8)
        };
        bytes[4..4 + rec.len()].copy_from_slice(rec);
        let off = &bytes[4..4 + rec.len()];
        assert!(records::parse(off).is_err());
        let mut buf = Vec::new();
        match records::parse(aligned(off, &mut buf)) {
            Ok(RawRecord::PyCode(c)) => assert_eq!((c.pid, c.name()), (7, "hot".to_string())),
            other => panic!("{other:?}"),
        }
        // In place when it can be.
        assert_eq!(aligned(rec, &mut buf).as_ptr(), rec.as_ptr());
    }
}
