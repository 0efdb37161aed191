//! The advice said for the knots of wait-for graphs whose bottleneck is
//! known by construction (the shared synthetic workloads), and the
//! headline the DOT graph labels a knot with.

use holdup_analysis::waitgraph::{analyze, InMemory, Options, WaitGraph};
use holdup_render::advice;
use holdup_render::waitgraph::{to_dot, DotOptions};
use holdup_trace::synth::{waits, TraceBuilder, WAIT_FEATURES};
use holdup_trace::Record;

fn graph_with(r: &TraceBuilder, opts: &Options) -> WaitGraph {
    let recs = r.records();
    let mut src = InMemory {
        header: r.header(),
        features: WAIT_FEATURES,
        records: &recs,
    };
    analyze(&mut src, opts).unwrap()
}

fn graph(r: &TraceBuilder) -> WaitGraph {
    graph_with(r, &Options::default())
}

fn first_advice(g: &WaitGraph) -> String {
    advice::knot(g, &g.knots[0]).to_string()
}

#[test]
fn a_thread_waiting_on_its_disk_in_the_loop_is_blocking_io() {
    let g = graph(&waits::figure_1());
    let a = first_advice(&g);
    assert!(a.starts_with("blocking I/O"), "{a}");
    assert!(a.contains("pwrite64"), "{a}");
}

#[test]
fn merged_contending_workers_are_lock_contention_unmerged_lock_handoffs() {
    let r = waits::contending_workers();
    let a = first_advice(&graph(&r));
    assert!(
        a.starts_with("lock contention among the 4 merged worker threads"),
        "{a}"
    );
    let g = graph_with(
        &r,
        &Options {
            merge_similar: false,
            ..Default::default()
        },
    );
    let a = first_advice(&g);
    assert!(a.starts_with("lock handoffs"), "{a}");
}

#[test]
fn threads_meeting_at_a_barrier_are_load_imbalance() {
    let a = first_advice(&graph(&waits::barrier_phases()));
    assert!(a.starts_with("load imbalance"), "{a}");
}

#[test]
fn waits_for_timers_are_set_aside_as_pacing() {
    let g = graph(&waits::pair_and_ticker());
    let timer = g
        .knots
        .iter()
        .find(|k| g.nodes[k.nodes[0]].id == "timer")
        .unwrap();
    let a = advice::knot(&g, timer).to_string();
    assert!(a.contains("timers"), "{a}");
}

#[test]
fn a_saturated_thread_is_cpu_bound_with_its_shares() {
    let g = graph(&waits::saturated_server());
    assert!(g.knots[0].cpu_bound);
    let a = first_advice(&g);
    assert!(
        a.contains(
            "on CPU 95%, runnable 3%: CPU-bound — more cores / more worker threads / faster code"
        ),
        "{a}"
    );
}

/// The DOT label of a knot is the advice's headline, whole: a C++ name
/// in it (`Pool::work`) is not cut at its colons, as splitting the line at
/// its first `:` did.
#[test]
fn the_dot_label_is_the_whole_headline() {
    let mut r = waits::contending_workers();
    for rec in &mut r.names {
        if let Record::Symbol(s) = rec {
            for f in &mut s.frames {
                if f.function == "work" {
                    f.function = "Pool::work".into();
                }
            }
        }
    }
    let g = graph(&r);
    let k = advice::knot(&g, &g.knots[0]);
    assert!(k.headline.contains("Pool::work"), "{k:?}");
    assert!(k.rest.starts_with(": "), "{k:?}");
    assert_eq!(k.to_string(), format!("{}{}", k.headline, k.rest));
    let dot = to_dot(&g, &DotOptions::default());
    let label = format!("label=\"knot 1: {}\";", k.headline);
    assert!(dot.contains(&label), "{label} not in\n{dot}");
}

/// The holder advice for the facts the holder analysis finds on its
/// constructed traces (holdup-analysis's holder tests): I/O inside the lock,
/// a runnable holder, an allocating one.
#[test]
fn holder_advice_names_what_to_change_inside_the_lock() {
    use holdup_analysis::holder::{HolderDoing, InsideTheLock};
    let say = |waiting_pct, inside_pct, doing| {
        advice::holder(&InsideTheLock {
            waiting_pct,
            inside_pct,
            doing,
        })
    };
    assert_eq!(
        say(50.0, 60.0, HolderDoing::Io("fdatasync".into())),
        "50% waiting for mutexes held by other threads; inside the critical section the holder spends 60% in fdatasync [I]: move the I/O out of the lock"
    );
    assert_eq!(
        say(100.0, 70.0, HolderDoing::Runnable),
        "100% waiting for mutexes held by other threads; inside the critical section the holder is runnable but not running 70% of the time: give the holder a core (fewer runnable threads, or a higher priority for it)"
    );
    let a = say(100.0, 90.0, HolderDoing::Allocating("malloc".into()));
    assert!(
        a.contains("spends 90% allocating in malloc [.]: allocate before taking the lock"),
        "{a}"
    );
}
