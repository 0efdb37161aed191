//! Go processes whose goroutines are followed (`record --goroutines`):
//! recognised by their executable as soon as it is mapped (or, for
//! processes that exist already, by `/proc/PID/exe`), handed to the
//! recorder, which probes their scheduler; their waits' reason numbers
//! named from the binary; what was not followed, said once.

use crate::cgroup::Cgroup;
use holdup_bpf::perf::AddressEvent;
use holdup_bpf::records::{GoConfig, GoCounts};
use holdup_bpf::GoProbes;
use holdup_symbolize::golang::{self, GoBinary, Refusal};
use holdup_trace::fxhash::{FxHashMap, FxHashSet};
use std::collections::BTreeSet;
use std::path::Path;
use std::rc::Rc;

#[derive(Debug, Default)]
pub struct Goroutines {
    /// Follow Go processes at all (`--goroutines`).
    pub enabled: bool,
    /// `--cgroup`: only its processes are recorded.
    cgroup: Option<Cgroup>,
    /// Executables looked at, by path.
    files: FxHashMap<String, Result<Option<Rc<GoBinary>>, Refusal>>,
    /// Processes followed, with their binary and its path.
    procs: FxHashMap<u32, (Rc<GoBinary>, String)>,
    /// Processes that exec'd: the next file they map is their executable.
    exec_pending: FxHashSet<u32>,
    /// Processes that exec'd, with their executable, not yet looked at:
    /// the address events are the whole machine's, and only the recorded
    /// processes are inspected (see [`Goroutines::recognise`]).
    execed: Vec<(u32, String)>,
    /// For the recorder: processes to follow (pid, executable), and to forget.
    pending: Vec<(u32, String)>,
    forgotten: Vec<u32>,
    notes: BTreeSet<String>,
    /// Processes the recorder could not probe.
    pub not_attached: u64,
    /// The probes' counts, at the end.
    pub probe_counts: GoCounts,
}

/// A process to follow: its pid, its executable's path, what that is.
pub type Follow = (u32, String, Rc<GoBinary>);

/// The recorder's view of a binary's runtime layout.
pub fn config(b: &GoBinary) -> GoConfig {
    let l = &b.layout;
    GoConfig {
        g_m: l.g_m,
        g_sched_sp: l.g_sched_sp,
        g_sched_pc: l.g_sched_pc,
        g_sched_bp: l.g_sched_bp,
        g_goid: l.g_goid,
        m_curg: l.m_curg,
        pd_fd: l.pd_fd,
        ..Default::default()
    }
}

/// Where the recorder probes a binary's scheduler.
pub fn probes(b: &GoBinary) -> GoProbes {
    let p = &b.probes;
    GoProbes {
        gopark: p.gopark,
        ready: p.ready,
        execute: p.execute,
        netpollblock: p.netpollblock,
    }
}

impl Goroutines {
    pub fn new(enabled: bool, cgroup: Option<Cgroup>) -> Self {
        Self {
            enabled,
            cgroup,
            ..Default::default()
        }
    }

    /// What an address-space event says of Go processes.
    pub fn note(&mut self, ev: &AddressEvent) {
        if !self.enabled {
            return;
        }
        match ev {
            AddressEvent::Exec { pid, .. } => {
                self.exec_pending.insert(*pid);
            }
            AddressEvent::Mmap(m) => {
                if !self.exec_pending.remove(&m.pid) {
                    return;
                }
                // A launched command is followed from before its exec.
                if self.procs.get(&m.pid).is_some_and(|(_, p)| *p == m.path) {
                    return;
                }
                if self.procs.remove(&m.pid).is_some() {
                    self.forgotten.push(m.pid);
                }
                self.execed.push((m.pid, m.path.clone()));
            }
        }
    }

    /// Look at the executables of the processes that exec'd since the last
    /// call and that the recorder records (`recorded`; in the cgroup, if
    /// one is given): a Go program outside the recording is neither
    /// inspected nor probed.
    pub fn recognise(&mut self, recorded: impl Fn(u32) -> bool) {
        for (pid, path) in std::mem::take(&mut self.execed) {
            if recorded(pid) && !self.cgroup.as_ref().is_some_and(|c| !c.holds(pid)) {
                self.executable(pid, &path);
            }
        }
    }

    /// A process that exists already (`-p`, `-a`).
    pub fn existing(&mut self, pid: u32) {
        if !self.enabled {
            return;
        }
        if let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) {
            self.executable(pid, &exe.to_string_lossy());
        }
    }

    /// The command `pid` is about to exec (held before it): followed from
    /// its first instruction, where a goroutine that parks at once would
    /// be missed if the probes came with its first mapping.
    pub fn launched(&mut self, pid: u32, command: &str) {
        if !self.enabled {
            return;
        }
        if let Some(path) = on_path(command) {
            self.executable(pid, &path.to_string_lossy());
        }
    }

    /// `pid` runs the executable at `path`.
    fn executable(&mut self, pid: u32, path: &str) {
        let found = self
            .files
            .entry(path.to_string())
            .or_insert_with(|| golang::inspect(Path::new(path)).map(|b| b.map(Rc::new)));
        match found {
            Ok(Some(b)) => {
                let b = b.clone();
                if !b.probes.at_entry.is_empty() {
                    self.notes.insert(format!(
                        "goroutines: {path}: {} probed at entry (an unusual prologue): each park costs more",
                        b.probes.at_entry.join(", ")
                    ));
                }
                if !b.reasons_from_binary {
                    self.notes.insert(format!(
                        "goroutines: {path}: its wait reasons' names were not found; they are shown by number"
                    ));
                }
                self.pending.push((pid, path.to_string()));
                self.procs.insert(pid, (b, path.to_string()));
            }
            Ok(None) => {}
            Err(why) => {
                self.notes.insert(format!(
                    "goroutines: {path}: {why}; its goroutines' waits are not recorded"
                ));
            }
        }
    }

    /// Processes to hand to the recorder (with their binary), and to forget.
    pub fn take_changes(&mut self) -> (Vec<Follow>, Vec<u32>) {
        let set = std::mem::take(&mut self.pending)
            .into_iter()
            .filter_map(|(pid, path)| Some((pid, path, self.procs.get(&pid)?.0.clone())))
            .collect();
        (set, std::mem::take(&mut self.forgotten))
    }

    /// The recorder could not probe `pid`.
    pub fn attach_failed(&mut self, pid: u32, why: &str) {
        self.not_attached += 1;
        self.procs.remove(&pid);
        self.notes
            .insert(format!("goroutines: cannot probe the Go scheduler: {why}"));
    }

    /// The name of wait reason `n` of process `pid`'s Go runtime.
    pub fn reason(&self, pid: u32, n: u8) -> String {
        self.procs
            .get(&pid)
            .and_then(|(b, _)| b.reasons.get(n as usize))
            .filter(|r| !r.is_empty())
            .cloned()
            .unwrap_or_else(|| format!("wait reason {n}"))
    }

    /// What the user should know: binaries refused, parks not followed,
    /// and `--goroutines` without a Go program.
    pub fn notes(&self) -> Vec<String> {
        if !self.enabled {
            return Vec::new();
        }
        let mut notes: Vec<String> = self.notes.iter().cloned().collect();
        if self.files.values().all(|f| !matches!(f, Ok(Some(_)))) && notes.is_empty() {
            notes.push(
                "goroutines: no Go program was recorded: --goroutines follows Go 1.21-1.26 binaries"
                    .into(),
            );
        }
        let c = &self.probe_counts;
        let mut missed = Vec::new();
        for (n, what) in [
            (
                c.bad_layout,
                "found the runtime laid out otherwise than its version's table",
            ),
            (c.no_slot, "found the table of goroutines full"),
        ] {
            if n > 0 {
                missed.push(format!("{n} {what}"));
            }
        }
        if !missed.is_empty() {
            notes.push(format!(
                "goroutines: of {} parks, {} (not followed)",
                c.parks,
                missed.join(", ")
            ));
        }
        if c.truncated > 0 {
            notes.push(format!(
                "goroutines: {} stacks were cut at {} frames",
                c.truncated,
                holdup_bpf::records::MAX_GO_FRAMES
            ));
        }
        notes
    }
}

/// The file `command` runs, found as execvp(3) finds it.
fn on_path(command: &str) -> Option<std::path::PathBuf> {
    if command.contains('/') {
        return std::fs::canonicalize(command).ok();
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(command))
        .find(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok())
}

/// What the network poller waited on: what descriptor `fd` of `pid` is now
/// (`socket:[1234]`, a path), or its number when the process is gone.
pub fn waited_on(pid: u32, fd: i32) -> String {
    std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("fd {fd}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdup_bpf::perf::MmapEvent;

    fn exec_of(g: &mut Goroutines, pid: u32, path: &str) {
        g.note(&AddressEvent::Exec { time: 1, pid });
        g.note(&AddressEvent::Mmap(MmapEvent {
            time: 2,
            pid,
            tid: pid,
            start: 0x400000,
            len: 0x1000,
            pgoff: 0,
            build_id: None,
            path: path.into(),
        }));
    }

    #[test]
    fn only_the_recorded_processes_executables_are_looked_at() {
        let mut g = Goroutines::new(true, None);
        exec_of(&mut g, 10, "/bin/true");
        exec_of(&mut g, 11, "/bin/false");
        g.recognise(|pid| pid == 10);
        assert!(g.files.contains_key("/bin/true"));
        assert!(!g.files.contains_key("/bin/false"), "{:?}", g.files.keys());
        // Looked at once: a later call has nothing left from before.
        g.recognise(|_| true);
        assert!(!g.files.contains_key("/bin/false"));
    }
}
