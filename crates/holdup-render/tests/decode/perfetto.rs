//! Perfetto traces decoded with the field numbers of Perfetto's protos:
//! track events (thread states, wakeup flows, samples with stacks) and the
//! scheduler's ftrace events. Times are ms from the small trace's start.

use super::protobuf::*;
use holdup_trace::synth::small::T0;
use holdup_trace::synth::MS;
use std::collections::BTreeMap;
use std::path::Path;

/// One track event: (time in ms since the trace start, thread, type, name,
/// arguments, flow ids, terminating flow ids, call stack root first).
#[derive(Debug, Clone)]
pub struct PerfettoEvent {
    pub ms: f64,
    pub tid: u64,
    pub kind: u64,
    pub name: String,
    pub args: BTreeMap<String, String>,
    pub flows: Vec<u64>,
    pub terminating: Vec<u64>,
    pub stack: Vec<String>,
}

/// Threads (tid → (pid, name)), processes (pid → name) and events in file order.
pub type PerfettoTrace = (
    BTreeMap<u64, (u64, String)>,
    BTreeMap<u64, String>,
    Vec<PerfettoEvent>,
);

pub fn decode_perfetto(path: &Path) -> PerfettoTrace {
    let raw = std::fs::read(path).unwrap();
    let text = |v: &Val| match v {
        Val::Bytes(b) => String::from_utf8(b.clone()).unwrap(),
        Val::Int(_) => panic!("not a string"),
    };
    let string = |fs: &[(u32, Val)], field: u32| {
        fs.iter()
            .find(|(f, _)| *f == field)
            .map(|(_, v)| text(v))
            .unwrap_or_default()
    };
    let mut threads = BTreeMap::new();
    let mut processes = BTreeMap::new();
    let mut uuids: BTreeMap<u64, u64> = BTreeMap::new();
    let mut names: BTreeMap<u64, String> = BTreeMap::new();
    // Event names, argument names, argument values.
    let mut strings: [BTreeMap<u64, String>; 3] = Default::default();
    let mut frames: BTreeMap<u64, String> = BTreeMap::new();
    let mut stacks: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut events = Vec::new();
    let packets = msgs(&fields(&raw), 1);
    assert_eq!(int(&packets[0], 13), 1, "the first packet clears the state");
    for p in &packets {
        assert_eq!(int(p, 10), 1, "one sequence");
        for td in msgs(p, 60) {
            if let Some(thd) = msgs(&td, 4).first() {
                threads.insert(int(thd, 2), (int(thd, 1), string(thd, 5)));
                uuids.insert(int(&td, 1), int(thd, 2));
            }
            if let Some(pd) = msgs(&td, 3).first() {
                processes.insert(int(pd, 1), string(pd, 6));
            }
        }
        for id in msgs(p, 12) {
            for (table, field) in strings.iter_mut().zip([2, 3, 29]) {
                for n in msgs(&id, field) {
                    table.insert(int(&n, 1), string(&n, 2));
                }
            }
            for n in msgs(&id, 5) {
                names.insert(int(&n, 1), string(&n, 2));
            }
            for f in msgs(&id, 6) {
                let name = names[&int(&f, 2)].clone();
                frames.insert(int(&f, 1), format!("{name}:{}", int(&f, 6)));
            }
            for c in msgs(&id, 7) {
                let stack = ints(&c, 2).iter().map(|i| frames[i].clone()).collect();
                stacks.insert(int(&c, 1), stack);
            }
        }
        for te in msgs(p, 11) {
            assert_eq!(int(p, 13), 2, "events use the interned state");
            let args = msgs(&te, 4)
                .iter()
                .map(|da| {
                    let v = if int(da, 3) != 0 {
                        int(da, 3).to_string()
                    } else {
                        strings[2][&int(da, 17)].clone()
                    };
                    (strings[1][&int(da, 1)].clone(), v)
                })
                .collect();
            let stack = match int(&te, 56) {
                0 => Vec::new(),
                iid => stacks[&iid].clone(),
            };
            events.push(PerfettoEvent {
                ms: (int(p, 8) - T0) as f64 / MS as f64,
                tid: uuids[&int(&te, 11)],
                kind: int(&te, 9),
                name: strings[0].get(&int(&te, 10)).cloned().unwrap_or_default(),
                args,
                flows: ints(&te, 47),
                terminating: ints(&te, 48),
                stack,
            });
        }
    }
    (threads, processes, events)
}

/// Per thread, its slices in order: (state, start ms, end ms, waker).
pub fn perfetto_states(events: &[PerfettoEvent]) -> BTreeMap<u64, Vec<(String, f64, f64, String)>> {
    let mut open: BTreeMap<u64, Vec<&PerfettoEvent>> = BTreeMap::new();
    let mut out: BTreeMap<u64, Vec<_>> = BTreeMap::new();
    for e in events {
        match e.kind {
            1 => open.entry(e.tid).or_default().push(e),
            2 => {
                let b = open.get_mut(&e.tid).and_then(|v| v.pop()).expect("begin");
                let waker = b.args.get("waker").cloned().unwrap_or_default();
                out.entry(e.tid)
                    .or_default()
                    .push((b.name.clone(), b.ms, e.ms, waker));
            }
            _ => {}
        }
    }
    assert!(open.values().all(Vec::is_empty), "unclosed slices");
    out
}

/// A readable listing of a decoded Perfetto trace, for the golden file.
pub fn perfetto_listing(path: &Path) -> String {
    let (threads, processes, events) = decode_perfetto(path);
    let mut out = format!("processes: {processes:?}\nthreads: {threads:?}\n");
    for e in events {
        out += &format!(
            "{:8.3} tid {} type {} {:?} {:?} flows {:?} terminating {:?} stack {:?}\n",
            e.ms, e.tid, e.kind, e.name, e.args, e.flows, e.terminating, e.stack
        );
    }
    for e in decode_ftrace(path) {
        out += &format!("{e:?}\n");
    }
    out
}

/// An ftrace event of a Perfetto trace, as ftrace_event.proto and
/// sched.proto define them (ms since the trace start).
#[derive(Debug, Clone, PartialEq)]
pub enum Ftrace {
    /// cpu, ms, (prev pid, prev comm, prev_state), (next pid, next comm).
    Switch(u64, f64, (u64, String, u64), (u64, String)),
    /// cpu, ms, waker pid, wakee pid, wakee comm, target cpu.
    Waking(u64, f64, u64, u64, String, u64),
}

pub fn decode_ftrace(path: &Path) -> Vec<Ftrace> {
    let raw = std::fs::read(path).unwrap();
    let text = |fs: &[(u32, Val)], field: u32| match fs.iter().find(|(f, _)| *f == field) {
        Some((_, Val::Bytes(b))) => String::from_utf8(b.clone()).unwrap(),
        _ => String::new(),
    };
    let mut out = Vec::new();
    for p in msgs(&fields(&raw), 1) {
        for bundle in msgs(&p, 1) {
            let cpu = int(&bundle, 1);
            for e in msgs(&bundle, 2) {
                let ms = (int(&e, 1) - T0) as f64 / MS as f64;
                for s in msgs(&e, 4) {
                    assert_eq!(int(&e, 2), int(&s, 2), "the switch runs in prev");
                    out.push(Ftrace::Switch(
                        cpu,
                        ms,
                        (int(&s, 2), text(&s, 1), int(&s, 4)),
                        (int(&s, 6), text(&s, 5)),
                    ));
                }
                for w in msgs(&e, 20) {
                    out.push(Ftrace::Waking(
                        cpu,
                        ms,
                        int(&e, 2),
                        int(&w, 2),
                        text(&w, 1),
                        int(&w, 5),
                    ));
                }
            }
        }
    }
    out
}

/// What trace_processor's thread_state table holds, replayed from the
/// scheduler events: per thread, (ms, state, waker) where the state is
/// Running, R, S or D and the waker is the waking event's pid.
pub fn replay_thread_states(events: &[Ftrace]) -> BTreeMap<u64, Vec<(f64, String, Option<u64>)>> {
    let mut states: BTreeMap<u64, Vec<(f64, String, Option<u64>)>> = BTreeMap::new();
    let letter = |state: u64| ["R", "S", "D"][state as usize].to_string();
    for e in events {
        match e {
            Ftrace::Switch(_, ms, (prev, _, state), (next, _)) => {
                states
                    .entry(*prev)
                    .or_default()
                    .push((*ms, letter(*state), None));
                states
                    .entry(*next)
                    .or_default()
                    .push((*ms, "Running".into(), None));
            }
            Ftrace::Waking(_, ms, waker, wakee, _, _) => {
                states
                    .entry(*wakee)
                    .or_default()
                    .push((*ms, "R".into(), Some(*waker)));
            }
        }
    }
    states.remove(&0);
    // Each CPU's bundle is in time order; trace_processor merges them.
    for s in states.values_mut() {
        s.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    states
}
