//! Frames in generated code (JIT compilers, interpreters' trampolines):
//! each process's anonymous executable memory is a dso of its own, whose
//! frames keep their absolute addresses; its names come from the process's
//! perf map and jitdump files (`holdup_symbolize::jit`), read while the
//! recording runs and once more at the end.

use holdup_bpf::perf::AddressEvent;
use holdup_symbolize::jit::JitMaps;
use holdup_trace::fxhash::FxHashMap;
use holdup_trace::DsoId;
use std::time::{Duration, Instant};

/// The path of the dso of a process's generated code, as reports show it.
pub const JIT_DSO: &str = "[jit]";

/// Maps are read at most this often while recording: they only grow by
/// what was compiled meanwhile, and names are looked up at the end.
const REFRESH_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
pub struct JitFrames {
    pub maps: JitMaps,
    dsos: FxHashMap<u32, DsoId>,
    pids: FxHashMap<DsoId, u32>,
    refreshed: Option<Instant>,
}

impl JitFrames {
    /// What an address-space event says of generated code (events in time
    /// order, as soon as they are collected: a process's owner is taken
    /// while it lives).
    pub fn note(&mut self, ev: &AddressEvent) {
        match ev {
            AddressEvent::Mmap(m) => self.maps.mapped(m.pid, &m.path),
            AddressEvent::Exec { pid, .. } => self.maps.exec(*pid),
        }
    }

    /// The dso of `pid`'s generated code, if it has one yet.
    pub fn dso_of(&self, pid: u32) -> Option<DsoId> {
        self.dsos.get(&pid).copied()
    }

    /// `dso` is `pid`'s generated code.
    pub fn add(&mut self, pid: u32, dso: DsoId) {
        self.dsos.insert(pid, dso);
        self.pids.insert(dso, pid);
    }

    /// `pid` replaced its image: its next generated code is another dso.
    pub fn exec(&mut self, pid: u32) {
        self.dsos.remove(&pid);
    }

    /// The process whose generated code `dso` is.
    pub fn pid_of(&self, dso: DsoId) -> Option<u32> {
        self.pids.get(&dso).copied()
    }

    /// Read what the maps gained, if a while passed since the last time.
    pub fn refresh(&mut self) {
        if self.pids.is_empty() || self.refreshed.is_some_and(|t| t.elapsed() < REFRESH_EVERY) {
            return;
        }
        self.maps.refresh();
        self.refreshed = Some(Instant::now());
    }
}
