//! The CPython interpreters of the profiled processes, recognised as a
//! recording recognises them ([`crate::python`]) and handed to the causal
//! recorder, so that its samples carry their Python frames: those are the
//! targets of a Python program. An interpreter whose frames cannot be walked
//! (a version without a known layout, a free-threaded build) is said once;
//! its processes keep their native targets.

use crate::python::PythonFrames;
use holdup_bpf::perf::AddressEvent;
use holdup_bpf::records::ForkRec;
use holdup_bpf::Recorder;
use std::collections::HashSet;

#[derive(Default)]
pub struct Interpreters {
    frames: PythonFrames,
    events: Vec<AddressEvent>,
    /// Refusals said, by path.
    said: HashSet<String>,
}

impl Interpreters {
    /// A process that runs already (`-p`): the interpreter it mapped.
    pub fn existing(&mut self, pid: u32) {
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return;
        };
        for m in holdup_symbolize::parse_maps(&maps) {
            self.frames.mapped(pid, m.path, m.start, m.offset);
        }
    }

    /// `-a`: every process that runs already.
    pub fn every_existing(&mut self) {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in dir.flatten() {
            if let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() {
                self.existing(pid);
            }
        }
    }

    /// A forked child runs its parent's interpreter (see
    /// [`PythonFrames::fork`]).
    pub fn fork(&mut self, f: &ForkRec) {
        self.frames.fork(f);
    }

    /// The recorded processes' new mappings and images since the last
    /// call: the interpreters among them, to the recorder.
    pub fn update(&mut self, rec: &mut Recorder) {
        let mut events = std::mem::take(&mut self.events);
        rec.drain_address_events(|ev| events.push(ev));
        events.retain(|ev| rec.tracks(pid_of(ev)));
        events.sort_by_key(AddressEvent::time);
        for ev in events.drain(..) {
            self.frames.note(&ev);
        }
        self.events = events;
        self.frames.hand_over(rec);
        for (path, why) in self.frames.refusals() {
            if self.said.insert(path.to_string()) {
                eprintln!("holdup causal: python: {path}: {why}; its Python frames are not targets, its native code is");
            }
        }
    }

    /// The processes the recorder had no room for, said at the end.
    pub fn finish(&self) {
        let n = self.frames.not_handed_over;
        if n > 0 {
            eprintln!("holdup causal: python: {n} processes have no Python targets: the recorder's table of interpreters was full");
        }
    }
}

fn pid_of(ev: &AddressEvent) -> u32 {
    match ev {
        AddressEvent::Mmap(m) => m.pid,
        AddressEvent::Exec { pid, .. } => *pid,
    }
}
