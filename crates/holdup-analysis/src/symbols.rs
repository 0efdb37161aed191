//! Frames to functions, from the symbols stored in the trace. Frames without
//! a symbol degrade to `file+offset`, never to an error.

use holdup_trace::{Frame, StackId, Trace, KERNEL_DSO, UNKNOWN_DSO};
use std::collections::HashMap;
use std::rc::Rc;

/// One function on a stack (inlined functions are frames of their own).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Func {
    pub name: Rc<str>,
    /// Short name of the file it lives in (`libc.so.6`, `[kernel.kallsyms]`).
    pub dso: Rc<str>,
    pub file: Option<Rc<str>>,
    pub line: u32,
    pub kernel: bool,
    pub inlined: bool,
}

/// Resolves frames and whole stacks, with caches.
pub struct Resolver<'t> {
    trace: &'t Trace,
    frames: HashMap<Frame, Rc<[Func]>>,
    stacks: HashMap<StackId, Rc<[Func]>>,
    dso_names: HashMap<u32, Rc<str>>,
    strings: HashMap<String, Rc<str>>,
}

impl<'t> Resolver<'t> {
    pub fn new(trace: &'t Trace) -> Self {
        Self {
            trace,
            frames: HashMap::new(),
            stacks: HashMap::new(),
            dso_names: HashMap::new(),
            strings: HashMap::new(),
        }
    }

    pub fn trace(&self) -> &'t Trace {
        self.trace
    }

    fn intern(&mut self, s: &str) -> Rc<str> {
        if let Some(r) = self.strings.get(s) {
            return r.clone();
        }
        let r: Rc<str> = Rc::from(s);
        self.strings.insert(s.to_string(), r.clone());
        r
    }

    fn dso_name(&mut self, dso: u32) -> Rc<str> {
        if let Some(n) = self.dso_names.get(&dso) {
            return n.clone();
        }
        let n: Rc<str> = Rc::from(self.trace.dso_name(dso));
        self.dso_names.insert(dso, n.clone());
        n
    }

    /// Functions at a frame, innermost (inlined) first.
    pub fn frame(&mut self, f: Frame) -> Rc<[Func]> {
        if let Some(r) = self.frames.get(&f) {
            return r.clone();
        }
        let dso = self.dso_name(f.dso);
        let kernel = f.dso == KERNEL_DSO;
        let funcs: Vec<Func> = match self.trace.symbols.get(&f) {
            Some(syms) if !syms.is_empty() => {
                let n = syms.len();
                let mut v = Vec::with_capacity(n);
                for (i, s) in syms.iter().enumerate() {
                    // glibc inlines wrappers into functions of the same name
                    // (`__libc_pread64` in `__libc_pread64`): one frame is enough.
                    if i + 1 < n && syms[i + 1].function == s.function {
                        continue;
                    }
                    v.push(Func {
                        name: self.intern(&s.function),
                        dso: dso.clone(),
                        file: s.file.as_deref().map(|p| self.intern(p)),
                        line: s.line,
                        kernel,
                        inlined: i + 1 < n,
                    });
                }
                v
            }
            _ => {
                let name = match f.dso {
                    KERNEL_DSO | UNKNOWN_DSO => format!("{:#x}", f.addr),
                    _ => format!("{}+{:#x}", dso, f.addr),
                };
                vec![Func {
                    name: self.intern(&name),
                    dso,
                    file: None,
                    line: 0,
                    kernel,
                    inlined: false,
                }]
            }
        };
        let r: Rc<[Func]> = funcs.into();
        self.frames.insert(f, r.clone());
        r
    }

    /// The functions of a whole stack, leaf first, inlined frames expanded.
    pub fn stack(&mut self, id: StackId) -> Rc<[Func]> {
        if let Some(r) = self.stacks.get(&id) {
            return r.clone();
        }
        let mut out = Vec::new();
        for &f in self.trace.stack(id) {
            out.extend(self.frame(f).iter().cloned());
        }
        let r: Rc<[Func]> = out.into();
        self.stacks.insert(id, r.clone());
        r
    }
}

/// Kernel functions that are the scheduler itself (or the tracing of it):
/// skipped to find the wait reason of a blocked sample.
pub fn is_scheduler_function(name: &str) -> bool {
    const PREFIXES: [&str; 11] = [
        "__schedule",
        "schedule",
        "io_schedule",
        "preempt_schedule",
        "__cond_resched",
        "_cond_resched",
        "__switch_to",
        "finish_task_switch",
        "context_switch",
        "__traceiter_",
        "bpf_",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The wait reason of a blocked stack (leaf first): the first kernel
/// function below the scheduler — DeBox's "wmesg".
pub fn wait_reason(funcs: &[Func]) -> Option<Rc<str>> {
    funcs
        .iter()
        .take_while(|f| f.kernel)
        .find(|f| !is_scheduler_function(&f.name))
        .map(|f| f.name.clone())
}
