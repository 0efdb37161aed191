//! Turns what the recorder captured into trace records: user stacks are
//! unwound while the target's files are at hand, frames are normalized to
//! (file, offset), stacks are deduplicated, threads get their names.

use crate::goroutines::{waited_on, Goroutines};
use crate::jit::{JitFrames, JIT_DSO};
use crate::python::{PythonFrames, PYTHON_DSO};
use holdup_bpf::perf::AddressEvent;
use holdup_bpf::records::{self as raw, c_str, RawRecord};
use holdup_symbolize::{AddressSpaces, Mapping, Unwinder};
use holdup_trace::fxhash::{FxHashMap, FxHashSet};
use holdup_trace::{
    self as trace, Class, DsoId, Frame, Record, StackId, Waker, KERNEL_DSO, UNKNOWN_DSO,
};
use std::collections::{HashMap, VecDeque};
use std::io::Write;

/// What a recording produced, for the closing status line.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    pub cpu_samples: u64,
    pub blocked_samples: u64,
    pub blocked_weight: u64,
    pub segments: u64,
    pub bios: u64,
    pub syscalls: u64,
    pub go_waits: u64,
}

/// The converter: the recorder's raw records in, trace records out to
/// `writer`, with the state that needs (address spaces, interned stacks
/// and files, thread names).
pub struct Converter<W: Write> {
    pub writer: trace::Writer<W>,
    spaces: AddressSpaces,
    unwinder: Unwinder,
    /// (path, build-id) → dso id, and the reverse for the final symbolization.
    dso_ids: HashMap<(String, Option<Vec<u8>>), DsoId>,
    pub dsos: Vec<(DsoId, String, Option<Vec<u8>>)>,
    /// (pid, mapping start) → dso (and whether it is generated code), so
    /// that most frames need no string hashing; cleared whenever mappings
    /// change.
    mapping_dsos: FxHashMap<(u32, u64), (DsoId, bool)>,
    stack_ids: FxHashMap<Vec<Frame>, StackId>,
    /// The next stack's id: ids are never reused, also after
    /// [`Converter::forget_stacks`].
    next_stack: StackId,
    /// (process layout, address, exact) → frame: the same few return
    /// addresses come back in every sample, and finding their mapping in a
    /// process of many was the drainer's largest cost on a storm of forked
    /// processes. Layouts are the unwinder's (never reused for another).
    user_frames: FxHashMap<(u64, u64, bool), Frame>,
    /// Threads named in the trace (looked up at every record).
    named: FxHashSet<u32>,
    /// Address-space events not yet applied: applied in time order with the
    /// records, so that a sample sees the mappings of its own time.
    address_events: VecDeque<AddressEvent>,
    /// Collected since the last sort.
    fresh_events: Vec<AddressEvent>,
    /// Generated code, per process.
    pub jit: JitFrames,
    /// Interpreter frames, per process.
    pub python: PythonFrames,
    /// Go processes whose goroutines are followed.
    pub goroutines: Goroutines,
    /// Evaluator ranges by dso, as the dso's path gave them (none: not an
    /// interpreter).
    evaluators: FxHashMap<DsoId, Vec<std::ops::Range<u64>>>,
    /// A sample's native user frames and interpreter frames spliced.
    spliced: Vec<Frame>,
    pub counts: Counts,
    frames: Vec<Frame>,
    /// A sample's frame-pointer chain and user return addresses, kept
    /// between samples so that converting one allocates nothing.
    chain: Vec<(u64, u64)>,
    user: Vec<u64>,
    /// Per thread, the stack of its next system call record: (start, stack).
    syscall_stacks: FxHashMap<u32, (u64, StackId)>,
    /// Per thread, the stack of its last on-CPU sample: where the points of
    /// its exit tail go (see `sample`).
    last_cpu_stacks: FxHashMap<u32, StackId>,
    /// The recorder's table of wakers' stacks (none in tests), and the
    /// trace stack of each (kernel id, user id, process) looked up.
    waker_stacks: Option<holdup_bpf::WakerStacks>,
    waker_stack_ids: FxHashMap<(u32, u32, u32), StackId>,
    /// Per thread, the user stack of its last waker, by the number its
    /// blocked sample names it by (see `raw::WAKER_USTACK_REC`).
    waker_ustacks: FxHashMap<u32, (u32, Vec<Frame>)>,
    /// A copy of the vDSO: it is no file on disk, but unwinding through it
    /// needs its CFI and reports need its symbols. Every process of a
    /// kernel maps the same image, so the recorder's own one is used.
    vdso: Option<VdsoCopy>,
}

const VDSO: &str = "[vdso]";

/// Frames remembered at most (see `Converter::user_frames`).
const USER_FRAMES_MAX: usize = 1 << 16;

/// The copy is an anonymous memory file (memfd), read through its
/// /proc/self/fd path: nothing is written to a shared directory, and
/// nothing is left behind, whatever ends the recording.
struct VdsoCopy {
    path: std::path::PathBuf,
    _file: std::fs::File,
}

impl VdsoCopy {
    fn new() -> Option<Self> {
        use std::os::fd::FromRawFd;
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        let line = maps.lines().find(|l| l.ends_with(VDSO))?;
        let (range, _) = line.split_once(' ')?;
        let (a, b) = range.split_once('-')?;
        let start = u64::from_str_radix(a, 16).ok()?;
        let end = u64::from_str_radix(b, 16).ok()?;
        // SAFETY: the range is our own vDSO mapping, readable for the life
        // of the process.
        let image =
            unsafe { std::slice::from_raw_parts(start as *const u8, (end - start) as usize) };
        // Close-on-exec: the recorded command must not inherit it.
        let fd = unsafe { libc::memfd_create(c"holdup-vdso".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: a new fd that nothing else owns.
        let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
        file.write_all(image).ok()?;
        Some(Self {
            path: format!("/proc/self/fd/{fd}").into(),
            _file: file,
        })
    }
}

fn adjust(addr: u64, exact: bool) -> u64 {
    if exact {
        addr
    } else {
        addr.saturating_sub(1)
    }
}

fn waker(kind: u8, id: u32) -> Waker {
    match kind {
        raw::WAKER_THREAD => Waker::Thread(id),
        raw::WAKER_IRQ => Waker::Irq(id),
        raw::WAKER_SOFTIRQ => Waker::Softirq(id),
        raw::WAKER_TIMER => Waker::Timer,
        _ => Waker::None,
    }
}

/// The CPU an interval ended on; none for one still open at the end.
fn cpu(v: u16) -> Option<u16> {
    (v != raw::CPU_OPEN).then_some(v)
}

fn class(v: u8) -> Class {
    Class::from_u8(v).unwrap_or(Class::Other)
}

impl<W: Write> Converter<W> {
    pub fn new(writer: trace::Writer<W>) -> Self {
        Self {
            writer,
            spaces: AddressSpaces::new(),
            unwinder: Unwinder::new(),
            dso_ids: HashMap::new(),
            dsos: Vec::new(),
            mapping_dsos: FxHashMap::default(),
            stack_ids: FxHashMap::default(),
            next_stack: 1,
            user_frames: FxHashMap::default(),
            named: FxHashSet::default(),
            address_events: VecDeque::new(),
            fresh_events: Vec::new(),
            jit: JitFrames::default(),
            python: PythonFrames::default(),
            goroutines: Goroutines::default(),
            evaluators: FxHashMap::default(),
            spliced: Vec::new(),
            counts: Counts::default(),
            frames: Vec::new(),
            chain: Vec::new(),
            user: Vec::new(),
            syscall_stacks: FxHashMap::default(),
            last_cpu_stacks: FxHashMap::default(),
            waker_stacks: None,
            waker_stack_ids: FxHashMap::default(),
            waker_ustacks: FxHashMap::default(),
            vdso: VdsoCopy::new(),
        }
    }

    /// Where the wakers' stacks that blocked samples name are read.
    pub fn set_waker_stacks(&mut self, stacks: Option<holdup_bpf::WakerStacks>) {
        self.waker_stacks = stacks;
    }

    /// The waker's stack at the wakeup of a blocked sample, as a trace
    /// stack: its kernel frames, then its user frames in its own process,
    /// from the table or from the record of the wakeup. A table entry never
    /// changes once made, so each is looked up once.
    fn waker_stack(&mut self, r: &raw::SampleRec) -> std::io::Result<StackId> {
        let key = (r.waker_kstack, r.waker_ustack, r.waker_pid);
        let from_record = r.waker_ustack & raw::WAKER_USTACK_REC != 0;
        // A record older than the sample is another wakeup's.
        let user = match self.waker_ustacks.remove(&r.tid) {
            Some((n, frames)) if from_record && n == r.waker_ustack => Some(frames),
            _ => None,
        };
        if key.0 == 0 && user.is_none() && (key.1 == 0 || from_record) {
            return Ok(0);
        }
        if !from_record {
            if let Some(&id) = self.waker_stack_ids.get(&key) {
                return Ok(id);
            }
        }
        let table = self.waker_stacks.as_ref();
        let kernel = table.and_then(|t| t.get(r.waker_kstack));
        self.frames.clear();
        self.frames
            .extend(kernel.unwrap_or_default().iter().map(|&a| Frame {
                dso: KERNEL_DSO,
                addr: adjust(a, false),
            }));
        if let Some(mut frames) = user {
            self.frames.append(&mut frames);
        } else if !from_record {
            let Some(table) = &self.waker_stacks else {
                return Ok(0);
            };
            let user = table.get(r.waker_ustack).unwrap_or_default();
            for (i, &a) in user.iter().enumerate() {
                let f = self.frame_in_mapping(r.waker_pid, a, i == 0)?;
                self.frames.push(f);
            }
        }
        let id = self.stack_id()?;
        if !from_record {
            self.waker_stack_ids.insert(key, id);
        }
        Ok(id)
    }

    /// Read the mappings of a process that exists already (-p, -a).
    pub fn load_existing(&mut self, pid: u32) {
        self.mapping_dsos.clear();
        if self.spaces.load_proc_maps(pid).is_err() {
            return;
        }
        if let Some(copy) = &self.vdso {
            let maps: Vec<Mapping> = self
                .spaces
                .mappings(pid)
                .iter()
                .cloned()
                .map(|mut m| {
                    if m.path == VDSO {
                        m.path = copy.path.display().to_string();
                    }
                    m
                })
                .collect();
            self.spaces.set_mappings(pid, maps);
        }
        for m in self.spaces.mappings(pid) {
            self.jit.maps.mapped(pid, &m.path);
            self.python.mapped(pid, &m.path, m.start, m.file_offset);
        }
    }

    /// Name the threads of a process that exists already.
    pub fn name_existing(&mut self, pid: u32, time: u64) -> std::io::Result<()> {
        let dir = format!("/proc/{pid}/task");
        for entry in std::fs::read_dir(dir)?.flatten() {
            if let Ok(tid) = entry.file_name().to_string_lossy().parse::<u32>() {
                self.name(pid, tid, time, None)?;
            }
        }
        Ok(())
    }

    pub fn queue_address_event(&mut self, ev: AddressEvent) {
        self.fresh_events.push(ev);
    }

    /// Sort the queued address events (they come per CPU).
    pub fn sort_address_events(&mut self) {
        self.fresh_events.sort_by_key(AddressEvent::time);
        for ev in &self.fresh_events {
            self.jit.note(ev);
            self.python.note(ev);
            self.goroutines.note(ev);
        }
        self.address_events.extend(self.fresh_events.drain(..));
        self.address_events
            .make_contiguous()
            .sort_by_key(AddressEvent::time);
    }

    fn apply_address_events(&mut self, until: u64) {
        while let Some(ev) = self.address_events.front() {
            if ev.time() > until {
                break;
            }
            self.mapping_dsos.clear();
            match self.address_events.pop_front().unwrap() {
                AddressEvent::Mmap(m) => {
                    let path = match (&self.vdso, m.path.as_str()) {
                        (Some(copy), VDSO) => copy.path.display().to_string(),
                        _ => m.path,
                    };
                    self.spaces.add_mapping(
                        m.pid,
                        Mapping {
                            start: m.start,
                            end: m.start + m.len,
                            file_offset: m.pgoff,
                            path,
                            build_id: m.build_id,
                        },
                    )
                }
                AddressEvent::Exec { pid, .. } => {
                    self.spaces.exec(pid);
                    self.jit.exec(pid);
                }
            }
        }
    }

    /// Apply every queued address event (end of a drain).
    pub fn apply_all_address_events(&mut self) {
        self.apply_address_events(u64::MAX);
    }

    /// Give a thread its name the first time it appears.
    fn name(
        &mut self,
        pid: u32,
        tid: u32,
        time: u64,
        known: Option<String>,
    ) -> std::io::Result<()> {
        if !self.named.insert(tid) {
            return Ok(());
        }
        let comm = known
            .or_else(|| std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok())
            .map(|c| c.trim_end().to_string())
            .unwrap_or_default();
        self.writer.write(&Record::Comm {
            time,
            pid,
            tid,
            comm,
        })
    }

    /// A thread's (new) name.
    fn rename(&mut self, pid: u32, tid: u32, time: u64, comm: &[u8]) -> std::io::Result<()> {
        self.named.insert(tid);
        self.writer.write(&Record::Comm {
            time,
            pid,
            tid,
            comm: c_str(comm),
        })
    }

    fn dso(&mut self, path: &str, build_id: &Option<Vec<u8>>) -> std::io::Result<DsoId> {
        let key = (path.to_string(), build_id.clone());
        if let Some(&id) = self.dso_ids.get(&key) {
            return Ok(id);
        }
        let id = self.new_dso(path, build_id)?;
        self.dso_ids.insert(key, id);
        Ok(id)
    }

    /// The dso of `pid`'s generated code: one per process (its addresses
    /// mean nothing in another).
    fn jit_dso(&mut self, pid: u32) -> std::io::Result<DsoId> {
        if let Some(id) = self.jit.dso_of(pid) {
            return Ok(id);
        }
        let id = self.new_dso(JIT_DSO, &None)?;
        self.jit.add(pid, id);
        let paths = self.spaces.mappings(pid).iter().map(|m| m.path.as_str());
        self.jit.maps.want(pid, paths);
        Ok(id)
    }

    /// The dso of `pid`'s interpreter frames: one per process.
    fn python_dso(&mut self, pid: u32) -> std::io::Result<DsoId> {
        if let Some(id) = self.python.dso_of(pid) {
            return Ok(id);
        }
        let id = self.new_dso(PYTHON_DSO, &None)?;
        self.python.add_dso(pid, id);
        Ok(id)
    }

    /// Whether `f` is a native frame of an interpreter's evaluator.
    fn is_evaluator(&mut self, f: &Frame) -> bool {
        let ranges = self.evaluators.entry(f.dso).or_insert_with(|| {
            let path = self.dsos.get((f.dso as usize).wrapping_sub(1));
            path.and_then(|(_, p, _)| self.python.evaluator(p))
                .map(<[_]>::to_vec)
                .unwrap_or_default()
        });
        ranges.iter().any(|r| r.contains(&f.addr))
    }

    /// The sample's interpreter frames in place of the evaluator's native
    /// frames among the user frames from `user_from` on.
    fn splice_python(&mut self, s: &raw::RawSample<'_>, user_from: usize) -> std::io::Result<()> {
        let pid = s.rec.pid;
        let dso = self.python_dso(pid)?;
        let groups = self.python.groups(pid, dso, s.python());
        let native = self.frames.split_off(user_from.min(self.frames.len()));
        let evaluator: Vec<bool> = native.iter().map(|f| self.is_evaluator(f)).collect();
        self.spliced.clear();
        let done = holdup_symbolize::python::splice::splice(
            &native,
            &evaluator,
            &groups,
            &mut self.spliced,
        );
        self.python.spliced.placed += done.placed;
        self.python.spliced.past_native += done.past_native;
        self.python.spliced.unmatched += done.unmatched;
        self.frames.append(&mut self.spliced);
        Ok(())
    }

    fn new_dso(&mut self, path: &str, build_id: &Option<Vec<u8>>) -> std::io::Result<DsoId> {
        // Ids start at 1: 0 is the kernel.
        let id = self.dsos.len() as DsoId + 1;
        self.dsos.push((id, path.to_string(), build_id.clone()));
        let shown = match &self.vdso {
            Some(copy) if copy.path.to_str() == Some(path) => VDSO,
            _ => path,
        };
        self.writer.write(&Record::Dso(trace::Dso {
            id,
            path: shown.to_string(),
            build_id: build_id.clone(),
        }))?;
        Ok(id)
    }

    /// The frame of a user address of `pid`, whose process layout (the
    /// unwinder's) is `layout`: remembered by layout, since the same few
    /// return addresses come back in every sample.
    fn user_frame(
        &mut self,
        pid: u32,
        layout: Option<u64>,
        addr: u64,
        exact: bool,
    ) -> std::io::Result<Frame> {
        if let Some(&f) = layout.and_then(|l| self.user_frames.get(&(l, addr, exact))) {
            return Ok(f);
        }
        let f = self.frame_in_mapping(pid, addr, exact)?;
        if let Some(l) = layout {
            if self.user_frames.len() >= USER_FRAMES_MAX {
                self.user_frames.clear();
            }
            self.user_frames.insert((l, addr, exact), f);
        }
        Ok(f)
    }

    fn frame_in_mapping(&mut self, pid: u32, addr: u64, exact: bool) -> std::io::Result<Frame> {
        let a = adjust(addr, exact);
        let Some(m) = self.spaces.find(pid, addr) else {
            return Ok(Frame {
                dso: UNKNOWN_DSO,
                addr: a,
            });
        };
        let offset = a - m.start + m.file_offset;
        let (dso, jit) = match self.mapping_dsos.get(&(pid, m.start)) {
            Some(&d) => d,
            None => {
                let (start, path, build_id) = (m.start, m.path.clone(), m.build_id.clone());
                let d = if holdup_symbolize::jit::is_anonymous(&path) {
                    (self.jit_dso(pid)?, true)
                } else {
                    (self.dso(&path, &build_id)?, false)
                };
                self.mapping_dsos.insert((pid, start), d);
                d
            }
        };
        // Generated code is named by its address in the process.
        let addr = if jit { a } else { offset };
        Ok(Frame { dso, addr })
    }

    fn stack_id(&mut self) -> std::io::Result<StackId> {
        if self.frames.is_empty() {
            return Ok(0);
        }
        if let Some(&id) = self.stack_ids.get(&self.frames) {
            return Ok(id);
        }
        let id = self.next_stack;
        self.next_stack += 1;
        self.stack_ids.insert(self.frames.clone(), id);
        self.writer.write(&Record::Stack(trace::Stack {
            id,
            frames: self.frames.clone(),
        }))?;
        Ok(id)
    }

    /// The kernel and user stack of a sample-shaped record, deduplicated.
    fn sample_stack(&mut self, s: &raw::RawSample<'_>) -> std::io::Result<StackId> {
        let r = &s.rec;
        self.frames.clear();
        let leaf_is_ip = r.flags & raw::SF_KSTACK_LEAF_IS_IP != 0;
        for (i, a) in s.kstack().enumerate() {
            self.frames.push(Frame {
                dso: KERNEL_DSO,
                addr: adjust(a, i == 0 && leaf_is_ip),
            });
        }
        self.push_user_frames(s)?;
        if r.py_len > 0 {
            self.splice_python(s, s.rec.kstack_len as usize)?;
        }
        self.stack_id()
    }

    /// The user frames of a sample-shaped record, unwound, onto `frames`.
    fn push_user_frames(&mut self, s: &raw::RawSample<'_>) -> std::io::Result<()> {
        let r = &s.rec;
        if r.flags & raw::SF_USER_REGS == 0 {
            return Ok(());
        }
        s.fp_chain_into(&mut self.chain);
        let mut user = std::mem::take(&mut self.user);
        self.unwinder
            .unwind_into(&self.spaces, r.pid, &s.user_stack(&self.chain), &mut user);
        let layout = self.unwinder.layout(r.pid);
        for (i, &a) in user.iter().enumerate() {
            let f = self.user_frame(r.pid, layout, a, i == 0)?;
            self.frames.push(f);
        }
        self.user = user;
        Ok(())
    }

    /// A waker's user stack at its wakeup of a thread, kept for that
    /// thread's blocked sample, which comes after it.
    fn waker_ustack(&mut self, s: &raw::RawSample<'_>) -> std::io::Result<()> {
        self.frames.clear();
        self.push_user_frames(s)?;
        let frames = std::mem::take(&mut self.frames);
        self.waker_ustacks
            .insert(s.rec.waker_id, (s.rec.waker_ustack, frames));
        Ok(())
    }

    fn sample(&mut self, s: &raw::RawSample<'_>) -> std::io::Result<()> {
        let r = &s.rec;
        let class = class(r.class);
        // A blocked sample stands for its interval's wait segment too.
        if r.flags & raw::SF_SEGMENT != 0 {
            self.segment(trace::Segment {
                pid: r.pid,
                tid: r.tid,
                start: r.start,
                wake: r.wake,
                end: r.end,
                class,
                waker: waker(r.waker_kind, r.waker_id),
                cpu: cpu(r.cpu),
            })?;
        }
        self.name(r.pid, r.tid, r.end, None)?;
        // A thread that exits takes with it the CPU time no on-CPU sample
        // found it running: hundreds of short-lived processes that each ran
        // for less than a period at a time put a quarter of a storm's
        // on-CPU points there. Its stack at the exit is not where that time
        // went; its last on-CPU sample is the best place known. A thread
        // never sampled keeps its exit stack (user frames only).
        let exit_tail = r.flags & raw::SF_EXIT_TAIL != 0;
        let last = exit_tail
            .then(|| self.last_cpu_stacks.get(&r.tid).copied())
            .flatten();
        let stack = match last {
            Some(id) => id,
            None => self.sample_stack(s)?,
        };
        if class == Class::Cpu && !exit_tail {
            self.last_cpu_stacks.insert(r.tid, stack);
        }
        let waker_stack = match class {
            Class::Cpu => 0,
            _ => self.waker_stack(r)?,
        };
        if class == Class::Cpu {
            self.counts.cpu_samples += 1;
        } else {
            self.counts.blocked_samples += 1;
            self.counts.blocked_weight += (r.weight + r.sched_weight) as u64;
        }
        self.writer.write(&Record::Sample(trace::Sample {
            time: r.start,
            wake: r.wake,
            end: r.end,
            pid: r.pid,
            tid: r.tid,
            cpu: r.cpu,
            class,
            weight: r.weight,
            sched_weight: r.sched_weight,
            waker: waker(r.waker_kind, r.waker_id),
            stack,
            late_user_stack: r.flags & raw::SF_LATE_USTACK != 0
                || (class != Class::Cpu && r.flags & raw::SF_USER_REGS == 0),
            waker_stack,
        }))
    }

    /// A goroutine's wait, with its own stack where it parked (return
    /// addresses all: the first is where gopark called into the scheduler).
    fn go_wait(&mut self, g: &raw::GoWait<'_>) -> std::io::Result<()> {
        self.frames.clear();
        for a in g.stack() {
            let f = self.frame_in_mapping(g.pid, a, false)?;
            self.frames.push(f);
        }
        let stack = self.stack_id()?;
        self.counts.go_waits += 1;
        self.writer.write(&Record::GoWait(trace::GoWait {
            time: g.start,
            wake: g.wake,
            end: g.end,
            pid: g.pid,
            tid: g.tid,
            goid: g.goid,
            reason: self.goroutines.reason(g.pid, g.reason),
            weight: g.weight,
            sched_weight: g.sched_weight,
            waker_goid: g.waker_goid,
            waker_tid: g.waker_tid,
            stack,
            waited_on: g.fd.map(|fd| waited_on(g.pid, fd)),
        }))
    }

    fn segment(&mut self, s: trace::Segment) -> std::io::Result<()> {
        self.counts.segments += 1;
        self.name(s.pid, s.tid, s.end, None)?;
        self.writer.write(&Record::Segment(s))
    }

    /// Convert one ring-buffer record.
    pub fn record(&mut self, rec: &RawRecord<'_>) -> std::io::Result<()> {
        let time = match rec {
            RawRecord::Sample(s) => s.rec.end,
            RawRecord::Segment(s) => s.end,
            RawRecord::Fork(f) => f.time,
            RawRecord::Exec(e) => e.time,
            RawRecord::Comm(c) | RawRecord::Exit(c) => c.time,
            RawRecord::BioIssue(b) | RawRecord::BioDone(b) => b.time,
            RawRecord::SyscallStack(s) | RawRecord::WakerUstack(s) => s.rec.end,
            RawRecord::Syscall(c) => c.end,
            RawRecord::PyCode(c) => {
                self.python.code(c);
                return Ok(());
            }
            RawRecord::GoWait(g) => g.end,
        };
        self.apply_address_events(time);
        match rec {
            RawRecord::Sample(s) => self.sample(s),
            RawRecord::Segment(s) => self.segment(trace::Segment {
                pid: s.pid,
                tid: s.tid,
                start: s.start,
                wake: s.wake,
                end: s.end,
                class: class(s.class),
                waker: waker(s.waker_kind, s.waker_id),
                cpu: cpu(s.cpu),
            }),
            RawRecord::Fork(f) => {
                if f.pid != f.parent_pid {
                    self.spaces.fork(f.parent_pid, f.pid);
                    self.python.fork(f);
                    // The pid may be a reused one.
                    self.mapping_dsos.clear();
                }
                self.writer.write(&Record::Fork {
                    time: f.time,
                    parent_pid: f.parent_pid,
                    parent_tid: f.parent_tid,
                    pid: f.pid,
                    tid: f.tid,
                })?;
                self.name(f.pid, f.tid, f.time, Some(c_str(&f.comm)))
            }
            RawRecord::Exec(e) => {
                self.writer.write(&Record::Exec {
                    time: e.time,
                    pid: e.pid,
                    tid: e.tid,
                    filename: c_str(&e.filename),
                })?;
                self.rename(e.pid, e.tid, e.time, &e.comm)
            }
            RawRecord::Comm(c) => self.rename(c.pid, c.tid, c.time, &c.comm),
            RawRecord::Exit(c) => {
                self.last_cpu_stacks.remove(&c.tid);
                self.waker_ustacks.remove(&c.tid);
                self.name(c.pid, c.tid, c.time, Some(c_str(&c.comm)))?;
                self.writer.write(&Record::Exit {
                    time: c.time,
                    pid: c.pid,
                    tid: c.tid,
                })
            }
            RawRecord::BioIssue(b) => {
                self.counts.bios += 1;
                self.writer.write(&Record::BioIssue(bio(b)))
            }
            RawRecord::BioDone(b) => self.writer.write(&Record::BioDone(bio(b))),
            RawRecord::SyscallStack(s) => {
                let stack = self.sample_stack(s)?;
                self.syscall_stacks.insert(s.rec.tid, (s.rec.start, stack));
                Ok(())
            }
            RawRecord::WakerUstack(s) => self.waker_ustack(s),
            RawRecord::Syscall(c) => {
                self.counts.syscalls += 1;
                self.name(c.pid, c.tid, c.end, None)?;
                // The stack record came first, unless it was lost.
                let stack = match self.syscall_stacks.remove(&c.tid) {
                    Some((start, id)) if start == c.start => id,
                    _ => 0,
                };
                self.writer.write(&Record::Syscall(trace::Syscall {
                    time: c.start,
                    end: c.end,
                    pid: c.pid,
                    tid: c.tid,
                    nr: c.nr,
                    blocked: c.blocked,
                    sleeps: c.sleeps,
                    min_flt: c.min_flt,
                    maj_flt: c.maj_flt,
                    waker: waker(c.waker_kind, c.waker_id),
                    stack,
                    sampled: c.sampled != 0,
                }))
            }
            RawRecord::PyCode(_) => Ok(()),
            RawRecord::GoWait(g) => self.go_wait(g),
        }
    }

    /// How the user stacks were unwound.
    pub fn unwind_stats(&self) -> holdup_symbolize::UnwindStats {
        self.unwinder.stats()
    }

    /// Files the unwinder refused to read, with why.
    pub fn refused_files(&self) -> Vec<(String, String)> {
        let refused = self.unwinder.refused_files();
        refused
            .iter()
            .map(|(p, w)| (p.clone(), w.clone()))
            .collect()
    }

    /// Every distinct frame of every stack written, for the final symbolization.
    pub fn frames(&self) -> impl Iterator<Item = &Frame> {
        self.stack_ids.keys().flatten()
    }

    /// Stacks interned now, and ever.
    pub fn stacks_held(&self) -> usize {
        self.stack_ids.len()
    }

    pub fn stacks_made(&self) -> u64 {
        u64::from(self.next_stack - 1)
    }

    /// Forget the stacks `gone`: a stack met again is given a new id (and
    /// written again). Nothing kept here names them after this.
    pub fn forget_stacks(&mut self, gone: &FxHashSet<StackId>) {
        self.stack_ids.retain(|_, id| !gone.contains(id));
        self.waker_stack_ids.retain(|_, id| !gone.contains(id));
        self.last_cpu_stacks.retain(|_, id| !gone.contains(id));
        self.syscall_stacks.retain(|_, (_, id)| !gone.contains(id));
    }

    /// Forget the processes `pids` and threads `tids` that exited: their
    /// address spaces (the unwinder then drops what it made for them), and
    /// what the threads' next records would have used.
    pub fn forget_exited(&mut self, pids: &[u32], tids: &[u32]) {
        for &pid in pids {
            self.spaces.exit(pid);
        }
        if !pids.is_empty() {
            self.mapping_dsos.clear();
        }
        for tid in tids {
            self.named.remove(tid);
            self.syscall_stacks.remove(tid);
            self.last_cpu_stacks.remove(tid);
            self.waker_ustacks.remove(tid);
        }
    }

    /// Processes whose address space is known.
    pub fn processes_held(&self) -> usize {
        self.spaces.pids().count()
    }

    /// The files the processes whose address space is known map.
    pub fn mapped_files(&self) -> FxHashSet<&str> {
        self.spaces
            .pids()
            .flat_map(|p| self.spaces.mappings(p))
            .map(|m| m.path.as_str())
            .collect()
    }

    /// Processes whose address space is known, none of `live`, that no
    /// longer exist: mapping events come from every process, also those a
    /// cgroup or pid filter leaves out, whose exits the trace never sees.
    pub fn processes_gone(&self, live: &FxHashSet<u32>) -> Vec<u32> {
        self.spaces
            .pids()
            .filter(|p| !live.contains(p))
            .filter(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
            .collect()
    }
}

fn bio(b: &raw::BioRec) -> trace::Bio {
    trace::Bio {
        time: b.time,
        dev: b.dev,
        sector: b.sector,
        bytes: b.bytes,
        op: trace::BioOp::from_u8(b.op),
        pid: b.pid,
        tid: b.tid,
        tracked: b.tracked != 0,
        error: b.error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw blocked sample of thread 8 of process 7 (kernel stack only):
    /// [1 ms, 3 ms) in I/O, then runnable until 4 ms, switched in on CPU 1.
    fn raw_blocked_sample(flags: u16) -> Vec<u8> {
        let base = std::mem::size_of::<raw::SampleRec>();
        let sample = raw::SampleRec {
            hdr: raw::RecHdr {
                kind: raw::REC_SAMPLE,
                size: (base + 16) as u32,
            },
            pid: 7,
            tid: 8,
            start: 1_000,
            wake: 3_000_000,
            end: 4_000_000,
            weight: 3,
            sched_weight: 1,
            waker_id: 9,
            cpu: 1,
            class: raw::CLASS_IO,
            waker_kind: raw::WAKER_THREAD,
            flags,
            kstack_len: 2,
            ..Default::default()
        };
        let mut bytes = vec![0u8; sample.hdr.size as usize];
        unsafe { std::ptr::write_unaligned(bytes.as_mut_ptr() as *mut raw::SampleRec, sample) };
        bytes[base..base + 8].copy_from_slice(&0xffff_ffff_8100_0010u64.to_ne_bytes());
        bytes[base + 8..base + 16].copy_from_slice(&0xffff_ffff_8100_0020u64.to_ne_bytes());
        bytes
    }

    /// The trace the converter makes of raw records.
    fn convert(records: &[&[u8]]) -> (Counts, trace::Trace) {
        let writer = trace::Writer::new(Vec::new(), &trace::Header::default(), 0).unwrap();
        let mut d = Converter::new(writer);
        for bytes in records {
            d.record(&raw::parse(bytes).unwrap()).unwrap();
        }
        let counts = d.counts;
        let out = d.writer.finish().unwrap();
        let mut reader = trace::Reader::new(&out[..], "replay").unwrap();
        (counts, trace::Trace::read(&mut reader).unwrap())
    }

    /// Raw recorder records, as the ring buffer holds them, replayed
    /// through the converter: a blocked sample (kernel stack only) and the
    /// wait segment of the same interval.
    #[test]
    fn raw_records_become_trace_records() {
        let segment = raw::SegmentRec {
            hdr: raw::RecHdr {
                kind: raw::REC_SEGMENT,
                size: std::mem::size_of::<raw::SegmentRec>() as u32,
            },
            pid: 7,
            tid: 8,
            start: 1_000,
            wake: 3_000_000,
            end: 4_000_000,
            waker_id: 9,
            cpu: raw::CPU_OPEN,
            class: raw::CLASS_IO,
            waker_kind: raw::WAKER_THREAD,
        };
        let seg_bytes = unsafe {
            std::slice::from_raw_parts(
                &segment as *const raw::SegmentRec as *const u8,
                std::mem::size_of::<raw::SegmentRec>(),
            )
        };

        let (counts, t) = convert(&[&raw_blocked_sample(0), seg_bytes]);
        assert_eq!(counts.blocked_samples, 1);
        assert_eq!(counts.blocked_weight, 4);
        assert_eq!(counts.segments, 1);
        let s = &t.samples[0];
        assert_eq!((s.pid, s.tid, s.class), (7, 8, Class::Io));
        assert_eq!(
            (s.weight, s.sched_weight, s.waker),
            (3, 1, Waker::Thread(9))
        );
        assert!(
            s.late_user_stack,
            "no user registers: the user stack is missing"
        );
        // Return addresses point after the call: looked up one byte before.
        let frames: Vec<u64> = t.stacks[&s.stack].iter().map(|f| f.addr).collect();
        assert_eq!(frames, vec![0xffff_ffff_8100_000f, 0xffff_ffff_8100_001f]);
        assert!(t.stacks[&s.stack].iter().all(|f| f.dso == KERNEL_DSO));
        let seg = &t.segments[0];
        assert_eq!(
            (seg.start, seg.wake, seg.end, seg.cpu),
            (1_000, 3_000_000, 4_000_000, None)
        );
        assert_eq!(t.threads.len(), 1, "the thread is named once");
    }

    /// A blocked sample that carries its interval's wait segment (the
    /// recorder writes no segment record then) becomes both.
    #[test]
    fn a_sample_that_carries_its_segment_becomes_both() {
        let (counts, t) = convert(&[&raw_blocked_sample(raw::SF_SEGMENT)]);
        assert_eq!((counts.blocked_samples, counts.segments), (1, 1));
        assert_eq!(t.samples.len(), 1);
        let seg = &t.segments[..];
        assert_eq!(seg.len(), 1);
        assert_eq!(
            (seg[0].pid, seg[0].tid, seg[0].class, seg[0].waker),
            (7, 8, Class::Io, Waker::Thread(9))
        );
        assert_eq!(
            (seg[0].start, seg[0].wake, seg[0].end, seg[0].cpu),
            (1_000, 3_000_000, 4_000_000, Some(1))
        );
        // Without the flag, the sample is a sample only.
        let (counts, t) = convert(&[&raw_blocked_sample(0)]);
        assert_eq!((counts.blocked_samples, counts.segments), (1, 0));
        assert!(t.segments.is_empty());
    }

    /// A raw on-CPU sample of thread `tid` with kernel frames `kstack`.
    fn raw_cpu_sample(tid: u32, flags: u16, kstack: &[u64]) -> Vec<u8> {
        let base = std::mem::size_of::<raw::SampleRec>();
        let rec = raw::SampleRec {
            hdr: raw::RecHdr {
                kind: raw::REC_SAMPLE,
                size: (base + 8 * kstack.len()) as u32,
            },
            pid: 7,
            tid,
            start: 5_000_000,
            end: 5_000_000,
            weight: 2,
            class: raw::CLASS_CPU,
            flags,
            kstack_len: kstack.len() as u16,
            ..Default::default()
        };
        let mut bytes = vec![0u8; rec.hdr.size as usize];
        unsafe { std::ptr::write_unaligned(bytes.as_mut_ptr() as *mut raw::SampleRec, rec) };
        for (i, a) in kstack.iter().enumerate() {
            bytes[base + 8 * i..base + 8 * i + 8].copy_from_slice(&a.to_ne_bytes());
        }
        bytes
    }

    /// The points a thread's exit leaves go where its last on-CPU sample
    /// was; a thread never sampled keeps the stack of its exit tail.
    #[test]
    fn an_exit_tail_takes_the_stack_of_the_last_on_cpu_sample() {
        let (work, exit) = (0xffff_ffff_8100_0010u64, 0xffff_ffff_8200_0010u64);
        let records: Vec<Vec<u8>> = [
            (8, 0, work),
            (8, raw::SF_EXIT_TAIL, exit),
            (9, raw::SF_EXIT_TAIL, exit),
        ]
        .iter()
        .map(|&(tid, flags, at)| raw_cpu_sample(tid, flags, &[at]))
        .collect();
        let (_, t) = convert(&records.iter().map(Vec::as_slice).collect::<Vec<_>>());
        let leaf = |i: usize| t.stacks[&t.samples[i].stack][0].addr;
        assert_eq!(t.samples.len(), 3);
        assert_eq!(leaf(1), leaf(0), "thread 8's tail goes to its last sample");
        assert_eq!(t.samples[1].weight, 2);
        assert_eq!(leaf(2), exit - 1, "thread 9 was never sampled");
    }

    /// A raw record of the user stack thread 9 had when it woke thread 8,
    /// numbered `n`: registers only, its leaf at `ip`.
    fn raw_waker_ustack(n: u32, ip: u64) -> Vec<u8> {
        let mut rec = raw::SampleRec {
            pid: 7,
            tid: 9,
            end: 3_000_000,
            ip,
            sp: 0x7ffc_0000_1000,
            waker_id: 8,
            waker_ustack: n | raw::WAKER_USTACK_REC,
            flags: raw::SF_USER_REGS,
            ..Default::default()
        };
        rec.hdr.kind = raw::REC_WAKER_USTACK;
        rec.hdr.size = std::mem::size_of::<raw::SampleRec>() as u32;
        let mut bytes = vec![0u8; rec.hdr.size as usize];
        unsafe { std::ptr::write_unaligned(bytes.as_mut_ptr() as *mut raw::SampleRec, rec) };
        bytes
    }

    /// Thread 8's blocked sample naming waker user stack record `n`.
    fn raw_sample_woken_at(n: u32) -> Vec<u8> {
        let mut bytes = raw_blocked_sample(0);
        let at = std::mem::offset_of!(raw::SampleRec, waker_ustack);
        bytes[at..at + 4].copy_from_slice(&(n | raw::WAKER_USTACK_REC).to_ne_bytes());
        bytes
    }

    /// The waker's user stack comes in a record before the blocked sample
    /// that names it, and becomes that sample's waker stack; a sample that
    /// names another record (lost to a full ring) gets none, never the
    /// stack of another wakeup.
    #[test]
    fn a_waker_user_stack_record_becomes_the_waker_stack_of_the_sample_naming_it() {
        let (ip, other) = (0x40_1234u64, 0x40_5678u64);
        let (_, t) = convert(&[
            &raw_waker_ustack(1, ip),
            &raw_sample_woken_at(1),
            &raw_waker_ustack(2, other),
            &raw_sample_woken_at(3),
            &raw_sample_woken_at(2),
        ]);
        assert_eq!(t.samples.len(), 3);
        let first = &t.stacks[&t.samples[0].waker_stack];
        assert_eq!(first.iter().map(|f| f.addr).collect::<Vec<_>>(), [ip]);
        assert_eq!(t.samples[1].waker_stack, 0, "record 3 never came");
        assert_eq!(
            t.samples[2].waker_stack, 0,
            "record 2 was another wakeup's, dropped by the sample before"
        );
    }

    #[test]
    fn the_vdso_copy_is_an_elf_image_in_memory_not_a_file() {
        let copy = VdsoCopy::new().expect("a vDSO copy");
        let image = std::fs::read(&copy.path).unwrap();
        assert!(image.starts_with(b"\x7fELF"));
        let target = std::fs::read_link(&copy.path).unwrap();
        assert!(
            target.to_string_lossy().starts_with("/memfd:holdup-vdso"),
            "{}",
            target.display()
        );
    }
}
