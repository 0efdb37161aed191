//! Frames to functions, from the symbols stored in the trace. Frames without
//! a symbol degrade to `file+offset`, never to an error.

use holdup_trace::{Frame, StackId, Trace, KERNEL_DSO, UNKNOWN_DSO};
use std::collections::HashMap;
use std::rc::Rc;

/// What lock waits wait for: decided by the rules of `lock_rules`.
pub use crate::lock_rules::{lock_kind, LockKind};

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

/// Shared objects of the system runtime (C and C++ libraries, the dynamic
/// loader, the vDSO, the kernel): a blocked site is named by the
/// application frames that called into them.
pub fn is_system_dso(dso: &str) -> bool {
    const PREFIXES: [&str; 8] = [
        "libc.so",
        "libc-",
        "ld-linux",
        "ld-",
        "libpthread",
        "libstdc++",
        "libgcc_s",
        "[vdso]",
    ];
    dso == "[kernel.kallsyms]" || PREFIXES.iter().any(|p| dso.starts_with(p))
}

/// Where the application blocked: its innermost frames outside the system
/// runtime and the runtime function they called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// `LruCache::Release → Mutex::Lock → pthread_mutex_lock`: outer first.
    pub label: String,
    /// The shared object of the innermost application frame.
    pub dso: Rc<str>,
}

/// Application frames a site shows (the innermost one and its caller).
const SITE_FRAMES: usize = 2;

/// The site of a stack (leaf first): the innermost application frames and
/// the runtime entry point below them, or `None` when the stack has no
/// application frame (a thread of the runtime itself, or no user stack).
pub fn site(funcs: &[Func]) -> Option<Site> {
    let first = funcs
        .iter()
        .position(|f| !f.kernel && !is_system_dso(&f.dso))?;
    let app: Vec<&str> = funcs[first..]
        .iter()
        .take_while(|f| !f.kernel && !is_system_dso(&f.dso))
        .take(SITE_FRAMES)
        .map(|f| &*f.name)
        .collect();
    let mut parts: Vec<&str> = app.into_iter().rev().collect();
    // The runtime function the application called: the outermost frame of
    // the runtime's own part of the stack.
    let entry = first
        .checked_sub(1)
        .map(|i| &funcs[i])
        .filter(|f| !f.kernel)
        .map(|f| entry_name(&f.name));
    parts.extend(entry);
    Some(Site {
        label: parts.join(" → "),
        dso: funcs[first].dso.clone(),
    })
}

/// glibc's internal aliases as the documented names:
/// `___pthread_mutex_lock` → `pthread_mutex_lock`, `__libc_pread64` →
/// `pread64`, `__GI___pthread_mutex_unlock_usercnt` →
/// `pthread_mutex_unlock_usercnt`.
fn entry_name(name: &str) -> &str {
    let n = name.trim_start_matches('_');
    let n = n
        .strip_prefix("GI_")
        .map_or(n, |n| n.trim_start_matches('_'));
    n.strip_prefix("libc_").unwrap_or(n)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A stack from `(dso, name)` pairs, leaf first.
    pub(crate) fn stack(frames: &[(&str, &str)]) -> Vec<Func> {
        frames
            .iter()
            .map(|&(dso, name)| Func {
                name: Rc::from(name),
                dso: Rc::from(dso),
                file: None,
                line: 0,
                kernel: dso == "[kernel.kallsyms]",
                inlined: false,
            })
            .collect()
    }

    pub(crate) const K: &str = "[kernel.kallsyms]";
    pub(crate) const LIBC: &str = "libc.so.6";

    #[test]
    fn a_mutex_wait_in_a_library_is_named_by_the_application() {
        let s = stack(&[
            (K, "__schedule"),
            (K, "futex_wait"),
            (LIBC, "__futex_abstimed_wait_common64"),
            (LIBC, "__lll_lock_wait"),
            (LIBC, "___pthread_mutex_lock"),
            ("lru", "Mutex::Lock()"),
            ("lru", "LruCache::Release(int)"),
            ("lru", "worker(void*)"),
            (LIBC, "start_thread"),
        ]);
        let site = site(&s).unwrap();
        assert_eq!(
            site.label,
            "LruCache::Release(int) → Mutex::Lock() → pthread_mutex_lock"
        );
        assert_eq!(&*site.dso, "lru");
        assert_eq!(lock_kind(&s), LockKind::Mutex);
    }

    #[test]
    fn io_sites_keep_the_wrapper_called() {
        let s = stack(&[
            (K, "io_schedule"),
            (K, "filemap_read"),
            (LIBC, "__libc_pread64"),
            ("app", "do_reads"),
            ("app", "main"),
        ]);
        assert_eq!(site(&s).unwrap().label, "main → do_reads → pread64");
        assert_eq!(
            entry_name("__GI___pthread_mutex_unlock_usercnt"),
            "pthread_mutex_unlock_usercnt"
        );
    }

    #[test]
    fn stacks_without_application_frames_have_no_site() {
        assert_eq!(site(&stack(&[(K, "futex_wait")])), None);
        assert_eq!(
            site(&stack(&[(LIBC, "__lll_lock_wait"), (LIBC, "start_thread")])),
            None
        );
        // Only application frames: the site is those frames.
        let s = stack(&[("app", "pwrite_all"), ("app", "consume"), ("app", "main")]);
        assert_eq!(site(&s).unwrap().label, "consume → pwrite_all");
    }

    #[test]
    fn condition_variables_joins_barriers_and_semaphores_are_signals() {
        for entry in [
            "___pthread_cond_wait",
            "___pthread_cond_timedwait64",
            "__pthread_clockjoin_ex",
            "pthread_barrier_wait",
            "__new_sem_wait_slow64",
            "std::condition_variable::wait(std::unique_lock<std::mutex>&)",
        ] {
            let s = stack(&[
                (K, "futex_wait"),
                (LIBC, "__futex_abstimed_wait_common64"),
                (LIBC, entry),
                ("app", "main"),
            ]);
            assert_eq!(lock_kind(&s), LockKind::Signal, "{entry}");
        }
    }

    #[test]
    fn a_condition_variable_retaking_its_mutex_waits_for_the_mutex() {
        let s = stack(&[
            (K, "futex_wait"),
            (LIBC, "__lll_lock_wait"),
            (LIBC, "__pthread_mutex_cond_lock"),
            (LIBC, "___pthread_cond_wait"),
            ("app", "consume"),
        ]);
        assert_eq!(lock_kind(&s), LockKind::Mutex);
    }

    #[test]
    fn kernel_locks_and_unknown_futex_waits_are_mutexes() {
        let s = stack(&[
            (K, "__mutex_lock.constprop.0"),
            (K, "fdget_pos"),
            (K, "ksys_write"),
            (LIBC, "__libc_write"),
            ("app", "append_records"),
        ]);
        assert_eq!(lock_kind(&s), LockKind::Mutex);
        let s = stack(&[(K, "futex_wait"), (LIBC, "syscall"), ("app", "spin_park")]);
        assert_eq!(lock_kind(&s), LockKind::Mutex);
        let s = stack(&[(K, "rwsem_down_write_slowpath"), (K, "down_write")]);
        // No primitive named by a matching word: still a mutex.
        assert_eq!(lock_kind(&s), LockKind::Mutex);
    }
}
