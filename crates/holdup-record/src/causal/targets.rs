//! What an on-CPU sample of `holdup causal run -a/-p` is in, by target
//! name: the kernel function it hit (`kernel:FUNC`), the source lines of
//! its user stack in scope (`BINARY:FILE:LINE`, or `BINARY:FUNCTION` where
//! a binary has no line table), its Python frames in scope (`FILE:LINE`,
//! `FILE.py:FUNCTION`: see [`holdup_coz::python`]) in place of the
//! interpreter's own code, and its process (`process:COMM`). Names are
//! interned: a sample's targets are small ids.
//!
//! SCOZ §3.4: line tables are built on demand, once per binary, shared by
//! every process that runs it; the kernel has one table (kallsyms here).

use holdup_bpf::records::{PyCodeRec, RawSample, SF_KSTACK_LEAF_IS_IP, SF_USER_REGS};
use holdup_coz::names;
use holdup_coz::probe::Segment;
use holdup_coz::python::Codes;
use holdup_coz::scope::{object_in_scope, scope_match};
use holdup_coz::target::Target;
use holdup_symbolize::lines::{self, Granularity, LineTable, Locations, Place};
use holdup_symbolize::python::layout::may_be_python;
use holdup_symbolize::{AddressSpaces, KernelSymbols, Unwinder};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

/// A process's maps are read again for an unknown address at most this often.
const MAPS_REFRESH_NS: u64 = 100_000_000;

/// The targets seen, each with its name, by id.
#[derive(Default)]
pub struct Names {
    targets: Vec<Target>,
    names: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Names {
    pub fn id(&mut self, target: Target) -> u32 {
        let name = target.to_string();
        if let Some(&id) = self.ids.get(&name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.targets.push(target);
        self.names.push(name.clone());
        self.ids.insert(name, id);
        id
    }

    pub fn get(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    /// A target by its name or the end of it: `work.c:42` finds
    /// `server:/src/work.c:42`, `kernel:ext4_sync_file` itself.
    pub fn find(&self, spec: &str) -> Option<u32> {
        self.get(spec).or_else(|| {
            self.names
                .iter()
                .position(|n| {
                    n.strip_suffix(spec)
                        .is_some_and(|head| head.ends_with(':') || head.ends_with('/'))
                })
                .map(|i| i as u32)
        })
    }

    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    pub fn target(&self, id: u32) -> &Target {
        &self.targets[id as usize]
    }
}

/// The targets of one sample.
#[derive(Default)]
pub struct Hit {
    /// The functions of its kernel stack (on-CPU samples in the kernel),
    /// without the entry code every system call and interrupt passes.
    pub kernel: Vec<u32>,
    /// The lines of its user frames in scope, innermost first.
    pub lines: Vec<u32>,
    pub process: Option<u32>,
}

impl Hit {
    /// Whether the sample is in target `id`: a function or line anywhere
    /// on its stacks counts (SCOZ §3.4: the IP or any return address).
    pub fn contains(&self, id: u32) -> bool {
        self.process == Some(id) || self.kernel.contains(&id) || self.lines.contains(&id)
    }
}

/// What a kernel frame is to the targets.
#[derive(Clone, Copy)]
enum KernelFrame {
    /// Entry and exit code: every system call or interrupt runs through
    /// it, so as a target it would stand for the whole kernel. Skipped.
    Entry,
    /// Our own instrumentation: the trap of the uprobes that count
    /// progress, and BPF programs with what calls them. It and the frames
    /// it called are our cost, not the program's: dropped.
    Tracer,
    Function(u32),
}

fn is_entry_code(function: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "exc_int3",
        "exc_debug",
        "do_int3",
        "entry_SYSCALL",
        "do_syscall_",
        "x64_sys_call",
        "syscall_exit",
        "asm_",
        "irqentry_",
        "ret_from_fork",
    ];
    PREFIXES.iter().any(|p| function.starts_with(p))
}

fn is_tracer(function: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "handle_swbp",
        "uprobe_",
        "__uprobe_",
        "bpf_prog_",
        "bpf_trampoline_",
        "bpf_trace_run",
        "__bpf_trace_",
        "__traceiter_",
        "trace_call_bpf",
    ];
    PREFIXES.iter().any(|p| function.starts_with(p))
}

struct Object {
    table: LineTable,
    segments: Vec<Segment>,
    /// Its file name, the first part of its targets' names.
    binary: String,
    ids: HashMap<u32, u32>,
}

struct Process {
    exe: String,
    comm: Option<u32>,
    maps_read_ns: u64,
}

pub struct Resolver {
    pub names: Names,
    scope: Option<String>,
    granularity: Granularity,
    kernel: Option<KernelSymbols>,
    kernel_frames: HashMap<u64, KernelFrame>,
    spaces: AddressSpaces,
    unwinder: Unwinder,
    procs: HashMap<u32, Process>,
    /// By path; None for a file out of scope or without a line table.
    objects: HashMap<String, Option<Object>>,
    locs: Locations,
    frames: Vec<u64>,
    /// Python code objects, the targets of frames seen before (by process,
    /// code, check and instruction), and the processes whose samples had
    /// Python frames: their interpreter's code is no target.
    python: Codes,
    python_ids: HashMap<(u32, u64, u16, u32), u32>,
    python_procs: HashSet<u32>,
    /// Binaries in scope that have neither a line table nor a symbol
    /// table, to say so once.
    pub without_lines: Vec<String>,
}

impl Resolver {
    /// `kernel`: whether kernel functions are targets (kallsyms readable).
    pub fn new(scope: Option<String>, granularity: Granularity, kernel: bool) -> Resolver {
        let python_scope = scope.clone();
        let kernel = kernel
            .then(|| KernelSymbols::load().ok())
            .flatten()
            .filter(|k| !k.is_empty());
        Resolver {
            names: Names::default(),
            scope,
            granularity,
            kernel,
            kernel_frames: HashMap::new(),
            spaces: AddressSpaces::new(),
            unwinder: Unwinder::new(),
            procs: HashMap::new(),
            objects: HashMap::new(),
            locs: Locations::default(),
            frames: Vec::with_capacity(128),
            python: Codes::new(python_scope, granularity),
            python_ids: HashMap::new(),
            python_procs: HashSet::new(),
            without_lines: Vec::new(),
        }
    }

    pub fn has_kernel(&self) -> bool {
        self.kernel.is_some()
    }

    /// The process ran a new program: its maps, name and lines change.
    pub fn forget(&mut self, pid: u32) {
        self.procs.remove(&pid);
        self.spaces.exit(pid);
        self.python.forget(pid);
        self.python_ids.retain(|k, _| k.0 != pid);
        self.python_procs.remove(&pid);
    }

    /// A Python code object, before the samples that have it.
    pub fn code(&mut self, r: &PyCodeRec) {
        self.python.add(r);
    }

    pub fn resolve(&mut self, s: &RawSample<'_>, now_ns: u64, hit: &mut Hit) {
        hit.kernel.clear();
        hit.lines.clear();
        hit.process = None;
        let r = &s.rec;
        if !self.procs.contains_key(&r.pid) {
            let p = self.read_process(r.pid);
            self.procs.insert(r.pid, p);
        }
        hit.process = self.procs.get(&r.pid).and_then(|p| p.comm);
        if r.flags & SF_KSTACK_LEAF_IS_IP != 0 {
            for (i, addr) in s.kstack().enumerate() {
                let addr = if i == 0 { addr } else { addr.wrapping_sub(1) };
                match self.kernel_frame(addr) {
                    KernelFrame::Function(id) if !hit.kernel.contains(&id) => hit.kernel.push(id),
                    KernelFrame::Tracer => hit.kernel.clear(),
                    _ => {}
                }
            }
        }
        if r.flags & SF_USER_REGS == 0 {
            return;
        }
        let chain = s.fp_chain();
        let stack = s.user_stack(&chain);
        if self.spaces.find(r.pid, r.ip).is_none() {
            self.refresh_maps(r.pid, now_ns);
        }
        let mut frames = std::mem::take(&mut self.frames);
        self.unwinder
            .unwind_into(&self.spaces, r.pid, &stack, &mut frames);
        // Python frames stand in place of the interpreter's code, at its
        // first frame (or after the native frames, where those end first).
        let mut python = r.py_len > 0;
        if python {
            self.python_procs.insert(r.pid);
        }
        let interpreted = self.python_procs.contains(&r.pid);
        for (i, &addr) in frames.iter().enumerate() {
            // A return address is the instruction after the call.
            let addr = if i == 0 { addr } else { addr.wrapping_sub(1) };
            if interpreted && self.in_interpreter(r.pid, addr) {
                if std::mem::take(&mut python) {
                    self.python_lines(s, hit);
                }
                continue;
            }
            if let Some(id) = self.line(r.pid, addr) {
                if !hit.lines.contains(&id) {
                    hit.lines.push(id);
                }
            }
        }
        self.frames = frames;
        if python {
            self.python_lines(s, hit);
        }
    }

    /// Whether `addr` of `pid` is in a CPython interpreter's code.
    fn in_interpreter(&self, pid: u32, addr: u64) -> bool {
        self.spaces
            .find(pid, addr)
            .is_some_and(|m| may_be_python(&m.path))
    }

    /// The targets of the sample's Python frames in scope, innermost first.
    fn python_lines(&mut self, s: &RawSample<'_>, hit: &mut Hit) {
        let pid = s.rec.pid;
        for f in s.python() {
            let key = (pid, f.code, f.check, f.instr);
            let id = match self.python_ids.get(&key) {
                Some(&id) => id,
                None => {
                    let Some(place) = self.python.place(pid, &f) else {
                        continue;
                    };
                    let id = self.names.id(place.target());
                    self.python_ids.insert(key, id);
                    id
                }
            };
            if !hit.lines.contains(&id) {
                hit.lines.push(id);
            }
        }
    }

    fn read_process(&mut self, pid: u32) -> Process {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .map(|p| {
                p.to_string_lossy()
                    .trim_end_matches(" (deleted)")
                    .to_string()
            })
            .unwrap_or_default();
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .ok()
            .map(|c| self.names.id(Target::Process(c.trim_end().to_string())));
        let _ = self.spaces.load_proc_maps(pid);
        Process {
            exe,
            comm,
            maps_read_ns: holdup_bpf::monotonic_ns(),
        }
    }

    fn refresh_maps(&mut self, pid: u32, now_ns: u64) {
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        if now_ns.saturating_sub(p.maps_read_ns) >= MAPS_REFRESH_NS {
            p.maps_read_ns = now_ns;
            let _ = self.spaces.load_proc_maps(pid);
        }
    }

    /// The kernel function at `addr`, as a target.
    fn kernel_frame(&mut self, addr: u64) -> KernelFrame {
        let Some(k) = self.kernel.as_ref() else {
            return KernelFrame::Entry;
        };
        if let Some(&frame) = self.kernel_frames.get(&addr) {
            return frame;
        }
        let frame = match k.find(addr) {
            None => KernelFrame::Entry,
            Some((f, _)) if is_tracer(f) => KernelFrame::Tracer,
            Some((f, _)) if is_entry_code(f) => KernelFrame::Entry,
            Some((f, _)) => KernelFrame::Function(self.names.id(Target::Kernel(f.to_string()))),
        };
        self.kernel_frames.insert(addr, frame);
        frame
    }

    /// The target of the source line at `addr` of `pid`, if in scope.
    fn line(&mut self, pid: u32, addr: u64) -> Option<u32> {
        let m = self.spaces.find(pid, addr)?;
        let offset = m.file_offset_of(addr);
        // Every frame of every sample comes here: the path is copied only
        // the first time a file is seen.
        if !self.objects.contains_key(&m.path) {
            let exe = self.procs.get(&pid).map_or("", |p| p.exe.as_str());
            let obj = load_object(
                self.scope.as_deref(),
                self.granularity,
                &mut self.locs,
                &mut self.without_lines,
                m.candidates(pid),
                &m.path,
                m.path == exe,
            );
            self.objects.insert(m.path.clone(), obj);
        }
        let obj = self.objects.get_mut(&m.path)?.as_mut()?;
        let svma = Segment::svma_of(&obj.segments, offset)?;
        let loc = obj.table.lookup(svma)?;
        let names = &mut self.names;
        let locs = &self.locs;
        let binary = &obj.binary;
        Some(*obj.ids.entry(loc).or_insert_with(|| {
            names.id(match locs.place(loc) {
                Place::Line { file, line } => Target::line(Some(binary), file, line),
                Place::Function { binary, symbol } => Target::Function {
                    binary: binary.to_string(),
                    function: names::without_params(symbol),
                },
            })
        }))
    }
}

/// The table of lines (or functions) of a mapped file (at `path` in its
/// process, read from the first of `candidates` that opens), when it is in
/// scope (see [`object_in_scope`]). A main executable with neither lines
/// nor symbols is listed in `without_lines`.
fn load_object(
    scope: Option<&str>,
    granularity: Granularity,
    locs: &mut Locations,
    without_lines: &mut Vec<String>,
    candidates: Vec<PathBuf>,
    path: &str,
    is_main: bool,
) -> Option<Object> {
    if !object_in_scope(scope, path, is_main) {
        return None;
    }
    let object_matches = scope.is_some_and(|g| scope_match(g, path));
    let keep = |file: &str| match scope {
        None => true,
        Some(g) => object_matches || scope_match(g, file),
    };
    let binary = path.rsplit('/').next().unwrap_or(path);
    // A traced process's file, read as root: never blocking, never
    // through a link its owner planted (see holdup_traced).
    let data = candidates.iter().find_map(|c| holdup_traced::read(c).ok());
    let table = data
        .as_deref()
        .map(|d| lines::targets_from_elf(d, binary, locs, &keep, granularity));
    let table = match table {
        Some(Ok((t, _))) if !t.is_empty() => t,
        _ => {
            if is_main {
                without_lines.push(path.to_string());
            }
            return None;
        }
    };
    let segments = holdup_coz::probe::segments(data.as_deref()?).ok()?;
    Some(Object {
        table,
        segments,
        binary: binary.to_string(),
        ids: HashMap::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdup_bpf::records::{self as raw, RawRecord};

    #[test]
    fn a_target_is_found_by_its_name_or_the_end_of_it() {
        let mut names = Names::default();
        let line = names.id(Target::line(Some("server"), "/src/app/work.c", 42));
        let kernel = names.id(Target::Kernel("ext4_sync_file".into()));
        let process = names.id(Target::Process("postgres".into()));
        assert_eq!(names.id(Target::Kernel("ext4_sync_file".into())), kernel);
        for (spec, id) in [
            ("server:/src/app/work.c:42", Some(line)),
            ("work.c:42", Some(line)),
            ("app/work.c:42", Some(line)),
            ("ork.c:42", None),
            ("work.c:4", None),
            ("kernel:ext4_sync_file", Some(kernel)),
            ("process:postgres", Some(process)),
        ] {
            assert_eq!(names.find(spec), id, "{spec}");
        }
        assert_eq!(names.name(line), "server:/src/app/work.c:42");
        assert_eq!(names.target(process), &Target::Process("postgres".into()));
    }

    #[test]
    fn entry_code_and_our_own_instrumentation_are_no_targets() {
        for f in ["entry_SYSCALL_64", "do_syscall_64", "asm_exc_page_fault"] {
            assert!(is_entry_code(f) && !is_tracer(f), "{f}");
        }
        for f in [
            "handle_swbp",
            "uprobe_notify_resume",
            "bpf_prog_1234_sample",
        ] {
            assert!(is_tracer(f), "{f}");
        }
        assert!(!is_entry_code("link_path_walk") && !is_tracer("link_path_walk"));
    }

    #[inline(never)]
    fn somewhere(x: u64) -> u64 {
        x * 3 + 1
    }

    /// A sample of this process at a known function: its line (in this
    /// file, named with this binary) or its function, and this process by
    /// its comm.
    #[test]
    fn an_on_cpu_sample_resolves_to_its_line_and_its_process() {
        let ip = std::hint::black_box(somewhere as fn(u64) -> u64) as *const () as u64;
        let pid = std::process::id();
        let size = std::mem::size_of::<raw::SampleRec>();
        let rec = raw::SampleRec {
            hdr: raw::RecHdr {
                kind: raw::REC_SAMPLE,
                size: size as u32,
            },
            pid,
            tid: pid,
            ip,
            weight: 1,
            class: raw::CLASS_CPU,
            flags: raw::SF_USER_REGS,
            ..Default::default()
        };
        let mut bytes = vec![0u8; size];
        unsafe { std::ptr::write_unaligned(bytes.as_mut_ptr() as *mut raw::SampleRec, rec) };
        let Ok(RawRecord::Sample(sample)) = raw::parse(&bytes) else {
            panic!("not a sample");
        };
        let exe = std::env::current_exe().unwrap();
        let binary = exe.file_name().unwrap().to_str().unwrap();
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
        for granularity in [Granularity::Line, Granularity::Function] {
            let mut resolver = Resolver::new(None, granularity, false);
            let mut hit = Hit::default();
            resolver.resolve(&sample, holdup_bpf::monotonic_ns(), &mut hit);
            assert!(hit.kernel.is_empty());
            let process = hit.process.map(|id| resolver.names.target(id).clone());
            assert_eq!(process, Some(Target::Process(comm.trim_end().to_string())));
            let &[first] = hit.lines.as_slice() else {
                panic!("lines {:?}", hit.lines);
            };
            match resolver.names.target(first) {
                Target::Line {
                    binary: Some(b),
                    file,
                    ..
                } if granularity == Granularity::Line => assert!(
                    b == binary && file.ends_with("causal/targets.rs"),
                    "{b} {file}"
                ),
                // Demangled, without the hash of a Rust symbol.
                Target::Function {
                    binary: b,
                    function,
                } => assert!(
                    b == binary && function.ends_with("causal::targets::tests::somewhere"),
                    "{b} {function}"
                ),
                other => panic!("{other}"),
            }
            assert!(hit.contains(first) && !hit.contains(first + 100));
        }
    }
}
