//! Folded stacks (`root;…;leaf weight`), on-CPU and off-CPU together, for
//! flame graphs and for other tools (inferno, FlameGraph, speedscope).
//!
//! Blocked time ends in one pseudo frame per subclass (see [`leaf_name`]),
//! so that it can be told apart, coloured and searched. Kernel frames carry
//! the `_[k]` suffix and inlined frames `_[i]`, as FlameGraph does.

use crate::profile::{sample_parts, Filter};
use crate::stacks::Resolver;
use holdup_trace::{Class, Trace};
use std::collections::HashMap;
use std::fmt::Write;

#[derive(Clone, Debug, Default)]
pub struct FoldOptions {
    /// Start every stack with `comm-tid` instead of the process name.
    pub per_thread: bool,
    pub filter: Filter,
}

/// The pseudo frame that ends the stacks of blocked time of `class`.
pub fn leaf_name(class: Class) -> Option<&'static str> {
    match class {
        Class::Cpu => None,
        Class::Io => Some("[I] io wait"),
        Class::Lock => Some("[L] lock wait"),
        Class::Sched => Some("[S] runqueue"),
        Class::Other => Some("[B] blocked"),
    }
}

/// Append a stack (leaf first) to a folded line, root first: `;` before
/// each frame, kernel frames suffixed `_[k]` and inlined ones `_[i]`.
pub fn push_frames(line: &mut String, funcs: &[crate::stacks::Func]) {
    for f in funcs.iter().rev() {
        line.push(';');
        // ';' separates frames and ' ' the count: keep names clean.
        for ch in f.name.chars() {
            line.push(if ch == ';' { ':' } else { ch });
        }
        if f.kernel {
            line.push_str("_[k]");
        } else if f.inlined {
            line.push_str("_[i]");
        }
    }
}

/// Folded stacks with their weights (in sampling points), sorted by stack.
pub fn folded(trace: &Trace, opts: &FoldOptions) -> Vec<(String, u64)> {
    let mut resolver = Resolver::new(trace);
    let mut acc: HashMap<String, u64> = HashMap::new();
    let mut line = String::new();
    for s in &trace.samples {
        let th = trace.threads.get(&s.tid);
        let comm = th.map_or("", |t| t.comm.as_str());
        if !opts.filter.keeps(s.pid, s.tid, comm) {
            continue;
        }
        let funcs = resolver.stack(s.stack);
        line.clear();
        let root = if comm.is_empty() { "[unknown]" } else { comm };
        if opts.per_thread {
            let _ = write!(line, "{root}-{}", s.tid);
        } else {
            line.push_str(root);
        }
        push_frames(&mut line, &funcs);
        for (class, n) in sample_parts(s) {
            let key = match leaf_name(class) {
                Some(leaf) => format!("{line};{leaf}"),
                None => line.clone(),
            };
            *acc.entry(key).or_default() += n;
        }
    }
    let mut out: Vec<_> = acc.into_iter().collect();
    out.sort();
    out
}

/// Write folded stacks in the usual text form.
pub fn write_folded(
    out: &mut impl std::io::Write,
    stacks: &[(String, u64)],
) -> std::io::Result<()> {
    for (s, n) in stacks {
        writeln!(out, "{s} {n}")?;
    }
    Ok(())
}
