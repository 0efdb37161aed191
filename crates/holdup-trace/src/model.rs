//! A whole trace loaded into memory, indexed for the analyses.

use crate::file::{Damage, Error, Header, Reader};
use crate::fxhash::FxHashSet;
use crate::record::*;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thread {
    pub pid: u32,
    pub tid: u32,
    /// Latest name.
    pub comm: String,
    /// Creation time, or the start of the recording for threads that
    /// already existed.
    pub start: u64,
    /// Exit time, or the end of the recording.
    pub end: u64,
    pub exited: bool,
    /// The program it last exec'd, if seen.
    pub exec: Option<String>,
}

impl Thread {
    pub fn lifetime_ns(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// A trace being filled with records in file order (decoded from a file,
/// or kept in memory first), then finished.
pub struct Filling {
    t: Trace,
    /// The latest time of any record seen.
    last: u64,
    /// Threads already in `t.threads` (never removed from it): a sample
    /// of one is pushed without a search of the ordered map.
    known: FxHashSet<u32>,
}

impl Filling {
    pub fn new(header: &Header, features: u32) -> Filling {
        Filling {
            t: Trace {
                header: header.clone(),
                features,
                end_ns: header.start_ns,
                ..Default::default()
            },
            last: 0,
            known: FxHashSet::default(),
        }
    }

    pub fn add(&mut self, r: Record) {
        if let Some(time) = r.time() {
            self.last = self.last.max(time);
        }
        match r {
            Record::Sample(s) if self.known.contains(&s.tid) => self.t.samples.push(s),
            Record::Sample(s) => {
                self.known.insert(s.tid);
                self.t.add(Record::Sample(s));
            }
            r => self.t.add(r),
        }
    }

    /// The trace as filled so far.
    pub fn so_far(&self) -> &Trace {
        &self.t
    }

    /// The trace, with `damage` if the records stopped before the end of
    /// the file.
    pub fn finish(self, damage: Option<Damage>) -> Trace {
        let mut t = self.t;
        t.damage = damage;
        let samples_end = t.samples.iter().map(|s| s.end).max().unwrap_or(0);
        let segments_end = t.segments.iter().map(|s| s.end).max().unwrap_or(0);
        t.end_ns = match &t.finish {
            Some(f) => f.time,
            None => self
                .last
                .max(samples_end)
                .max(segments_end)
                .max(t.header.start_ns),
        };
        let end = t.end_ns;
        for th in t.threads.values_mut() {
            if !th.exited {
                th.end = end;
            }
        }
        t
    }
}

#[derive(Debug, Default)]
pub struct Trace {
    pub header: Header,
    pub features: u32,
    pub samples: Vec<Sample>,
    pub segments: Vec<Segment>,
    pub bio_issues: Vec<Bio>,
    pub bio_done: Vec<Bio>,
    pub mmaps: Vec<Mmap>,
    /// By tid.
    pub threads: BTreeMap<u32, Thread>,
    pub dsos: HashMap<DsoId, Dso>,
    pub stacks: HashMap<StackId, Vec<Frame>>,
    pub symbols: HashMap<Frame, Vec<SymFrame>>,
    /// Cumulative counts by what was lost.
    pub lost: BTreeMap<String, u64>,
    pub irq_names: HashMap<u32, String>,
    pub finish: Option<Finish>,
    /// Set when the file ends early or is damaged: the trace holds every
    /// complete chunk before that point.
    pub damage: Option<Damage>,
    /// End of the recording: its finish time, or the last event seen.
    pub end_ns: u64,
    /// Recorded with `--syscalls`: how invocations were kept.
    pub syscall_config: Option<SyscallConfig>,
    pub syscalls: Vec<Syscall>,
    pub syscall_totals: Vec<SyscallTotals>,
    /// What the recorder said every reader should be told, each once.
    pub notes: Vec<String>,
    /// Goroutines' waits (recorded with `--goroutines`).
    pub go_waits: Vec<GoWait>,
}

impl Trace {
    pub fn load(path: &Path) -> Result<Trace, Error> {
        let mut reader = Reader::open(path)?;
        Trace::read(&mut reader).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })
    }

    pub fn read<R: Read>(reader: &mut Reader<R>) -> std::io::Result<Trace> {
        let mut t = Filling::new(&reader.header, reader.features);
        reader.for_each(|r| t.add(r))?;
        Ok(t.finish(reader.damage().cloned()))
    }

    fn thread(&mut self, pid: u32, tid: u32) -> &mut Thread {
        let start = self.header.start_ns;
        self.threads.entry(tid).or_insert_with(|| Thread {
            pid,
            tid,
            comm: String::new(),
            start,
            end: 0,
            exited: false,
            exec: None,
        })
    }

    /// Take in one more record, as reading the file does (a recorder that
    /// keeps a trace in memory feeds it this way).
    pub fn add(&mut self, r: Record) {
        match r {
            Record::Sample(s) => {
                self.thread(s.pid, s.tid);
                self.samples.push(s)
            }
            Record::Segment(s) => self.segments.push(s),
            Record::Fork {
                time,
                pid,
                tid,
                parent_tid,
                ..
            } => {
                let parent_comm = self.threads.get(&parent_tid).map(|p| p.comm.clone());
                let th = self.thread(pid, tid);
                th.start = time;
                if th.comm.is_empty() {
                    th.comm = parent_comm.unwrap_or_default();
                }
            }
            Record::Exec {
                pid, tid, filename, ..
            } => {
                self.thread(pid, tid).exec = Some(filename);
            }
            Record::Comm { pid, tid, comm, .. } => self.thread(pid, tid).comm = comm,
            Record::Exit { time, pid, tid } => {
                let th = self.thread(pid, tid);
                th.end = time;
                th.exited = true;
            }
            Record::BioIssue(b) => self.bio_issues.push(b),
            Record::BioDone(b) => self.bio_done.push(b),
            Record::Mmap(m) => self.mmaps.push(m),
            Record::Dso(d) => {
                self.dsos.insert(d.id, d);
            }
            Record::Stack(s) => {
                self.stacks.insert(s.id, s.frames);
            }
            Record::Symbol(s) => {
                self.symbols.insert(s.frame, s.frames);
            }
            Record::Lost(l) => {
                let slot = self.lost.entry(l.what).or_default();
                *slot = (*slot).max(l.count);
            }
            Record::IrqName { irq, name } => {
                self.irq_names.insert(irq, name);
            }
            Record::Finish(f) => self.finish = Some(f),
            Record::Syscall(s) => {
                self.thread(s.pid, s.tid);
                self.syscalls.push(s)
            }
            Record::SyscallTotals(t) => self.syscall_totals.push(t),
            Record::SyscallConfig(c) => self.syscall_config = Some(c),
            Record::Note(text) => {
                if !self.notes.contains(&text) {
                    self.notes.push(text);
                }
            }
            Record::GoWait(g) => self.go_waits.push(g),
        }
    }

    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.header.start_ns)
    }

    pub fn stack(&self, id: StackId) -> &[Frame] {
        self.stacks.get(&id).map_or(&[], |v| v.as_slice())
    }

    /// Events lost to a full ring buffer (or not parsed): what a larger
    /// ring would have kept.
    pub fn lost_total(&self) -> u64 {
        self.split_lost().0
    }

    /// What the recorder saw but dropped, by name (its cause in
    /// parentheses), nonzero counts only.
    pub fn dropped(&self) -> Vec<(&str, u64)> {
        self.split_lost().1
    }

    fn split_lost(&self) -> (u64, Vec<(&str, u64)>) {
        crate::record::split_lost(self.lost.iter().map(|(w, &n)| (w.as_str(), n)))
    }

    /// Name of a dso for display: the file name of its path.
    pub fn dso_name(&self, id: DsoId) -> String {
        match id {
            KERNEL_DSO => "[kernel.kallsyms]".to_string(),
            UNKNOWN_DSO => "[unknown]".to_string(),
            id => self
                .dsos
                .get(&id)
                .map(|d| d.path.rsplit('/').next().unwrap_or(&d.path).to_string())
                .unwrap_or_else(|| "[unknown]".to_string()),
        }
    }

    /// A waker for display: `comm:tid`, `irq:<name>`, `softirq:<name>`, `timer`.
    pub fn waker_name(&self, w: Waker) -> String {
        match w {
            Waker::None => "-".to_string(),
            Waker::Thread(tid) => match self.threads.get(&tid) {
                Some(t) if !t.comm.is_empty() => format!("{}:{}", t.comm, tid),
                _ => format!("tid:{tid}"),
            },
            Waker::Irq(n) => match self.irq_names.get(&n) {
                Some(name) => format!("irq:{name}"),
                None if n == IRQ_UNKNOWN => "irq:unknown".to_string(),
                None if n == IRQ_IPI => "irq:ipi".to_string(),
                None => format!("irq:{n}"),
            },
            Waker::Softirq(v) => format!(
                "softirq:{}",
                SOFTIRQ_NAMES.get(v as usize).copied().unwrap_or("unknown")
            ),
            Waker::Timer => "irq:timer".to_string(),
        }
    }
}
