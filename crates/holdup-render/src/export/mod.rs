//! Profiles in the formats of the tools people already use: pprof
//! (`go tool pprof`, Pyroscope, Parca), the Firefox Profiler and speedscope. Folded stacks come
//! from [`holdup_analysis::folded`].
//!
//! Every exporter walks the same list of [`StackSample`]s: one per sample
//! and subclass, in trace order, with its stack resolved to frames.

pub mod firefox;
pub mod otlp;
pub mod perfetto;
pub mod pprof;
pub mod protobuf;
pub mod speedscope;

use holdup_analysis::profile::{sample_parts, Filter};
use holdup_analysis::stacks::{wait_reason, Func, Resolver};
use holdup_trace::{Class, Frame, Trace, Waker};
use std::rc::Rc;

/// One frame of a stack with the functions at it, innermost (inlined) first.
#[derive(Clone, Debug)]
pub struct StackFrame {
    pub frame: Frame,
    pub funcs: Rc<[Func]>,
}

/// Sampling points of one subclass on one stack of one thread.
#[derive(Clone, Debug)]
pub struct StackSample {
    pub time: u64,
    pub pid: u32,
    pub tid: u32,
    pub thread: Rc<str>,
    pub class: Class,
    /// First kernel function below the scheduler (blocked samples only).
    pub wait_reason: Option<Rc<str>>,
    /// Who ended the wait (the blocked part of a blocked sample only; the
    /// runqueue part after the wakeup and on-CPU samples have none).
    pub waker: Waker,
    /// Leaf first.
    pub frames: Rc<[StackFrame]>,
    pub points: u64,
}

/// The short name of a subclass, as labels and categories show it.
pub fn class_name(class: Class) -> &'static str {
    match class {
        Class::Cpu => "cpu",
        Class::Io => "io",
        Class::Lock => "lock",
        Class::Sched => "runqueue",
        Class::Other => "blocked",
    }
}

/// All classes, in the order exporters list them.
pub const CLASSES: [Class; 5] = [
    Class::Cpu,
    Class::Io,
    Class::Lock,
    Class::Sched,
    Class::Other,
];

/// The samples the filter keeps, in trace order.
pub fn stack_samples(trace: &Trace, filter: &Filter) -> Vec<StackSample> {
    let mut resolver = Resolver::new(trace);
    let mut stacks: std::collections::HashMap<u32, Rc<[StackFrame]>> = Default::default();
    let mut names: std::collections::HashMap<u32, Rc<str>> = Default::default();
    let mut out = Vec::new();
    for s in &trace.samples {
        let comm = trace.threads.get(&s.tid).map_or("", |t| t.comm.as_str());
        if !filter.keeps(s.pid, s.tid, comm) {
            continue;
        }
        let thread = names
            .entry(s.tid)
            .or_insert_with(|| Rc::from(if comm.is_empty() { "[unknown]" } else { comm }))
            .clone();
        let frames = stacks
            .entry(s.stack)
            .or_insert_with(|| {
                trace
                    .stack(s.stack)
                    .iter()
                    .map(|&frame| StackFrame {
                        frame,
                        funcs: resolver.frame(frame),
                    })
                    .collect()
            })
            .clone();
        for (class, points) in sample_parts(s) {
            // Steal time of an on-CPU sample has the running stack, not a wait's.
            let wait_reason = if s.class == Class::Cpu {
                None
            } else {
                let funcs: Vec<Func> = frames
                    .iter()
                    .flat_map(|f| f.funcs.iter().cloned())
                    .collect();
                wait_reason(&funcs)
            };
            let waker = if s.class != Class::Cpu && class == s.class {
                s.waker
            } else {
                Waker::None
            };
            out.push(StackSample {
                time: s.time,
                pid: s.pid,
                tid: s.tid,
                thread: thread.clone(),
                class,
                wait_reason,
                waker,
                frames: frames.clone(),
                points,
            });
        }
    }
    out
}
