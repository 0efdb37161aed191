//! CPython processes: recognised by the interpreter they map (as soon as the
//! mapping is seen, so that the recorder walks their frames from then on),
//! their code objects as the recorder sent them, and their interpreter
//! frames as frames of a dso of their own per process, `[python]`, named
//! `function (file.py:LINE)` at the end of the recording.

use holdup_bpf::perf::AddressEvent;
use holdup_bpf::records::{self as raw, ForkRec, PyCode, PyCodeRec, PyConfig, PyCounts, PyFrame};
use holdup_symbolize::python::{self, lines, Interpreter};
use holdup_trace::fxhash::FxHashMap;
use holdup_trace::{DsoId, Frame, SymFrame};
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use std::rc::Rc;

/// The path of the dso of a process's interpreter frames, as reports show it.
pub const PYTHON_DSO: &str = "[python]";

/// One interpreter frame of a process: its code object (address and
/// check: addresses are reused) and where in it.
type FrameKey = (u32, u64, u16, u32);

/// Where a process's code objects' frees are counted: the interpreter's
/// file and its code deallocator's offset in it.
type FreesAt = (Rc<str>, u64);

#[derive(Debug, Default)]
pub struct PythonFrames {
    /// Interpreter files looked at, by path: the interpreter, none (not one),
    /// or why it cannot be walked.
    files: FxHashMap<String, Result<Option<Rc<Interpreter>>, python::Refusal>>,
    /// Processes whose frames are walked, with their interpreter and the
    /// path of its file.
    procs: FxHashMap<u32, (Rc<Interpreter>, PyConfig, Rc<str>)>,
    /// Configurations for the recorder (with the file whose code objects'
    /// frees it is to count), and processes it is to forget.
    pending: Vec<(u32, PyConfig, Option<FreesAt>)>,
    forgotten: Vec<u32>,
    /// Code objects by process, address and check.
    codes: FxHashMap<(u32, u64, u16), PyCode>,
    /// Frames handed out: their address in the process's dso is their
    /// index here.
    keys: Vec<FrameKey>,
    addrs: FxHashMap<FrameKey, u64>,
    dsos: FxHashMap<u32, DsoId>,
    pids: FxHashMap<DsoId, u32>,
    /// Evaluator ranges by the path of the dso the converter gave them.
    evaluators: FxHashMap<String, Vec<Range<u64>>>,
    /// Interpreters refused, by path, with why.
    refused: BTreeMap<String, String>,
    pub spliced: python::splice::Spliced,
    /// Frames whose code object never came (its record was lost).
    pub unknown_code: u64,
    /// The recorder's counts of its walks, at the end.
    pub walks: PyCounts,
    /// Processes the recorder had no room for.
    pub not_handed_over: u64,
    /// Processes whose code objects' frees could not be counted (their
    /// code objects are read at every sample), and the first error.
    pub frees_uncounted: u64,
    frees_error: Option<String>,
    /// Configurations handed over: the last one's serial.
    serial: u32,
    /// Images replaced lately, by pid, with when (see [`PythonFrames::fork`]),
    /// and the size at which those older than [`EXECS_FOR_NS`] go.
    execs: FxHashMap<u32, u64>,
    execs_prune_at: usize,
}

/// How long a replaced image is kept for the fork that made its process;
/// the fork comes within a drain of the ring, seconds at most.
const EXECS_FOR_NS: u64 = 30_000_000_000;
/// The least size at which they are pruned.
const EXECS_PRUNE_AT: usize = 4096;

/// The recorder's view of an interpreter mapped with load bias `bias`.
fn config(i: &Interpreter, bias: u64) -> PyConfig {
    let l = &i.layout;
    let max = |v: &[u16]| v.iter().copied().max().unwrap_or(0) + 8;
    // The code object's number is read with the fields its check hashes.
    let co_version = l.code_counter.map(|c| c.co_version);
    let mut code_fields = vec![l.co_firstlineno, l.co_filename, l.co_name, l.co_linetable];
    code_fields.extend(co_version);
    PyConfig {
        runtime: i.runtime.wrapping_add(bias),
        code_type: i.code_type.wrapping_add(bias),
        version: u16::from(i.version.0) << 8 | u16::from(i.version.1),
        layout: match (i.version, l.cframe_current) {
            ((3, 10), _) => raw::PY_FRAME_OBJECT as u8,
            ((3, 11), _) => raw::PY_ENTRY_FLAG as u8,
            _ => raw::PY_SHIM_OWNER as u8,
        },
        id_is_fsbase: u8::from(i.version == (3, 10)),
        rt_interp_head: l.rt_interp_head,
        interp_next: l.interp_next,
        interp_threads: l.interp_threads,
        ts_next: l.ts_next,
        ts_frame: l.ts_frame,
        ts_id: l.ts_id,
        cframe_current: l.cframe_current.unwrap_or(raw::PY_NO_CFRAME as u16),
        f_code: l.f_code,
        f_back: l.f_back,
        f_instr: l.f_instr,
        f_entry: l.f_entry,
        co_adaptive: l.co_adaptive,
        co_firstlineno: l.co_firstlineno,
        co_filename: l.co_filename,
        co_name: l.co_name,
        co_linetable: l.co_linetable,
        str_ascii_data: l.str_ascii_data,
        str_compact_data: l.str_compact_data,
        frame_read: max(&[l.f_code, l.f_back, l.f_instr, l.f_entry]),
        code_read: max(&code_fields),
        check_from: code_fields.iter().copied().min().unwrap_or(0),
        gil: match l.gil {
            Some(python::GilAt::Runtime(at) | python::GilAt::Interpreter(at)) => at,
            None => 0,
        },
        gil_in_interp: u8::from(matches!(l.gil, Some(python::GilAt::Interpreter(_)))),
        code_counter: match l.code_counter.map(|c| c.at) {
            Some(python::CounterAt::Global(a)) => a.wrapping_add(bias),
            Some(python::CounterAt::Interpreter(at)) => u64::from(at),
            None => 0,
        },
        counter_in_interp: u8::from(matches!(
            l.code_counter.map(|c| c.at),
            Some(python::CounterAt::Interpreter(_))
        )),
        co_version: co_version.unwrap_or(0),
        ..Default::default()
    }
}

impl PythonFrames {
    /// What an address-space event says of interpreters (events in time
    /// order, as soon as they are collected).
    pub fn note(&mut self, ev: &AddressEvent) {
        match ev {
            AddressEvent::Mmap(m) => self.mapped(m.pid, &m.path, m.start, m.pgoff),
            AddressEvent::Exec { pid, time } => self.exec(*pid, *time),
        }
    }

    /// `pid` mapped `path` at `start` from file offset `pgoff`.
    pub fn mapped(&mut self, pid: u32, path: &str, start: u64, pgoff: u64) {
        if self.procs.contains_key(&pid) || !python::layout::may_be_python(path) {
            return;
        }
        let found = self
            .files
            .entry(path.to_string())
            .or_insert_with(|| python::inspect(Path::new(path)).map(|i| i.map(Rc::new)));
        let interp = match found {
            Ok(Some(i)) => i.clone(),
            Ok(None) => return,
            Err(why) => {
                self.refused.insert(path.to_string(), why.to_string());
                return;
            }
        };
        let Some(bias) = interp.bias(start, pgoff) else {
            return;
        };
        let cfg = config(&interp, bias);
        self.evaluators
            .entry(path.to_string())
            .or_insert_with(|| interp.evaluator.clone());
        let path: Rc<str> = path.into();
        let frees = interp.code_dealloc.map(|at| (path.clone(), at));
        self.pending.push((pid, cfg, frees));
        self.procs.insert(pid, (interp, cfg, path));
    }

    /// `pid` replaced its image at `time`: whatever interpreter it ran is
    /// gone.
    pub fn exec(&mut self, pid: u32, time: u64) {
        // Kept for the fork that made `pid`, which may come after (see
        // fork). Pruned at twice the size the last pruning left, so that a
        // machine that execs more than that in the window prunes rarely.
        if self.execs.len() >= self.execs_prune_at.max(EXECS_PRUNE_AT) {
            self.execs.retain(|_, t| *t + EXECS_FOR_NS >= time);
            self.execs_prune_at = 2 * self.execs.len();
        }
        self.execs.insert(pid, time);
        if self.procs.remove(&pid).is_some() {
            self.forgotten.push(pid);
        }
        self.pending.retain(|(p, ..)| *p != pid);
        // Its next interpreter frames are another dso; the old one keeps
        // its names.
        self.dsos.remove(&pid);
    }

    /// A forked child runs its parent's interpreter at the same addresses.
    /// If the recorder copied the parent's registration at the fork
    /// (py_inherited), it walks the child already; else the child is handed
    /// over as a new process is (the parent was not registered yet, or it
    /// was not walked). Address events come as soon as they happen, forks
    /// with the ring's records, later: a child that exec'd since the fork
    /// (a subprocess) runs another program, whose addresses this
    /// interpreter's would be walked in.
    pub fn fork(&mut self, f: &ForkRec) {
        if self.execs.get(&f.pid).is_some_and(|&t| t >= f.time) {
            return;
        }
        if let Some((interp, cfg, path)) = self.procs.get(&f.parent_pid).cloned() {
            if f.py_inherited == 0 {
                let frees = interp.code_dealloc.map(|at| (path.clone(), at));
                self.pending.push((f.pid, cfg, frees));
            }
            self.procs.insert(f.pid, (interp, cfg, path));
        }
    }

    /// The interpreters recognised since the last call, to the recorder (it
    /// walks their frames from now on), and those gone. A process the
    /// recorder's table has no room for keeps its native frames only, and
    /// is counted. Those gone go first: a process that exec'd another
    /// interpreter is in both.
    pub fn hand_over(&mut self, rec: &mut holdup_bpf::Recorder) {
        for pid in std::mem::take(&mut self.forgotten) {
            rec.forget_python(pid);
        }
        for (pid, mut config, frees) in std::mem::take(&mut self.pending) {
            // The address events are the machine's: an interpreter outside
            // the recording needs no place in the recorder's table.
            if !rec.tracks(pid) {
                continue;
            }
            // A forked child has its parent's registration since its fork;
            // another would start its count of frees again.
            if rec.walks_python(pid) {
                continue;
            }
            self.serial += 1;
            config.serial = self.serial;
            // Counted from before the recorder walks the process: a free
            // it did not see would leave a replaced code object trusted.
            if let Some((path, at)) = frees {
                match rec.count_code_frees(Path::new(&*path), at) {
                    Ok(()) => config.frees_counted = 1,
                    Err(e) => {
                        self.frees_uncounted += 1;
                        self.frees_error.get_or_insert_with(|| e.to_string());
                    }
                }
            }
            if rec.set_python(pid, &config).is_err() {
                self.not_handed_over += 1;
            }
        }
    }

    /// The interpreter files whose frames cannot be walked, and why.
    pub fn refusals(&self) -> impl Iterator<Item = (&str, &str)> {
        self.refused.iter().map(|(p, w)| (p.as_str(), w.as_str()))
    }

    /// A code record.
    pub fn code(&mut self, r: &PyCodeRec) {
        self.codes.insert((r.pid, r.code, r.check), r.decoded());
    }

    /// The dso of `pid`'s interpreter frames, if it has one yet.
    pub fn dso_of(&self, pid: u32) -> Option<DsoId> {
        self.dsos.get(&pid).copied()
    }

    pub fn add_dso(&mut self, pid: u32, dso: DsoId) {
        self.dsos.insert(pid, dso);
        self.pids.insert(dso, pid);
    }

    /// The process whose interpreter frames `dso` holds.
    pub fn pid_of(&self, dso: DsoId) -> Option<u32> {
        self.pids.get(&dso).copied()
    }

    /// The evaluator's file offsets in the file at `path`, if it is an
    /// interpreter.
    pub fn evaluator(&self, path: &str) -> Option<&[Range<u64>]> {
        self.evaluators.get(path).map(Vec::as_slice)
    }

    /// The frames of a sample's interpreter frames in `dso`, grouped by the
    /// evaluator call that runs them, leaf first.
    pub fn groups(
        &mut self,
        pid: u32,
        dso: DsoId,
        frames: impl Iterator<Item = PyFrame>,
    ) -> Vec<Vec<Frame>> {
        let mut groups = vec![Vec::new()];
        for f in frames {
            let key = (pid, f.code, f.check, f.instr);
            let next = self.keys.len() as u64;
            let addr = *self.addrs.entry(key).or_insert(next);
            if addr == next {
                self.keys.push(key);
            }
            let group = groups.last_mut().expect("one group at least");
            group.push(Frame { dso, addr });
            if f.group_end {
                groups.push(Vec::new());
            }
        }
        groups.retain(|g| !g.is_empty());
        groups
    }

    /// Names of interpreter frames at `addrs` (see [`PythonFrames::groups`]).
    pub fn symbols(&mut self, addrs: &[u64]) -> Vec<Vec<SymFrame>> {
        let mut out = Vec::with_capacity(addrs.len());
        for &a in addrs {
            let Some(&(pid, code, check, instr)) = self.keys.get(a as usize) else {
                out.push(Vec::new());
                continue;
            };
            let Some(c) = self.codes.get(&(pid, code, check)) else {
                self.unknown_code += 1;
                out.push(vec![SymFrame {
                    function: format!("<python code {code:#x}>"),
                    file: None,
                    line: 0,
                }]);
                continue;
            };
            out.push(vec![frame(c, instr)]);
        }
        out
    }

    /// What the user should know: interpreters refused, and frame walks
    /// that did not end where a thread's frames end.
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self
            .refusals()
            .map(|(path, why)| {
                format!("python: {path}: {why}; its processes show native frames only")
            })
            .collect();
        if self.not_handed_over > 0 {
            notes.push(format!(
                "python: {} processes show native frames only: the recorder's table of interpreters was full",
                self.not_handed_over
            ));
        }
        if self.frees_uncounted > 0 {
            notes.push(format!(
                "python: {} processes have their code objects read at every sample (the uprobe that counts their frees: {})",
                self.frees_uncounted,
                self.frees_error.as_deref().unwrap_or("")
            ));
        }
        let w = &self.walks;
        let mut ended = Vec::new();
        for (n, what) in [
            (w.truncated, "were cut at the depth limit"),
            (w.loops, "ended at a frame that pointed back"),
            (w.bad_pointer, "ended at an unreadable frame"),
            (w.not_code, "ended at a frame without a code object"),
            (
                w.counter_wrong,
                "found a code object newer than the interpreter's count of them (its code objects are read at every sample since)",
            ),
            (
                w.stale_tstate,
                "found the thread's state reused by another thread (looked up again)",
            ),
        ] {
            if n > 0 {
                ended.push(format!("{n} {what}"));
            }
        }
        if self.unknown_code > 0 {
            ended.push(format!(
                "{} frames have no name (their code object's record was lost)",
                self.unknown_code
            ));
        }
        if !ended.is_empty() {
            notes.push(format!(
                "python: of {} frame walks, {}",
                w.samples,
                ended.join(", ")
            ));
        }
        notes
    }
}

/// `qualname (file.py:LINE)`: the function of code `c` and where in it.
fn frame(c: &PyCode, instr: u32) -> SymFrame {
    let line = lines::line_at(&c.table, c.first_line, c.units, c.v310, instr);
    let base = c.file.rsplit('/').next().unwrap_or(&c.file);
    let function = match line {
        Some(l) => format!("{} ({base}:{l})", c.name),
        None => format!("{} ({base})", c.name),
    };
    SymFrame {
        function,
        file: Some(c.file.clone()),
        line: line.unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_rec(pid: u32, code: u64, name: &str, table: &[u8]) -> Box<PyCodeRec> {
        let mut r = PyCodeRec::named(pid, code, name, "/srv/app/worker.py", table);
        r.check = 3;
        r.version = 0x030c;
        r.firstlineno = 40;
        r.units = 8;
        r
    }

    #[test]
    fn frames_are_grouped_by_evaluator_call_and_named_with_their_line() {
        let mut p = PythonFrames::default();
        // [0, 2) line 40, [2, 4) line 42 (form 12: +2).
        p.code(&code_rec(
            7,
            0x1000,
            "Worker.run",
            &[0x81, 0, 0x80 | (12 << 3) | 1, 0, 0],
        ));
        let frame = |code, instr, group_end, check| PyFrame {
            code,
            instr,
            group_end,
            check,
        };
        let frames = [
            frame(0x1000, 3, false, 3),
            frame(0x2000, 0, true, 3),
            frame(0x1000, 1, true, 3),
            // Another code object that had the same address, never sent.
            frame(0x1000, 1, true, 4),
        ];
        let groups = p.groups(7, 5, frames.into_iter());
        assert_eq!(groups.len(), 3);
        assert_eq!(groups[0].len(), 2);
        let addrs: Vec<u64> = groups.iter().flatten().map(|f| f.addr).collect();
        let names: Vec<String> = p
            .symbols(&addrs)
            .into_iter()
            .map(|s| s[0].function.clone())
            .collect();
        assert_eq!(
            names,
            [
                "Worker.run (worker.py:42)",
                "<python code 0x2000>",
                "Worker.run (worker.py:40)",
                "<python code 0x1000>"
            ]
        );
        assert_eq!(p.unknown_code, 2);
        assert!(p.notes()[0].contains("2 frames have no name"));
        // The same frame again is the same address.
        let again = p.groups(7, 5, frames[..1].iter().copied());
        assert_eq!(again[0][0].addr, addrs[0]);
    }

    /// A process's exec is kept until its fork comes (seconds at most),
    /// and a machine that execs all the time does not grow the table
    /// without bound.
    #[test]
    fn execs_are_kept_a_window_long() {
        let mut p = PythonFrames::default();
        let ms = 1_000_000;
        // 200 s of execs, one every 10 ms.
        for pid in 0..20_000u32 {
            p.exec(pid, u64::from(pid) * 10 * ms);
        }
        // At most twice the window's 3001, and the one just added.
        assert!(p.execs.len() <= 2 * 3001 + 1, "{}", p.execs.len());
        // The last 30 s are all there.
        assert!((17_000..20_000).all(|pid| p.execs.contains_key(&pid)));
    }

    #[test]
    fn an_instruction_outside_the_code_has_no_line() {
        let mut p = PythonFrames::default();
        p.code(&code_rec(7, 0x1000, "f", &[0x87, 0]));
        let g = p.groups(
            7,
            5,
            [PyFrame {
                code: 0x1000,
                instr: 9,
                group_end: true,
                check: 3,
            }]
            .into_iter(),
        );
        let s = p.symbols(&[g[0][0].addr]);
        assert_eq!(s[0][0].function, "f (worker.py)");
        assert_eq!(s[0][0].file.as_deref(), Some("/srv/app/worker.py"));
    }
}
