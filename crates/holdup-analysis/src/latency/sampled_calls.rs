//! Callees of a function as a recording's samples saw them: the frames just
//! below it in on- and off-CPU stacks. They include what a scan of the
//! binary's call instructions cannot see — calls through a pointer — for
//! DARC's descent.

use holdup_trace::{Frame, Trace};
use std::collections::HashSet;

/// A function of the recording: its file's path and its name.
pub type SampledFunc = (String, String);

/// `(caller, callee)` edges below the functions for which
/// `is_root(path, function)` holds, `depth` calls down, in the order the
/// stacks show them, once each. A frame's function is the outermost one
/// symbolized at its address (the one that has a symbol: inlined callees
/// make no call). Kernel frames end a path.
pub fn sampled_callees(
    trace: &Trace,
    is_root: impl Fn(&str, &str) -> bool,
    depth: usize,
) -> Vec<(SampledFunc, SampledFunc)> {
    let func = |f: &Frame| -> Option<SampledFunc> {
        if f.is_kernel() {
            return None;
        }
        let name = trace.symbols.get(f)?.last()?.function.clone();
        Some((trace.dsos.get(&f.dso)?.path.clone(), name))
    };
    let (mut seen_stacks, mut seen_edges) = (HashSet::new(), HashSet::new());
    let mut edges = Vec::new();
    for s in &trace.samples {
        if !seen_stacks.insert(s.stack) {
            continue;
        }
        // Leaf first: the innermost call of a root, and the frames below.
        let frames: Vec<Option<SampledFunc>> = trace.stack(s.stack).iter().map(func).collect();
        let Some(root) = frames
            .iter()
            .position(|f| f.as_ref().is_some_and(|(p, n)| is_root(p, n)))
        else {
            continue;
        };
        for at in (root.saturating_sub(depth)..root).rev() {
            let (Some(caller), Some(callee)) = (&frames[at + 1], &frames[at]) else {
                break;
            };
            if caller != callee && seen_edges.insert((caller.clone(), callee.clone())) {
                edges.push((caller.clone(), callee.clone()));
            }
        }
    }
    edges
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdup_trace::{Class, Dso, Sample, SymFrame, Waker, KERNEL_DSO};

    fn frame(dso: u32, addr: u64) -> Frame {
        Frame { dso, addr }
    }

    #[test]
    fn the_frames_below_a_root_are_its_callees() {
        let mut t = Trace::default();
        for (id, path) in [(1, "/bin/app"), (2, "/lib/libc.so.6")] {
            t.dsos.insert(
                id,
                Dso {
                    id,
                    path: path.into(),
                    build_id: None,
                },
            );
        }
        let name = |n: &str| SymFrame {
            function: n.into(),
            file: None,
            line: 0,
        };
        // handle → (pointer) store → flush, inlined into store; then libc's
        // nanosleep and the kernel.
        for (f, names) in [
            (frame(1, 10), vec![name("main")]),
            (frame(1, 20), vec![name("handle")]),
            (frame(1, 30), vec![name("flush_inline"), name("store")]),
            (frame(2, 40), vec![name("nanosleep")]),
            (frame(KERNEL_DSO, 50), vec![name("schedule")]),
        ] {
            t.symbols.insert(f, names);
        }
        let stack = vec![
            frame(KERNEL_DSO, 50),
            frame(2, 40),
            frame(1, 30),
            frame(1, 20),
            frame(1, 10),
        ];
        t.stacks.insert(7, stack);
        t.samples.push(Sample {
            time: 0,
            wake: 0,
            end: 1,
            pid: 1,
            tid: 1,
            cpu: 0,
            class: Class::Other,
            weight: 1,
            sched_weight: 0,
            waker: Waker::None,
            stack: 7,
            late_user_stack: false,
            waker_stack: 0,
        });
        let f = |p: &str, n: &str| (p.to_string(), n.to_string());
        let edges = sampled_callees(&t, |p, n| p == "/bin/app" && n == "handle", 5);
        assert_eq!(
            edges,
            [
                (f("/bin/app", "handle"), f("/bin/app", "store")),
                (f("/bin/app", "store"), f("/lib/libc.so.6", "nanosleep")),
            ]
        );
        // One level down only.
        assert_eq!(sampled_callees(&t, |_, n| n == "handle", 1).len(), 1);
        // No root in the stack: nothing.
        assert!(sampled_callees(&t, |_, n| n == "parse", 3).is_empty());
    }
}
