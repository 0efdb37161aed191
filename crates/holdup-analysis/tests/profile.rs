//! The profile on a hand-made trace whose answer is known.

use holdup_analysis::folded::{folded, FoldOptions};
use holdup_analysis::profile::{profile, Filter, Tag};
use holdup_analysis::stacks::LockKind;
use holdup_render::report::to_json;
use holdup_trace::*;

const K: u32 = KERNEL_DSO;
const APP: u32 = 1;
const LIBC: u32 = 2;

fn frame(dso: u32, addr: u64) -> Frame {
    Frame { dso, addr }
}

fn sym(dso: u32, addr: u64, name: &str, line: u32) -> Record {
    Record::Symbol(Symbol {
        frame: frame(dso, addr),
        frames: vec![SymFrame {
            function: name.into(),
            file: (dso == APP).then(|| "app.c".into()),
            line,
        }],
    })
}

fn sample(
    tid: u32,
    class: Class,
    weight: u32,
    sched_weight: u32,
    stack: StackId,
    waker: Waker,
) -> Record {
    Record::Sample(Sample {
        time: 1_000,
        wake: if class == Class::Cpu { 0 } else { 2_000 },
        end: 3_000,
        pid: 10,
        tid,
        cpu: 0,
        class,
        weight,
        sched_weight,
        waker,
        stack,
        late_user_stack: false,
        waker_stack: 0,
    })
}

/// Thread 11: 30 samples in compute, a pread blocked on I/O for 60 points
/// (+5 in the runqueue after the disk woke it), 5 samples in the kernel
/// under pread. Thread 12: 40 points waiting on a mutex.
fn trace() -> Trace {
    trace_with(Vec::new())
}

/// `trace()` plus `extra` records.
fn trace_with(extra: Vec<Record>) -> Trace {
    let mut recs = vec![
        Record::Comm {
            time: 0,
            pid: 10,
            tid: 11,
            comm: "reader".into(),
        },
        Record::Comm {
            time: 0,
            pid: 10,
            tid: 12,
            comm: "locker".into(),
        },
        Record::Dso(Dso {
            id: APP,
            path: "/x/app".into(),
            build_id: None,
        }),
        Record::Dso(Dso {
            id: LIBC,
            path: "/lib/libc.so.6".into(),
            build_id: None,
        }),
        // compute ← main
        Record::Stack(Stack {
            id: 1,
            frames: vec![frame(APP, 0x100), frame(APP, 0x200)],
        }),
        // schedule ← io_schedule ← filemap_read ← pread ← do_reads ← main
        Record::Stack(Stack {
            id: 2,
            frames: vec![
                frame(K, 0xa0),
                frame(K, 0xa1),
                frame(K, 0xa2),
                frame(LIBC, 0x50),
                frame(APP, 0x300),
                frame(APP, 0x200),
            ],
        }),
        // filemap_read (on CPU) ← pread ← do_reads ← main
        Record::Stack(Stack {
            id: 3,
            frames: vec![
                frame(K, 0xa2),
                frame(LIBC, 0x50),
                frame(APP, 0x300),
                frame(APP, 0x200),
            ],
        }),
        // schedule ← futex_wait ← __lll_lock_wait ← worker
        Record::Stack(Stack {
            id: 4,
            frames: vec![
                frame(K, 0xa0),
                frame(K, 0xb0),
                frame(LIBC, 0x60),
                frame(APP, 0x400),
            ],
        }),
        sym(APP, 0x100, "compute", 10),
        sym(APP, 0x200, "main", 20),
        sym(APP, 0x300, "do_reads", 30),
        sym(APP, 0x400, "worker", 40),
        sym(LIBC, 0x50, "__libc_pread64", 0),
        sym(LIBC, 0x60, "__lll_lock_wait", 0),
        sym(K, 0xa0, "schedule", 0),
        sym(K, 0xa1, "io_schedule", 0),
        sym(K, 0xa2, "filemap_read", 0),
        sym(K, 0xb0, "futex_wait", 0),
        sample(11, Class::Io, 60, 5, 2, Waker::Irq(24)),
        sample(12, Class::Lock, 40, 0, 4, Waker::Thread(11)),
        Record::IrqName {
            irq: 24,
            name: "virtio1-req.0".into(),
        },
    ];
    for _ in 0..30 {
        recs.push(sample(11, Class::Cpu, 1, 0, 1, Waker::None));
    }
    for _ in 0..5 {
        recs.push(sample(11, Class::Cpu, 1, 0, 3, Waker::None));
    }
    recs.extend(extra);
    let mut w = Writer::new(
        Vec::new(),
        &Header {
            period_ns: 1_000_000,
            ..Default::default()
        },
        0,
    )
    .unwrap();
    for r in &recs {
        w.write(r).unwrap();
    }
    let bytes = w.finish().unwrap();
    Trace::read(&mut Reader::new(&bytes[..], "t").unwrap()).unwrap()
}

#[test]
fn classes_self_and_total_follow_the_stacks() {
    let t = trace();
    let p = profile(&t, &Filter::default());
    let reader = p.threads.iter().find(|t| t.tid == 11).unwrap();
    assert_eq!(
        (reader.samples.cpu, reader.samples.io, reader.samples.sched),
        (35, 60, 5)
    );
    let f = |name: &str| reader.functions.iter().find(|f| f.symbol == name).unwrap();
    // pread is the innermost user frame of the I/O wait and of the kernel work under it.
    assert_eq!(
        (f("__libc_pread64").self_.io, f("__libc_pread64").self_.cpu),
        (60, 5)
    );
    assert_eq!(f("__libc_pread64").self_.sched, 5);
    // do_reads has it all inclusively, nothing of its own; main has everything.
    assert_eq!(f("do_reads").self_.io, 0);
    assert_eq!((f("do_reads").total.io, f("do_reads").total.cpu), (60, 5));
    assert_eq!(f("main").total.total(), 100);
    assert_eq!(f("compute").self_.cpu, 30);
    assert_eq!(
        (f("compute").file.as_deref(), f("compute").line),
        (Some("app.c"), 10)
    );
    // Kernel functions are counted in total, never as self when a user frame exists.
    assert_eq!(
        (f("filemap_read").total.cpu, f("filemap_read").self_.total()),
        (5, 0)
    );
}

#[test]
fn rows_are_tagged_like_bperf_with_wait_reasons_and_wakers() {
    let t = trace();
    let p = profile(&t, &Filter::default());
    let reader = p.threads.iter().find(|t| t.tid == 11).unwrap();
    let row = |tag: Tag, sym: &str| {
        reader
            .rows
            .iter()
            .find(|r| r.tag == tag && &*r.symbol == sym)
    };
    // Blocked rows name the site: application frames and the libc entry.
    let io = row(Tag::Blocked(Class::Io), "main → do_reads → pread64").unwrap();
    assert_eq!(io.weight, 60);
    assert_eq!(&*io.wait_reasons[0].0, "filemap_read");
    assert_eq!(io.wakers[0], ("irq:virtio1-req.0".to_string(), 60));
    assert_eq!(row(Tag::Kernel, "filemap_read").unwrap().weight, 5);
    assert_eq!(row(Tag::User, "compute").unwrap().weight, 30);
    assert_eq!(
        row(Tag::Blocked(Class::Sched), "main → do_reads → pread64")
            .unwrap()
            .weight,
        5
    );
    let locker = p.threads.iter().find(|t| t.tid == 12).unwrap();
    let lock = &locker.rows[0];
    assert_eq!(
        (lock.tag, &*lock.symbol, lock.weight),
        (Tag::Blocked(Class::Lock), "worker → lll_lock_wait", 40)
    );
    assert_eq!(&*lock.dso, "app");
    assert_eq!(&*lock.wait_reasons[0].0, "futex_wait");
    assert_eq!(lock.wakers[0].0, "reader:11");
}

#[test]
fn filter_and_json_schema() {
    let t = trace();
    let p = profile(
        &t,
        &Filter {
            comms: vec!["locker".into()],
            ..Default::default()
        },
    );
    assert_eq!(p.threads.len(), 1);
    let j = to_json(&p);
    assert_eq!(j["schema"], "holdup.report/1");
    assert_eq!(j["period_ns"], 1_000_000);
    let th = &j["threads"][0];
    assert_eq!(th["tid"], 12);
    assert_eq!(th["samples"]["lock"], 40);
    let f = &th["functions"][0];
    for key in ["symbol", "dso", "file", "line", "self", "total"] {
        assert!(f.get(key).is_some(), "function lacks {key}: {f}");
    }
    for key in ["cpu", "io", "lock", "sched", "other"] {
        assert!(f["self"].get(key).is_some());
    }
}

#[test]
fn folded_stacks_end_blocked_time_in_a_subclass_frame() {
    let t = trace();
    let stacks = folded(&t, &FoldOptions::default());
    let get = |s: &str| stacks.iter().find(|(k, _)| k == s).map(|(_, n)| *n);
    assert_eq!(
        get("reader;main;do_reads;__libc_pread64;filemap_read_[k];io_schedule_[k];schedule_[k];[I] io wait"),
        Some(60)
    );
    assert_eq!(
        get("reader;main;do_reads;__libc_pread64;filemap_read_[k];io_schedule_[k];schedule_[k];[S] runqueue"),
        Some(5)
    );
    assert_eq!(get("reader;main;compute"), Some(30));
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    assert_eq!(total, 140);
    let per = folded(
        &t,
        &FoldOptions {
            per_thread: true,
            ..Default::default()
        },
    );
    assert!(per.iter().any(|(k, _)| k.starts_with("locker-12;worker")));
}

#[test]
fn sections_merge_threads_and_keep_lifetimes_covered() {
    use holdup_analysis::profile::{group, Section};
    let t = trace();
    let p = profile(&t, &Filter::default());
    let all = group(p.threads.clone(), Section::All);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].threads, 2);
    assert_eq!(all[0].samples.total(), 140);
    assert_eq!(all[0].samples.lock, 40);
    let procs = group(p.threads.clone(), Section::Process);
    assert_eq!((procs.len(), procs[0].pid), (1, 10));
    let by_name = group(p.threads.clone(), Section::Comm);
    assert_eq!(by_name.len(), 2);
    let main = all[0]
        .functions
        .iter()
        .find(|f| f.symbol == "main")
        .unwrap();
    assert_eq!(main.total.total(), 100);
}

#[test]
fn a_section_of_one_thread_keeps_its_pid_and_tid() {
    use holdup_analysis::profile::{group, Section};
    let p = profile(&trace(), &Filter::default());
    for g in group(p.threads.clone(), Section::Comm) {
        assert_eq!(g.threads, 1);
        let t = p.threads.iter().find(|t| t.comm == g.comm).unwrap();
        assert_eq!((g.pid, g.tid), (t.pid, t.tid), "{}", g.comm);
        assert_ne!(g.tid, 0);
    }
    // Two threads of one process: the pid is shown, no single tid.
    let procs = group(p.threads.clone(), Section::Process);
    assert_eq!((procs[0].pid, procs[0].tid), (10, 0));
}

#[test]
fn steal_time_on_an_on_cpu_sample_is_runqueue_time_at_that_stack() {
    // 2 points of CPU time and 3 of steal, in compute.
    let t = trace_with(vec![sample(11, Class::Cpu, 2, 3, 1, Waker::None)]);
    let p = profile(&t, &Filter::default());
    let reader = p.threads.iter().find(|t| t.tid == 11).unwrap();
    assert_eq!((reader.samples.cpu, reader.samples.sched), (37, 8));
    let steal = reader
        .rows
        .iter()
        .find(|r| r.tag == Tag::Blocked(Class::Sched) && &*r.symbol == "main → compute")
        .expect("an [S] row for compute");
    assert_eq!(steal.weight, 3);
    assert!(steal.wait_reasons[0].0.starts_with("(steal"));
    let compute = reader
        .functions
        .iter()
        .find(|f| f.symbol == "compute")
        .unwrap();
    assert_eq!((compute.self_.cpu, compute.self_.sched), (32, 3));
}

/// Thread 13 parked on a condition variable for 70 points (a timed wait
/// that the kernel ended, no waker) and 10 points re-taking the
/// condition variable's mutex after the signal, woken by thread 12.
fn trace_with_a_parked_thread() -> Trace {
    let mut extra = vec![
        Record::Comm {
            time: 0,
            pid: 10,
            tid: 13,
            comm: "pool".into(),
        },
        // futex_wait ← __futex_abstimed_wait_common64 ← pthread_cond_timedwait ← park
        Record::Stack(Stack {
            id: 5,
            frames: vec![
                frame(K, 0xb0),
                frame(LIBC, 0x70),
                frame(LIBC, 0x80),
                frame(APP, 0x500),
            ],
        }),
        // futex_wait ← __lll_lock_wait ← __pthread_mutex_cond_lock ← pthread_cond_timedwait ← park
        Record::Stack(Stack {
            id: 6,
            frames: vec![
                frame(K, 0xb0),
                frame(LIBC, 0x60),
                frame(LIBC, 0x90),
                frame(LIBC, 0x80),
                frame(APP, 0x500),
            ],
        }),
        sym(LIBC, 0x70, "__futex_abstimed_wait_common64", 0),
        sym(LIBC, 0x80, "___pthread_cond_timedwait64", 0),
        sym(LIBC, 0x90, "__pthread_mutex_cond_lock", 0),
        sym(APP, 0x500, "park", 50),
        sample(13, Class::Lock, 70, 0, 5, Waker::None),
        sample(13, Class::Lock, 10, 0, 6, Waker::Thread(12)),
    ];
    extra.push(sample(13, Class::Cpu, 1, 0, 1, Waker::None));
    trace_with(extra)
}

#[test]
fn lock_waits_split_into_mutexes_and_signals() {
    let t = trace_with_a_parked_thread();
    let p = profile(&t, &Filter::default());
    let th = |tid| p.threads.iter().find(|t| t.tid == tid).unwrap();
    let (locker, pool) = (th(12), th(13));
    assert_eq!((locker.lock_split.mutex, locker.lock_split.signal), (40, 0));
    assert_eq!((pool.lock_split.mutex, pool.lock_split.signal), (10, 70));
    assert_eq!(pool.samples.lock, 80, "the bperf subclass keeps both");
    let parked = &pool.rows[0];
    assert_eq!(&*parked.symbol, "park → pthread_cond_timedwait64");
    assert_eq!(parked.lock_kind, Some(LockKind::Signal));
    assert_eq!(parked.weight, 70);
    // The same site, waiting for the mutex the condition variable re-takes:
    // a row of its own, with the holder that released it.
    let retake = &pool.rows[1];
    assert_eq!(&*retake.symbol, "park → pthread_cond_timedwait64");
    assert_eq!(retake.lock_kind, Some(LockKind::Mutex));
    assert_eq!(retake.weight, 10);
    assert_eq!(retake.wakers[0].0, "locker:12");
    let merged =
        holdup_analysis::profile::group(p.threads.clone(), holdup_analysis::profile::Section::All);
    assert_eq!(
        (merged[0].lock_split.mutex, merged[0].lock_split.signal),
        (50, 70)
    );
}

#[test]
fn json_has_the_lock_split_and_the_sites_with_their_holders() {
    let t = trace_with_a_parked_thread();
    let j = to_json(&profile(&t, &Filter::default()));
    let th = |tid: u64| {
        j["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tid"] == tid)
            .unwrap()
    };
    let locker = th(12);
    assert_eq!(locker["samples"]["lock"], 40);
    assert_eq!(locker["lock_split"]["mutex"], 40);
    assert_eq!(locker["lock_split"]["signal"], 0);
    let site = &locker["sites"][0];
    assert_eq!(site["site"], "worker → lll_lock_wait");
    assert_eq!(site["class"], "lock");
    assert_eq!(site["lock_kind"], "mutex");
    assert_eq!(site["samples"], 40);
    assert_eq!(site["wakers"][0]["name"], "reader:11");
    assert_eq!(site["wait_reasons"][0]["name"], "futex_wait");
    // `self` keeps its meaning: the innermost user frame, here in libc.
    let lll = locker["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["symbol"] == "__lll_lock_wait")
        .unwrap();
    assert_eq!(lll["self"]["lock"], 40);
    let pool = th(13);
    assert_eq!(pool["lock_split"]["signal"], 70);
    let reader = th(11);
    assert_eq!(reader["sites"][0]["site"], "main → do_reads → pread64");
    assert!(reader["sites"][0].get("lock_kind").is_none());
}

/// Thread 13, a Python thread, waits 10 points for the GIL in timed waits:
/// two ended by the timer (the interpreter's switch interval), the last by
/// thread 12 releasing it; 10 more points it runs.
fn trace_with_a_gil_waiter() -> Trace {
    let extra = vec![
        Record::Comm {
            time: 0,
            pid: 10,
            tid: 13,
            comm: "spinner".into(),
        },
        // futex_wait ← pthread_cond_timedwait ← take_gil ← PyEval_RestoreThread
        Record::Stack(Stack {
            id: 5,
            frames: vec![
                frame(K, 0xb0),
                frame(LIBC, 0x80),
                frame(APP, 0x600),
                frame(APP, 0x700),
            ],
        }),
        sym(LIBC, 0x80, "___pthread_cond_timedwait64", 0),
        sym(APP, 0x600, "take_gil", 0),
        sym(APP, 0x700, "PyEval_RestoreThread", 0),
        sample(13, Class::Lock, 4, 0, 5, Waker::Timer),
        sample(13, Class::Lock, 4, 0, 5, Waker::Timer),
        sample(13, Class::Lock, 2, 0, 5, Waker::Thread(12)),
        sample(13, Class::Cpu, 10, 0, 1, Waker::None),
    ];
    trace_with(extra)
}

#[test]
fn the_gil_is_a_lock_of_its_own_held_by_the_thread_that_released_it() {
    let t = trace_with_a_gil_waiter();
    let p = profile(&t, &Filter::default());
    let spinner = p.threads.iter().find(|t| t.tid == 13).unwrap();
    assert_eq!(spinner.lock_split.gil, 10);
    assert_eq!(spinner.lock_split.signal, 0, "not the condition variable");
    let row = &spinner.rows[0];
    assert_eq!(row.lock_kind, Some(LockKind::Gil));
    // The waits the timer ended waited for the holder all along.
    assert_eq!(row.wakers, [("locker:12".to_string(), 10)]);
    let j = to_json(&p);
    let spinner = j["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] == 13)
        .unwrap();
    assert_eq!(spinner["lock_split"]["gil"], 10);
    assert_eq!(spinner["gil_share"], 0.5);
    assert_eq!(spinner["sites"][0]["lock_kind"], "gil");
    let reader = j["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] == 11)
        .unwrap();
    assert!(
        reader.get("gil_share").is_none(),
        "only for threads that waited for it"
    );
    let mut text = Vec::new();
    holdup_render::report::render(&mut text, &p, &Default::default()).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("GIL 50.0%)"), "{text}");
    assert!(text.contains("GIL held by: locker:12 100%"), "{text}");
}

/// Lost counts arrive cumulative, with every chunk: the last (largest)
/// counts. What a full ring buffer lost is counted in the lost events;
/// what the recorder dropped (its cause named) is shown apart.
#[test]
fn lost_events_and_drops_are_told_apart() {
    let lost = |what: &str, count| {
        Record::Lost(Lost {
            what: what.into(),
            count,
        })
    };
    let t = trace_with(vec![
        lost("samples", 2),
        lost("samples (no thread state)", 5),
        lost("samples", 3),
        lost("unparsable records", 1),
        lost("samples (no thread state)", 12),
        lost("wait segments (no thread state)", 4),
    ]);
    let p = profile(&t, &Filter::default());
    assert_eq!(p.lost_events, 4);
    assert_eq!(
        p.dropped,
        vec![
            ("samples (no thread state)".to_string(), 12),
            ("wait segments (no thread state)".to_string(), 4)
        ]
    );
    let j = to_json(&p);
    assert_eq!(j["lost_events"], 4);
    assert_eq!(j["dropped"]["samples (no thread state)"], 12);
    let mut text = Vec::new();
    holdup_render::report::render(&mut text, &p, &Default::default()).unwrap();
    let head = String::from_utf8(text).unwrap();
    let head = head.lines().next().unwrap();
    assert!(
        head.ends_with(
            "4 lost events; dropped: 12 samples (no thread state), 4 wait segments (no thread state)"
        ),
        "{head}"
    );
    // Without drops, the line and the JSON are as before.
    let p = profile(&trace(), &Filter::default());
    assert!(to_json(&p).get("dropped").is_none());
}
