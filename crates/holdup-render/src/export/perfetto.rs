//! A Perfetto trace (protos/perfetto/trace/trace.proto), written with the
//! small encoder of [`super::protobuf`] from the field numbers of Perfetto's
//! .proto files (listed in [`field`]; they are stable by contract).
//!
//! One track per process and per thread (track descriptors). On each thread
//! track, slices give the thread's state from the wait segments: `Running`
//! between segments, then `Sleeping` (lock, other), `Uninterruptible (I/O)`
//! or `Runnable` (runqueue) while it waits, and `Runnable` from its wakeup
//! until it runs. A wakeup by a thread in the trace is a flow (arrow) from
//! an instant `wakes <comm:tid>` on the waker's track to the wakee's
//! `Runnable` slice; every wait slice names its waker in a `waker` argument.
//! The samples are instants named by subclass (`cpu`, `io`, `lock`,
//! `runqueue`, `blocked`) with a `points` argument and their call stack
//! (root first, blocked stacks ending in the subclass's pseudo frame).
//! Event names, argument names and values, function names, frames and
//! callstacks are interned. States need the wait segments;
//! a trace recorded without them gets the samples only.

use super::protobuf::Msg;
use super::{class_name, StackSample};
use holdup_analysis::folded::leaf_name;
use holdup_analysis::profile::Filter;
use holdup_trace::{features, Class, Segment, Trace, Waker};
use std::collections::{BTreeMap, HashMap};

/// Field numbers of Perfetto's trace protos.
mod field {
    /// Trace.
    pub const PACKET: u32 = 1;
    /// TracePacket.
    pub const TIMESTAMP: u32 = 8;
    pub const SEQUENCE_ID: u32 = 10;
    pub const TRACK_EVENT: u32 = 11;
    pub const INTERNED_DATA: u32 = 12;
    pub const SEQUENCE_FLAGS: u32 = 13;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    pub const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
    pub const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
    /// TrackDescriptor.
    pub const TD_UUID: u32 = 1;
    pub const TD_PROCESS: u32 = 3;
    pub const TD_THREAD: u32 = 4;
    pub const TD_PARENT_UUID: u32 = 5;
    /// ProcessDescriptor.
    pub const PD_PID: u32 = 1;
    pub const PD_PROCESS_NAME: u32 = 6;
    /// ThreadDescriptor.
    pub const THD_PID: u32 = 1;
    pub const THD_TID: u32 = 2;
    pub const THD_THREAD_NAME: u32 = 5;
    /// TrackEvent.
    pub const TE_DEBUG_ANNOTATIONS: u32 = 4;
    pub const TE_TYPE: u32 = 9;
    pub const TE_TRACK_UUID: u32 = 11;
    pub const TE_NAME_IID: u32 = 10;
    pub const TE_FLOW_IDS: u32 = 47;
    pub const TE_TERMINATING_FLOW_IDS: u32 = 48;
    pub const TE_CALLSTACK_IID: u32 = 56;
    pub const TYPE_SLICE_BEGIN: u64 = 1;
    pub const TYPE_SLICE_END: u64 = 2;
    pub const TYPE_INSTANT: u64 = 3;
    /// DebugAnnotation.
    pub const DA_NAME_IID: u32 = 1;
    pub const DA_UINT_VALUE: u32 = 3;
    pub const DA_STRING_VALUE_IID: u32 = 17;
    /// InternedData.
    pub const ID_EVENT_NAMES: u32 = 2;
    pub const ID_DEBUG_ANNOTATION_NAMES: u32 = 3;
    pub const ID_DEBUG_ANNOTATION_STRING_VALUES: u32 = 29;
    pub const ID_FUNCTION_NAMES: u32 = 5;
    pub const ID_FRAMES: u32 = 6;
    pub const ID_CALLSTACKS: u32 = 7;
    /// EventName, DebugAnnotationName (iid, name); InternedString (iid,
    /// str); Frame, Callstack (profiling/profile_common.proto).
    pub const IID: u32 = 1;
    pub const IS_STR: u32 = 2;
    pub const FR_FUNCTION_NAME_ID: u32 = 2;
    pub const FR_LINE_NUMBER: u32 = 6;
    pub const CS_FRAME_IDS: u32 = 2;
    /// TracePacket.ftrace_events: FtraceEventBundle (ftrace_event_bundle.proto).
    pub const FTRACE_EVENTS: u32 = 1;
    pub const FB_CPU: u32 = 1;
    pub const FB_EVENT: u32 = 2;
    /// FtraceEvent (ftrace_event.proto).
    pub const FE_TIMESTAMP: u32 = 1;
    pub const FE_PID: u32 = 2;
    pub const FE_SCHED_SWITCH: u32 = 4;
    pub const FE_SCHED_WAKING: u32 = 20;
    /// SchedSwitchFtraceEvent (sched.proto).
    pub const SS_PREV_COMM: u32 = 1;
    pub const SS_PREV_PID: u32 = 2;
    pub const SS_PREV_PRIO: u32 = 3;
    pub const SS_PREV_STATE: u32 = 4;
    pub const SS_NEXT_COMM: u32 = 5;
    pub const SS_NEXT_PID: u32 = 6;
    pub const SS_NEXT_PRIO: u32 = 7;
    /// SchedWakingFtraceEvent (sched.proto).
    pub const SW_COMM: u32 = 1;
    pub const SW_PID: u32 = 2;
    pub const SW_PRIO: u32 = 3;
    pub const SW_SUCCESS: u32 = 4;
    pub const SW_TARGET_CPU: u32 = 5;
}

/// The name of the state a thread is in while it waits in a subclass.
pub fn wait_state(class: Class) -> &'static str {
    match class {
        Class::Io => "Uninterruptible (I/O)",
        Class::Sched => "Runnable",
        Class::Cpu | Class::Lock | Class::Other => "Sleeping",
    }
}

pub const RUNNING: &str = "Running";
pub const RUNNABLE: &str = "Runnable";

/// Track uuids: processes and threads in separate ranges.
fn process_uuid(pid: u32) -> u64 {
    1 << 32 | u64::from(pid)
}
fn thread_uuid(tid: u32) -> u64 {
    2 << 32 | u64::from(tid)
}

/// A debug annotation's value.
enum Arg {
    Uint(u64),
    Str(String),
}

/// One track event, before encoding.
struct Event {
    time: u64,
    tid: u32,
    kind: u64,
    name: String,
    args: Vec<(&'static str, Arg)>,
    flow: Option<u64>,
    terminating_flow: Option<u64>,
    /// Index into the samples, for the call stack.
    sample: Option<usize>,
}

impl Event {
    fn new(time: u64, tid: u32, kind: u64, name: &str) -> Event {
        Event {
            time,
            tid,
            kind,
            name: name.to_string(),
            args: Vec::new(),
            flow: None,
            terminating_flow: None,
            sample: None,
        }
    }
}

/// Interned strings, frames and callstacks of the one sequence.
#[derive(Default)]
struct Interned {
    event_names: HashMap<String, u64>,
    arg_names: HashMap<&'static str, u64>,
    arg_strings: HashMap<String, u64>,
    names: HashMap<String, u64>,
    frames: HashMap<(u64, u32), u64>,
    stacks: HashMap<Vec<u64>, u64>,
}

/// The iid of `s` in `table`, adding it (as field `table_field` of the new
/// interned data) if it is new: every interned string message is (iid = 1,
/// string = 2).
fn intern_string<K>(table: &mut HashMap<K, u64>, s: K, table_field: u32, new: &mut Msg) -> u64
where
    K: std::hash::Hash + Eq + AsRef<str>,
{
    if let Some(&iid) = table.get(&s) {
        return iid;
    }
    let iid = table.len() as u64 + 1;
    let mut m = Msg::default();
    m.int(field::IID, iid);
    m.bytes(field::IS_STR, s.as_ref().as_bytes());
    new.msg(table_field, m);
    table.insert(s, iid);
    iid
}

impl Interned {
    fn name(&mut self, name: &str, new: &mut Msg) -> u64 {
        match self.names.get(name) {
            Some(&iid) => iid,
            None => intern_string(
                &mut self.names,
                name.to_string(),
                field::ID_FUNCTION_NAMES,
                new,
            ),
        }
    }

    fn frame(&mut self, name: &str, line: u32, new: &mut Msg) -> u64 {
        let name = self.name(name, new);
        if let Some(&iid) = self.frames.get(&(name, line)) {
            return iid;
        }
        let iid = self.frames.len() as u64 + 1;
        let mut m = Msg::default();
        m.int(field::IID, iid);
        m.int(field::FR_FUNCTION_NAME_ID, name);
        m.int(field::FR_LINE_NUMBER, u64::from(line));
        new.msg(field::ID_FRAMES, m);
        self.frames.insert((name, line), iid);
        iid
    }

    /// The callstack of a sample, root first; new entries go into `new`.
    fn callstack(&mut self, s: &StackSample, new: &mut Msg) -> u64 {
        let mut frames = Vec::new();
        for f in s.frames.iter().rev() {
            for func in f.funcs.iter().rev() {
                frames.push(self.frame(&func.name, func.line, new));
            }
        }
        if let Some(leaf) = leaf_name(s.class) {
            frames.push(self.frame(leaf, 0, new));
        }
        if let Some(&iid) = self.stacks.get(&frames) {
            return iid;
        }
        let iid = self.stacks.len() as u64 + 1;
        let mut m = Msg::default();
        m.int(field::IID, iid);
        m.packed(field::CS_FRAME_IDS, frames.iter().copied());
        new.msg(field::ID_CALLSTACKS, m);
        self.stacks.insert(frames, iid);
        iid
    }
}

/// The state slices and wakeup flows of one thread's segments (sorted by
/// start) over its lifetime `[start, end)`.
fn thread_states(
    trace: &Trace,
    segments: &[&Segment],
    (start, end): (u64, u64),
    kept: &BTreeMap<u32, u32>,
    next_flow: &mut u64,
    out: &mut Vec<Event>,
) {
    let Some(first) = segments.first() else {
        return;
    };
    let tid = first.tid;
    let slice = |out: &mut Vec<Event>, from: u64, to: u64, name: &str| -> Option<usize> {
        if to <= from {
            return None;
        }
        out.push(Event::new(from, tid, field::TYPE_SLICE_BEGIN, name));
        out.push(Event::new(to, tid, field::TYPE_SLICE_END, ""));
        Some(out.len() - 2)
    };
    let mut cursor = start.min(first.start);
    for seg in segments {
        if seg.start < cursor {
            continue; // overlaps the previous one: a damaged trace
        }
        slice(out, cursor, seg.start, RUNNING);
        let wake = match seg.class {
            Class::Sched => seg.start,
            _ if seg.wake == 0 => seg.end,
            _ => seg.wake.clamp(seg.start, seg.end),
        };
        let waker = trace.waker_name(seg.waker);
        if let Some(i) = slice(out, seg.start, wake, wait_state(seg.class)) {
            out[i].args.push(("waker", Arg::Str(waker.clone())));
        }
        // The flow starts at the waker, written first: at equal times the
        // order of the packets decides.
        let flow = match seg.waker {
            Waker::Thread(w) if kept.contains_key(&w) && wake < seg.end => {
                let id = *next_flow;
                *next_flow += 1;
                let name = format!("wakes {}", trace.waker_name(Waker::Thread(tid)));
                let mut e = Event::new(wake, w, field::TYPE_INSTANT, &name);
                e.flow = Some(id);
                out.push(e);
                Some(id)
            }
            _ => None,
        };
        if let Some(i) = slice(out, wake, seg.end, RUNNABLE) {
            out[i].args.push(("waker", Arg::Str(waker.clone())));
            out[i].terminating_flow = flow;
        }
        cursor = seg.end;
    }
    slice(out, cursor, end.max(cursor), RUNNING);
}

/// The kernel's `prev_state` of a thread switched out to wait in a subclass
/// (TASK_REPORT bits: 0 running, 1 interruptible, 2 uninterruptible).
fn prev_state(class: Class) -> u64 {
    match class {
        Class::Sched => 0,
        Class::Io => 2,
        Class::Cpu | Class::Lock | Class::Other => 1,
    }
}

/// A scheduler event on one CPU, before pairing into `sched_switch`es.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum SchedEvent {
    /// The wakee, its waker's tid (0 for interrupts and untraced threads),
    /// and the CPU it will run on.
    Waking { tid: u32, waker: u32, target: u16 },
    /// Switched in.
    In { tid: u32 },
    /// Switched out, with its `prev_state`.
    Out { tid: u32, state: u64 },
}

/// Per CPU, by time: when each thread of `segments` was switched out (on
/// the CPU it last ran on: that of its previous segment or latest on-CPU
/// sample; unknown ones are left out), woken and switched in.
fn sched_events(
    trace: &Trace,
    segments: &BTreeMap<u32, Vec<&Segment>>,
) -> BTreeMap<u16, Vec<(u64, SchedEvent)>> {
    let mut on_cpu: HashMap<u32, Vec<(u64, u16)>> = HashMap::new();
    for s in trace.samples.iter().filter(|s| s.class == Class::Cpu) {
        if segments.contains_key(&s.tid) {
            on_cpu.entry(s.tid).or_default().push((s.time, s.cpu));
        }
    }
    let mut per_cpu: BTreeMap<u16, Vec<(u64, SchedEvent)>> = BTreeMap::new();
    for (&tid, segs) in segments {
        let mut samples = on_cpu.remove(&tid).unwrap_or_default();
        samples.sort_unstable();
        // (time, CPU) of the latest switch in.
        let mut switched_in: Option<(u64, u16)> = None;
        for seg in segs {
            let sampled = samples.partition_point(|&(t, _)| t <= seg.start);
            let sampled = sampled.checked_sub(1).map(|i| samples[i]);
            if let Some((_, cpu)) = switched_in.max(sampled) {
                let state = prev_state(seg.class);
                per_cpu
                    .entry(cpu)
                    .or_default()
                    .push((seg.start, SchedEvent::Out { tid, state }));
            }
            let Some(cpu) = seg.cpu else { continue };
            if seg.class != Class::Sched && seg.wake != 0 {
                let waker = match seg.waker {
                    Waker::Thread(w) if segments.contains_key(&w) => w,
                    _ => 0,
                };
                let waking = SchedEvent::Waking {
                    tid,
                    waker,
                    target: cpu,
                };
                let at = seg.wake.clamp(seg.start, seg.end);
                per_cpu.entry(cpu).or_default().push((at, waking));
            }
            per_cpu
                .entry(cpu)
                .or_default()
                .push((seg.end, SchedEvent::In { tid }));
            switched_in = Some((seg.end, cpu));
        }
    }
    for events in per_cpu.values_mut() {
        events.sort_unstable();
    }
    per_cpu
}

/// The wait segments as ftrace's `sched_switch` and `sched_waking` events,
/// one bundle per CPU: what Perfetto's trace processor turns into its
/// `thread_state` and `sched` tables (the UI's thread-state and CPU
/// tracks). At one instant on one CPU a thread switched out and another
/// switched in make one switch; the others switch from or to the idle
/// task (pid 0), as do threads that the trace does not show.
fn sched_bundles(
    trace: &Trace,
    segments: &BTreeMap<u32, Vec<&Segment>>,
    comm: &dyn Fn(u32) -> String,
) -> Vec<Msg> {
    const PRIO: u64 = 120;
    let name = |tid: u32, cpu: u16| match tid {
        0 => format!("swapper/{cpu}"),
        t => comm(t),
    };
    let mut bundles = Vec::new();
    for (cpu, events) in sched_events(trace, segments) {
        let mut bundle = Msg::default();
        bundle.int(field::FB_CPU, u64::from(cpu));
        let mut emit = |time: u64, pid: u32, kind: u32, body: Msg| {
            let mut e = Msg::default();
            e.int(field::FE_TIMESTAMP, time);
            e.int(field::FE_PID, u64::from(pid));
            e.msg(kind, body);
            bundle.msg(field::FB_EVENT, e);
        };
        let switch = |(prev, state): (u32, u64), next: u32| {
            let mut s = Msg::default();
            s.bytes(field::SS_PREV_COMM, name(prev, cpu).as_bytes());
            s.int(field::SS_PREV_PID, u64::from(prev));
            s.int(field::SS_PREV_PRIO, PRIO);
            s.int(field::SS_PREV_STATE, state);
            s.bytes(field::SS_NEXT_COMM, name(next, cpu).as_bytes());
            s.int(field::SS_NEXT_PID, u64::from(next));
            s.int(field::SS_NEXT_PRIO, PRIO);
            s
        };
        let mut i = 0;
        while i < events.len() {
            let time = events[i].0;
            let j = i + events[i..].partition_point(|e| e.0 == time);
            let mut ins = Vec::new();
            let mut outs = Vec::new();
            for &(_, e) in &events[i..j] {
                match e {
                    SchedEvent::Waking { tid, waker, target } => {
                        let mut w = Msg::default();
                        w.bytes(field::SW_COMM, comm(tid).as_bytes());
                        w.int(field::SW_PID, u64::from(tid));
                        w.int(field::SW_PRIO, PRIO);
                        w.int(field::SW_SUCCESS, 1);
                        w.int(field::SW_TARGET_CPU, u64::from(target));
                        emit(time, waker, field::FE_SCHED_WAKING, w);
                    }
                    SchedEvent::In { tid } => ins.push(tid),
                    SchedEvent::Out { tid, state } => outs.push((tid, state)),
                }
            }
            // A thread both in and out now ran for no time: in first.
            let mut switches = Vec::new();
            for (tid, state) in outs {
                match ins.iter().position(|&t| t != tid) {
                    Some(k) => switches.push(((tid, state), ins.remove(k))),
                    None => switches.push(((tid, state), 0)),
                }
            }
            for tid in ins {
                switches.insert(0, ((0, 0), tid));
            }
            for (prev, next) in switches {
                emit(time, prev.0, field::FE_SCHED_SWITCH, switch(prev, next));
            }
            i = j;
        }
        bundles.push(bundle);
    }
    bundles
}

/// The trace, encoded.
pub fn encode(trace: &Trace, samples: &[StackSample], filter: &Filter) -> Vec<u8> {
    let comm = |tid: u32| match trace.threads.get(&tid) {
        Some(t) if !t.comm.is_empty() => t.comm.clone(),
        _ => "[unknown]".to_string(),
    };
    // Kept threads (tid → pid): those with samples or segments.
    let mut kept: BTreeMap<u32, u32> = samples.iter().map(|s| (s.tid, s.pid)).collect();
    let mut segments: BTreeMap<u32, Vec<&Segment>> = BTreeMap::new();
    if trace.features & features::SEGMENTS != 0 {
        for seg in &trace.segments {
            if filter.keeps(seg.pid, seg.tid, &comm(seg.tid)) {
                kept.insert(seg.tid, seg.pid);
                segments.entry(seg.tid).or_default().push(seg);
            }
        }
    }

    let mut events = Vec::new();
    let mut next_flow = 1;
    for (tid, segs) in &mut segments {
        segs.sort_by_key(|s| s.start);
        let life = trace.threads.get(tid).map_or((0, trace.end_ns), |t| {
            (t.start, if t.end == 0 { trace.end_ns } else { t.end })
        });
        let life = (life.0.max(trace.header.start_ns), life.1);
        thread_states(trace, segs, life, &kept, &mut next_flow, &mut events);
    }
    for (i, s) in samples.iter().enumerate() {
        let mut e = Event::new(s.time, s.tid, field::TYPE_INSTANT, class_name(s.class));
        e.args.push(("points", Arg::Uint(s.points)));
        e.sample = Some(i);
        events.push(e);
    }
    // In time order; at equal times a slice ends before the next begins.
    events.sort_by_key(|e| (e.time, e.kind != field::TYPE_SLICE_END));

    let mut trace_msg = Msg::default();
    let mut packet = |p: Msg| trace_msg.msg(field::PACKET, p);
    let mut first = Msg::default();
    first.int(field::TIMESTAMP, trace.header.start_ns);
    first.int(field::SEQUENCE_ID, 1);
    first.int(field::SEQUENCE_FLAGS, field::SEQ_INCREMENTAL_STATE_CLEARED);
    packet(first);
    let mut pids: Vec<u32> = kept.values().copied().collect();
    pids.sort_unstable();
    pids.dedup();
    for pid in pids {
        let mut pd = Msg::default();
        pd.int(field::PD_PID, u64::from(pid));
        // The main thread's name, if the trace saw it.
        if let Some(t) = trace.threads.get(&pid).filter(|t| !t.comm.is_empty()) {
            pd.bytes(field::PD_PROCESS_NAME, t.comm.as_bytes());
        }
        let mut td = Msg::default();
        td.int(field::TD_UUID, process_uuid(pid));
        td.msg(field::TD_PROCESS, pd);
        let mut p = Msg::default();
        p.int(field::SEQUENCE_ID, 1);
        p.msg(field::TRACK_DESCRIPTOR, td);
        packet(p);
    }
    for (&tid, &pid) in &kept {
        let mut thd = Msg::default();
        thd.int(field::THD_PID, u64::from(pid));
        thd.int(field::THD_TID, u64::from(tid));
        thd.bytes(field::THD_THREAD_NAME, comm(tid).as_bytes());
        let mut td = Msg::default();
        td.int(field::TD_UUID, thread_uuid(tid));
        td.int(field::TD_PARENT_UUID, process_uuid(pid));
        td.msg(field::TD_THREAD, thd);
        let mut p = Msg::default();
        p.int(field::SEQUENCE_ID, 1);
        p.msg(field::TRACK_DESCRIPTOR, td);
        packet(p);
    }
    for bundle in sched_bundles(trace, &segments, &comm) {
        let mut p = Msg::default();
        p.int(field::SEQUENCE_ID, 1);
        p.msg(field::FTRACE_EVENTS, bundle);
        packet(p);
    }
    let mut interned = Interned::default();
    for e in events {
        let mut te = Msg::default();
        te.int(field::TE_TYPE, e.kind);
        te.int(field::TE_TRACK_UUID, thread_uuid(e.tid));
        let mut new = Msg::default();
        if !e.name.is_empty() {
            let iid = intern_string(
                &mut interned.event_names,
                e.name,
                field::ID_EVENT_NAMES,
                &mut new,
            );
            te.int(field::TE_NAME_IID, iid);
        }
        for (name, value) in e.args {
            let mut da = Msg::default();
            let iid = intern_string(
                &mut interned.arg_names,
                name,
                field::ID_DEBUG_ANNOTATION_NAMES,
                &mut new,
            );
            da.int(field::DA_NAME_IID, iid);
            match value {
                Arg::Uint(v) => {
                    da.key(field::DA_UINT_VALUE, 0);
                    da.varint(v);
                }
                Arg::Str(s) => {
                    let iid = intern_string(
                        &mut interned.arg_strings,
                        s,
                        field::ID_DEBUG_ANNOTATION_STRING_VALUES,
                        &mut new,
                    );
                    da.int(field::DA_STRING_VALUE_IID, iid);
                }
            }
            te.msg(field::TE_DEBUG_ANNOTATIONS, da);
        }
        if let Some(id) = e.flow {
            te.fixed64(field::TE_FLOW_IDS, id);
        }
        if let Some(id) = e.terminating_flow {
            te.fixed64(field::TE_TERMINATING_FLOW_IDS, id);
        }
        if let Some(i) = e.sample {
            te.int(
                field::TE_CALLSTACK_IID,
                interned.callstack(&samples[i], &mut new),
            );
        }
        let mut p = Msg::default();
        p.int(field::TIMESTAMP, e.time);
        p.int(field::SEQUENCE_ID, 1);
        p.int(field::SEQUENCE_FLAGS, field::SEQ_NEEDS_INCREMENTAL_STATE);
        if !new.0.is_empty() {
            p.msg(field::INTERNED_DATA, new);
        }
        p.msg(field::TRACK_EVENT, te);
        packet(p);
    }
    trace_msg.0
}
