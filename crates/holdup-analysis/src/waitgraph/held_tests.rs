//! What the waited-for side did, per edge, on synthetic traces whose
//! answer is known by construction (times in ms, a point per ms).

use super::*;
use crate::holder::Activity;
use holdup_trace::synth::{waits, TraceBuilder, WAIT_FEATURES};
use holdup_trace::{Class, Waker};

/// The graph of a synthetic trace, with the edges' holder activity.
fn graph(r: &TraceBuilder) -> WaitGraph {
    let recs = r.records();
    let mut src = InMemory {
        header: r.header(),
        features: WAIT_FEATURES,
        records: &recs,
    };
    let mut g = analyze(&mut src, &Options::default()).unwrap();
    add_holders(&r.trace(&r.header(), WAIT_FEATURES), &mut g);
    g
}

fn held<'g>(g: &'g WaitGraph, from: &str, to: &str) -> &'g crate::holder::RowHeld {
    let e = g
        .edge(g.node(from).unwrap(), g.node(to).unwrap())
        .unwrap_or_else(|| panic!("no edge {from} → {to}"));
    e.held
        .as_ref()
        .unwrap_or_else(|| panic!("{from} → {to}: nothing held"))
}

/// Samples of the activities `pick` accepts.
fn sum(h: &crate::holder::RowHeld, pick: impl Fn(&Activity) -> bool) -> f64 {
    h.activities
        .iter()
        .filter(|a| pick(a))
        .map(|a| a.samples)
        .sum()
}

#[track_caller]
fn near(what: &str, got: f64, want: f64) {
    assert!((got - want).abs() < 0.05, "{what}: {got}, expected {want}");
}

#[test]
fn the_edge_to_the_consumer_carries_its_disk_write() {
    // Figure 1: A waits for B over [c+2, c+10.001) of every 10 ms cycle;
    // B runs until c+4, then waits for its write until c+10, then runs.
    let g = graph(&waits::figure_1());
    let h = held(&g, "t:10", "t:11");
    assert_eq!(h.samples, 800.0, "A's blocked points on B");
    let write = sum(h, |a| {
        a.class == Class::Io && a.tid == 11 && a.site.as_deref() == Some("consume → pwrite64")
    });
    // 6 of every 8.001 ms of A's wait.
    near("B's write", write, 800.0 * 6.0 / 8.001);
    let cpu = sum(h, |a| a.class == Class::Cpu && a.tid == 11);
    // The last cycle's 0.001 ms falls after the recording's end.
    near("B on CPU", cpu, (99.0 * 2.001 + 2.0) * 8.0 / 8.001);
    assert!(h.activities.iter().all(|a| a.via.is_empty()));
    // Heaviest first.
    assert_eq!(h.activities[0].class, Class::Io);
    // The disk ended B's waits: its edge to the disk has no holder.
    let disk = g.node("disk:254:0").unwrap();
    assert!(g
        .edge(g.node("t:11").unwrap(), disk)
        .unwrap()
        .held
        .is_none());
}

/// A → B (mutex) → C (pipe) → disk, per 10 ms cycle: A waits [1, 9) for
/// B; B runs [0, 2), waits [2, 8) for C, runs [8, 10); C runs [0, 3),
/// reads [3, 7) from the disk, runs [7, 10).
fn chain() -> TraceBuilder {
    let (a, b, c) = (1, 2, 3);
    let mut r = TraceBuilder::new(1000.0);
    r.comm(100, a, "waiter");
    r.comm(100, b, "relay");
    r.comm(100, c, "feeder");
    r.stack(1, &["pthread_mutex_lock", "take"]);
    r.stack(2, &["read", "ask"]);
    r.stack(3, &["pread64", "read_block"]);
    r.stack(4, &["relay_work"]);
    r.stack(5, &["feed_work"]);
    for k in 0..100 {
        let t = 10.0 * k as f64;
        r.seg(a, t + 1.0, t + 9.0, t + 9.0, Class::Lock, Waker::Thread(b));
        r.blocked(a, (t + 1.0, t + 9.0), Class::Lock, Waker::Thread(b), 1, 8);
        r.seg(b, t + 2.0, t + 8.0, t + 8.0, Class::Other, Waker::Thread(c));
        r.blocked(b, (t + 2.0, t + 8.0), Class::Other, Waker::Thread(c), 2, 6);
        r.cpu(b, t + 1.5, 4);
        r.seg(c, t + 3.0, t + 7.0, t + 7.0, Class::Io, Waker::Irq(24));
        r.blocked(c, (t + 3.0, t + 7.0), Class::Io, Waker::Irq(24), 3, 4);
        r.cpu(c, t + 2.5, 5);
        r.cpu(c, t + 7.5, 5);
    }
    r
}

#[test]
fn a_chain_ends_on_the_disk_read_of_the_last_thread() {
    let g = graph(&chain());
    let h = held(&g, "t:1", "t:2");
    assert_eq!(h.samples, 800.0);
    // Of A's 8 ms: B runs [1, 2) and [8, 9); C, through B's pipe wait, runs
    // [2, 3) and [7, 8) and reads [3, 7).
    let through_b = |a: &Activity| a.tid == 3 && a.via.len() == 1 && a.via[0].tid == 2;
    near(
        "C's read",
        sum(h, |a| through_b(a) && a.class == Class::Io),
        400.0,
    );
    near(
        "C on CPU",
        sum(h, |a| through_b(a) && a.class == Class::Cpu),
        200.0,
    );
    near(
        "B on CPU",
        sum(h, |a| {
            a.tid == 2 && a.via.is_empty() && a.class == Class::Cpu
        }),
        200.0,
    );
    let read = h.activities.iter().find(|a| a.class == Class::Io).unwrap();
    assert_eq!(read.site.as_deref(), Some("read_block → pread64"));
    assert_eq!(read.via[0].class, Class::Other);
    // B's own edge: C over [2, 8), the read 4 ms of 6.
    let h = held(&g, "t:2", "t:3");
    assert_eq!(h.samples, 600.0);
    near("C's read for B", sum(h, |a| a.class == Class::Io), 400.0);
    // Nothing is counted twice: the parts add up to the waits.
    near("A's total", sum(held(&g, "t:1", "t:2"), |_| true), 800.0);
}

#[test]
fn a_graph_without_thread_wakeups_is_left_as_it_is() {
    let mut r = TraceBuilder::new(100.0);
    r.stack(1, &["nanosleep"]);
    r.seg(1, 10.0, 20.0, 20.0, Class::Other, Waker::Timer);
    r.blocked(1, (10.0, 20.0), Class::Other, Waker::Timer, 1, 10);
    let g = graph(&r);
    assert!(g.edges.iter().all(|e| e.held.is_none()));
    assert!(g.notes.iter().all(|n| !n.contains("waited-for side")));
}

/// A loaded trace as the records a recording would hold: names first,
/// then segments and samples in the order they end.
fn records_of(t: &holdup_trace::Trace) -> Vec<holdup_trace::Record> {
    use holdup_trace::{Record, Stack};
    let mut v: Vec<Record> = t
        .threads
        .values()
        .map(|th| Record::Comm {
            time: t.header.start_ns,
            pid: th.pid,
            tid: th.tid,
            comm: th.comm.clone(),
        })
        .collect();
    v.extend(t.stacks.iter().map(|(&id, frames)| {
        Record::Stack(Stack {
            id,
            frames: frames.clone(),
        })
    }));
    let mut timed: Vec<(u64, Record)> = t
        .segments
        .iter()
        .map(|s| (s.end, Record::Segment(s.clone())))
        .chain(t.samples.iter().map(|s| (s.end, Record::Sample(s.clone()))))
        .collect();
    timed.sort_by_key(|(k, _)| *k);
    v.extend(timed.into_iter().map(|(_, r)| r));
    v
}

#[test]
#[ignore = "a measurement: prints the rate, run with --ignored --nocapture"]
fn rate_of_the_edges_on_a_storm() {
    let trace = crate::holder::tests::storm(200, 10_000);
    let recs = records_of(&trace);
    let mut src = InMemory {
        header: trace.header.clone(),
        features: WAIT_FEATURES,
        records: &recs,
    };
    let mut g = analyze(&mut src, &Options::default()).unwrap();
    let t = std::time::Instant::now();
    add_holders(&trace, &mut g);
    let secs = t.elapsed().as_secs_f64();
    let with = g.edges.iter().filter(|e| e.held.is_some()).count();
    println!(
        "{} scheduler events, {with} of {} edges annotated in {secs:.3} s: {:.2} M events/s",
        g.events(),
        g.edges.len(),
        g.events() as f64 / secs / 1e6
    );
    assert!(with > 0);
}
