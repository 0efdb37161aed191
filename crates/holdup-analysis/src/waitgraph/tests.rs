//! The analysis on hand-made records, with hand-worked numbers.

use super::sweep::reference;
use super::*;
use holdup_trace::synth::{waits, TraceBuilder as Rec, MS, WAIT_FEATURES};
use holdup_trace::{Class, Header, Record, Waker};

/// Recording start: times below are offsets from it.
const T0: u64 = 1_000 * MS;

/// The analysis of a synthetic trace.
trait Analyze {
    fn analyze_with(&self, opts: &Options) -> Result<WaitGraph, Error>;
    fn analyze(&self) -> WaitGraph {
        self.analyze_with(&Options::default()).unwrap()
    }
}

impl Analyze for Rec {
    fn analyze_with(&self, opts: &Options) -> Result<WaitGraph, Error> {
        let recs = self.records();
        let mut src = InMemory {
            header: self.header(),
            features: WAIT_FEATURES,
            records: &recs,
        };
        analyze(&mut src, opts)
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / MS as f64
}

#[track_caller]
fn near(what: &str, got: u64, want_ms: f64) {
    assert!(
        (ms(got) - want_ms).abs() < 0.01,
        "{what}: {} ms, expected {want_ms} ms",
        ms(got)
    );
}

fn knot_labels(g: &WaitGraph, i: usize) -> Vec<String> {
    g.knots[i]
        .nodes
        .iter()
        .map(|&n| g.nodes[n].id.clone())
        .collect()
}

#[test]
fn figure_1_knot_is_consumer_and_disk_not_the_producer() {
    let g = waits::figure_1().analyze();
    assert_eq!(g.duration_ns, 1000 * MS);
    assert_eq!(g.stats.segments, 200);
    let (a, b) = (g.node("t:10").unwrap(), g.node("t:11").unwrap());
    let d = g.node("disk:254:0").expect("irq 24 tied to the disk");
    // A → B: A's own wait only, 100 × 8.001 ms.
    near("A→B weight", g.edge(a, b).unwrap().weight_ns, 800.1);
    near("A→B wait", g.edge(a, b).unwrap().wait_ns, 800.1);
    // B → disk: B's own 6 ms plus A's overlapping 6 ms, per cycle.
    near("B→disk wait", g.edge(b, d).unwrap().wait_ns, 600.0);
    near("B→disk weight", g.edge(b, d).unwrap().weight_ns, 1200.0);
    // disk → B: its idle time before each of B's requests, 4 ms first,
    // then 99 × 4.01 ms; the 0.01 ms after the last completion ends with
    // the recording.
    let idle = g.edge(d, b).unwrap();
    assert_eq!(idle.kind, EdgeKind::DeviceIdle);
    near("disk→B wait", idle.wait_ns, 4.0 + 99.0 * 4.01);
    // The disk goes idle 0.01 ms before B is woken, and A waits on B then:
    // both cascade onto disk → B for those 0.01 ms of each cycle.
    near(
        "disk→B weight",
        idle.weight_ns,
        4.0 + 99.0 * 4.01 + 99.0 * 0.02,
    );
    assert!((idle.share - 1.0).abs() < 1e-9);
    // Vertices.
    near("B cpu", g.nodes[b].cpu_ns, 400.0);
    near("B wait", g.nodes[b].wait_ns, 600.0);
    near("A cpu", g.nodes[a].cpu_ns, 199.8);
    near("A runnable", g.nodes[a].runnable_ns, 0.1);
    near("disk busy", g.nodes[d].cpu_ns, 599.0);
    // The knot: B and the disk. A waits longest but is outside.
    assert_eq!(g.knots[0].kind, KnotKind::Knot);
    assert_eq!(knot_labels(&g, 0), vec!["t:11", "disk:254:0"]);
    assert!(!g.knots[0].background);
    assert!(g.nodes[a].wait_ns > g.nodes[b].wait_ns);
    // Stacks on the edges.
    let st = &g.edge(b, d).unwrap().stacks[0];
    assert_eq!(st.folded, "consumer_main;consume;pwrite64");
    assert_eq!(st.short, "pwrite64 ← consume ← consumer_main");
    assert_eq!(st.samples, 600);
    // What B ran before waking A: sampled at c+1, more than a period
    // before the wakeup at c+10.001, so not shown.
    assert!(g.edge(a, b).unwrap().waker_stacks.is_empty());
    assert!(g.notes.is_empty(), "{:?}", g.notes);
}

#[test]
fn long_waits_through_the_first_pass_give_the_same_graph() {
    let r = waits::figure_1();
    let g = r.analyze();
    for (long, budget) in [(0, 1 << 20), (MS, 1 << 20), (5 * MS, 1 << 20), (MS, 7)] {
        let h = r
            .analyze_with(&Options {
                long_ns: long,
                long_budget: budget,
                ..Default::default()
            })
            .unwrap();
        assert!(h.stats.long_segments <= budget as u64);
        if budget == 7 {
            // 100 off-CPU intervals of 8.002 ms stay over budget until the
            // threshold passes them: 1 → 2 → 4 → 8 → 16 ms.
            assert_eq!(h.stats.long_ns, 16 * MS);
            assert_eq!(h.stats.long_segments, 0);
        } else {
            assert!(h.stats.long_segments > 0);
        }
        assert_eq!(g.edges, h.edges, "long_ns {long}");
        assert_eq!(g.knots, h.knots);
    }
}

#[test]
fn waker_stacks_are_what_the_waker_ran_just_before() {
    let mut r = waits::figure_1();
    // B sampled 0.5 ms before each wakeup of A.
    for k in 0..100 {
        r.cpu(11, 10.0 * k as f64 + 9.501, 3);
    }
    let g = r.analyze();
    let (a, b) = (g.node("t:10").unwrap(), g.node("t:11").unwrap());
    let w = &g.edge(a, b).unwrap().waker_stacks;
    assert_eq!(w[0].short, "checksum ← consume ← consumer_main");
    assert_eq!(w[0].samples, 800);
}

/// Four workers pass one lock around: each holds it 1 ms, then waits for
/// it until the other three had their turn.
#[test]
fn contending_workers_merge_into_a_group_with_a_self_loop() {
    let r = waits::contending_workers();
    let ws = [20u32, 21, 22, 23];
    // Each lock wait: (waiter, the holder that woke it, start, end).
    let segs: Vec<(u32, u32, u64, u64)> = r
        .records()
        .into_iter()
        .filter_map(|rec| match rec {
            Record::Segment(s) => match s.waker {
                Waker::Thread(w) => Some((s.tid, w, s.start, s.end)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(segs.len(), 4 * 249);
    let g = r.analyze();
    let grp = g.node("g:worker").expect("a group");
    assert_eq!(g.nodes[grp].tids, ws.to_vec());
    assert_eq!(g.nodes[grp].kind, NodeKind::Group);
    assert_eq!(g.nodes[grp].label, "worker ×4");
    let self_loop = g.edge(grp, grp).expect("self-loop");
    let want: u64 = reference::cascade(&segs).values().sum();
    assert_eq!(self_loop.weight_ns, want);
    near("self-loop wait", self_loop.wait_ns, 249.0 * 4.0 * 3.0);
    // Three waiting threads in a chain: weights 1 + 2 + 3 per ms of
    // raw 3 per ms, but for the first and last rounds.
    assert!(self_loop.weight_ns > self_loop.wait_ns * 19 / 10);
    assert_eq!(g.knots[0].nodes, vec![grp]);
    assert_eq!(g.knots[0].kind, KnotKind::Knot);

    // Without merging: four thread vertices in one knot.
    let g = r
        .analyze_with(&Options {
            merge_similar: false,
            ..Default::default()
        })
        .unwrap();
    assert!(g.node("g:worker").is_none());
    assert_eq!(g.knots[0].nodes.len(), 4);
}

/// Two phases per 6 ms round with a barrier between: A works 3 ms then 1,
/// B 1 then 3; each waits for the other at one barrier.
#[test]
fn load_imbalance_is_a_cycle_between_the_threads() {
    let r = waits::barrier_phases();
    let g = r.analyze();
    let (va, vb) = (g.node("t:30").unwrap(), g.node("t:31").unwrap());
    near("a→b", g.edge(va, vb).unwrap().weight_ns, 200.0);
    near("b→a", g.edge(vb, va).unwrap().weight_ns, 200.0);
    let mut both = vec![va, vb];
    both.sort();
    assert_eq!(g.knots[0].nodes, both);
    assert!(!g.knots[0].background, "4 ms of 6 each: 1.33 cores");
}

/// A disk waits, while idle, for the thread whose request ends the idle
/// period.
#[test]
fn device_idle_goes_to_the_issuer_that_ends_it() {
    let mut r = Rec::new(100.0);
    r.comm(100, 40, "a");
    r.comm(100, 41, "b");
    // Requests at 0, 20, 40 (from 40) and 60 (from 41), 2.5 ms each.
    for (i, tid) in [40, 40, 40, 41].into_iter().enumerate() {
        let t = 20.0 * i as f64;
        r.bio(t, t + 2.5, tid, 8192);
        r.seg(tid, t, t + 2.5, t + 2.5, Class::Io, Waker::Softirq(4));
    }
    // b waits for a over [50, 70): the disk's idle [42.5, 60) waits on b,
    // so 10 ms of it cascade onto b → a.
    r.seg(41, 50.0, 59.0, 59.5, Class::Other, Waker::Thread(40));
    let g = r.analyze();
    let d = g.node("disk:254:0").expect("softirq block with one disk");
    let (a, b) = (g.node("t:40").unwrap(), g.node("t:41").unwrap());
    near("disk busy", g.nodes[d].cpu_ns, 10.0);
    near("disk idle", g.nodes[d].wait_ns, 90.0);
    // Idle [2.5, 20) and [22.5, 40) end with a's requests, [42.5, 60) with
    // b's; [62.5, 100) ends with the recording.
    let da = g.edge(d, a).unwrap();
    near("disk→a", da.wait_ns, 35.0);
    near("disk→b", g.edge(d, b).unwrap().wait_ns, 17.5);
    assert!((da.share - 2.0 / 3.0).abs() < 1e-6);
    assert_eq!(da.count, 3, "requests issued");
    assert_eq!(da.kind, EdgeKind::DeviceIdle);
    // b waited on a over [50, 59): 9 ms own, plus the disk's overlap.
    near("b→a", g.edge(b, a).unwrap().weight_ns, 9.0 + 9.0);
    assert_eq!(g.nodes[d].requests, 4);
    assert_eq!(g.nodes[d].bytes, 4 * 8192);
}

#[test]
fn short_lived_threads_become_one_virtual_thread_waiting_for_its_creator() {
    let mut r = Rec::new(1000.0);
    r.comm(100, 50, "server");
    for (tid, s, e) in [(51u32, 100.0, 150.0), (52, 300.0, 350.0)] {
        r.timed.push((
            T0 + (s * MS as f64) as u64,
            Record::Fork {
                time: T0 + (s * MS as f64) as u64,
                parent_pid: 100,
                parent_tid: 50,
                pid: 100,
                tid,
            },
        ));
        r.timed.push((
            T0 + (e * MS as f64) as u64,
            Record::Exit {
                time: T0 + (e * MS as f64) as u64,
                pid: 100,
                tid,
            },
        ));
        // Each waits 10 ms for the server.
        r.seg(
            tid,
            s + 10.0,
            s + 20.0,
            s + 20.0,
            Class::Other,
            Waker::Thread(50),
        );
    }
    r.seg(50, 0.0, 500.0, 500.0, Class::Other, Waker::Timer);
    let g = r.analyze();
    let v = g.node("v:50").expect("virtual thread");
    let s = g.node("t:50").unwrap();
    assert!(g.nodes[v].short_lived);
    assert_eq!(g.nodes[v].tids, vec![51, 52]);
    assert_eq!(g.nodes[v].label, "short-lived ×2 of server:50");
    let e = g.edge(v, s).unwrap();
    // Gaps [0,100) [150,300) [350,1000) = 900 ms, plus 2 × 10 ms of waits.
    near("v→server wait", e.wait_ns, 920.0);
    // Cascade: the server waits on the timer over [0, 500): the gaps
    // [0,100), [150,300) and [350,500) overlap it (400 ms), and so do the
    // two 10 ms waits.
    let timer = g.node("timer").unwrap();
    near(
        "server→timer",
        g.edge(s, timer).unwrap().weight_ns,
        500.0 + 400.0 + 20.0,
    );
    let g = r
        .analyze_with(&Options {
            merge_short: false,
            ..Default::default()
        })
        .unwrap();
    assert!(g.node("v:50").is_none());
    assert!(g.node("t:51").is_some());
}

#[test]
fn an_interrupt_from_idle_right_after_a_completion_is_the_disk() {
    let mut r = Rec::new(100.0);
    r.comm(100, 60, "reader");
    r.bio(10.0, 12.0, 60, 4096);
    r.seg(60, 10.0, 12.05, 12.06, Class::Io, Waker::Thread(0));
    // No completion near this one: an unnamed interrupt.
    r.seg(60, 50.0, 60.0, 60.0, Class::Other, Waker::Thread(0));
    let g = r.analyze();
    let t = g.node("t:60").unwrap();
    let d = g.node("disk:254:0").unwrap();
    near("reader→disk", g.edge(t, d).unwrap().wait_ns, 2.05);
    let i = g.node("irq:?").unwrap();
    near("reader→irq", g.edge(t, i).unwrap().wait_ns, 10.0);
    assert!(
        g.notes
            .iter()
            .any(|n| n.contains("could not be tied to a device")),
        "{:?}",
        g.notes
    );
}

#[test]
fn an_unknown_irq_stays_an_irq_vertex_with_a_note() {
    let mut r = Rec::new(100.0);
    r.comm(100, 70, "t");
    r.seg(70, 10.0, 20.0, 20.0, Class::Other, Waker::Irq(77));
    let g = r.analyze();
    let i = g.node("irq:77").unwrap();
    assert_eq!(g.nodes[i].kind, NodeKind::Irq);
    assert_eq!(g.knots[0].nodes, vec![i]);
    assert_eq!(g.knots[0].kind, KnotKind::Sink);
    assert!(
        g.notes
            .iter()
            .any(|n| n.contains("irq 77 could not be tied")),
        "{:?}",
        g.notes
    );
}

#[test]
fn waits_on_threads_outside_the_recording_are_set_aside() {
    // A waits for a kernel thread (not recorded) and for B; B for A.
    let mut r = Rec::new(100.0);
    r.comm(100, 80, "a");
    r.comm(100, 81, "b");
    r.seg(80, 0.0, 10.0, 10.0, Class::Other, Waker::Thread(999));
    for k in 0..9 {
        let c = 10.0 * k as f64 + 10.0;
        r.seg(80, c, c + 5.0, c + 5.0, Class::Other, Waker::Thread(81));
        r.seg(
            81,
            c + 5.0,
            c + 10.0,
            c + 10.0,
            Class::Other,
            Waker::Thread(80),
        );
    }
    let g = r.analyze();
    let k = g.node("t:999").unwrap();
    assert!(!g.nodes[k].recorded);
    let aside = g.knots.iter().find(|kn| kn.nodes == [k]).unwrap();
    assert!(aside.unrecorded);
    assert_eq!(knot_labels(&g, 0), vec!["t:80", "t:81"]);
    assert!(g.notes.iter().any(|n| n.contains("outside the recording")));
}

#[test]
fn empty_tiny_and_segmentless_traces_give_a_clear_error() {
    let r = Rec::default();
    let err = r.analyze_with(&Options::default()).unwrap_err();
    assert!(matches!(err, Error::Empty), "{err}");
    assert!(err.to_string().contains("no wait segments"));

    let recs = waits::figure_1().records();
    let mut src = InMemory {
        header: Header::default(),
        features: 0,
        records: &recs,
    };
    let err = analyze(&mut src, &Options::default()).unwrap_err();
    assert!(matches!(err, Error::NoSegments));
    assert!(err.to_string().contains("--no-segments"), "{err}");

    // One segment, still open at the end, no waker: a graph with one
    // isolated vertex, no panic.
    let mut r = Rec::new(10.0);
    r.seg(90, 1.0, -1.0, 10.0, Class::Other, Waker::None);
    let g = r.analyze();
    assert_eq!(g.nodes.len(), 1);
    assert!(g.edges.is_empty());
    assert_eq!(g.stats.waits_without_waker, 1);
    near("wait", g.nodes[0].wait_ns, 9.0);
    assert!(g.knots[0].background, "an idle sink");
}

#[test]
fn threshold_stops_refinement() {
    // A knot of three: with the default threshold (20% of 100 ms) its 5 ms
    // edge is trimmed; with 1 ms nothing is.
    let mut r = Rec::new(100.0);
    for (t, n) in [(1u32, "x"), (2, "y"), (3, "z")] {
        r.comm(100, t, n);
    }
    r.seg(1, 0.0, 30.0, 30.0, Class::Other, Waker::Thread(2));
    r.seg(2, 30.0, 60.0, 60.0, Class::Other, Waker::Thread(1));
    r.seg(2, 60.0, 65.0, 65.0, Class::Other, Waker::Thread(3));
    r.seg(3, 0.0, 60.0, 60.0, Class::Other, Waker::Thread(1));
    let g = r.analyze();
    // y→z (5 ms) trimmed: {x, y} is the knot, z waits on it.
    assert_eq!(knot_labels(&g, 0), vec!["t:1", "t:2"]);
    assert_eq!(g.knots[0].refined_from.as_ref().map(Vec::len), Some(3));
    assert_eq!(g.knots[0].trimmed.len(), 1);
    let g = r
        .analyze_with(&Options {
            threshold: Threshold::Ns(MS),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(g.knots[0].nodes.len(), 3);
}

/// A stray wakeup from outside must not hide a knot, and threads paced by
/// sleeps are set aside so that the knot behind them shows.
#[test]
fn light_escape_edges_and_timers_do_not_hide_a_knot() {
    let r = waits::pair_and_ticker();
    let g = r.analyze();
    assert_eq!(knot_labels(&g, 0), vec!["t:1", "t:2"]);
    assert_eq!(g.knots[0].kind, KnotKind::Knot);
    assert_eq!(g.stats.light_edges, 1, "a → ticker");
    let timer = g
        .knots
        .iter()
        .find(|k| g.nodes[k.nodes[0]].id == "timer")
        .unwrap();
    assert!(timer.background);
    // The ticker only waits on the timer: once that is set aside it is an
    // idle sink, set aside too.
    let ticker = g
        .knots
        .iter()
        .find(|k| g.nodes[k.nodes[0]].id == "t:3")
        .unwrap();
    assert!(ticker.background, "{ticker:?}");
}

#[test]
fn a_saturated_thread_in_a_cycle_is_first_as_a_cpu_bound_sink() {
    // A server runs 95 ms of its 100, runnable 3 ms more, and waits 2 ms
    // for its client; the client waits for the server most of its life.
    let r = waits::saturated_server();
    let g = r.analyze();
    let s = g.node("t:90").unwrap();
    let first = &g.knots[0];
    assert!(first.cpu_bound, "{first:?}");
    assert_eq!(first.kind, KnotKind::Sink);
    assert_eq!(first.nodes, vec![s]);
    near("server on CPU", g.nodes[s].cpu_ns, 95.0);
    near("server runnable", g.nodes[s].runnable_ns, 3.0);
    // The client, on CPU 10% of the time, is not.
    let c = g.node("t:91").unwrap();
    assert!(!g.knots.iter().any(|k| k.cpu_bound && k.nodes == [c]));
}

/// A file decoded once (by the graph's first pass, or for the trace alone)
/// gives the graph that streaming it gives, and the trace `Trace::load`
/// reads, whole or cut short (the cut one says so).
#[test]
fn a_file_decoded_once_gives_the_streamed_graph_and_the_loaded_trace() {
    let dir = std::env::temp_dir().join(format!("holdup-decoded-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let b = waits::figure_1();
    let whole = dir.join("whole.data");
    b.write(&whole, &b.header(), WAIT_FEATURES).unwrap();
    let bytes = std::fs::read(&whole).unwrap();
    let cut = dir.join("cut.data");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    for path in [&whole, &cut] {
        let streamed = analyze(&mut TraceFile::open(path).unwrap(), &Options::default());
        let mut decoded = Decoded::open(path).unwrap();
        let from_memory = analyze(&mut decoded, &Options::default());
        assert_eq!(
            format!("{from_memory:?}"),
            format!("{streamed:?}"),
            "{}",
            path.display()
        );
        let loaded = holdup_trace::Trace::load(path).unwrap();
        let alone = Decoded::open(path).unwrap().into_trace().unwrap();
        for t in [decoded.into_trace().unwrap(), alone] {
            assert_eq!(t.samples, loaded.samples);
            assert_eq!(t.segments, loaded.segments);
            assert_eq!(t.threads, loaded.threads);
            assert_eq!(t.stacks, loaded.stacks);
            assert_eq!((t.end_ns, &t.damage), (loaded.end_ns, &loaded.damage));
            assert_eq!(t.damage.is_some(), path == &cut, "{}", path.display());
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
