use super::*;
use holdup_trace::{Dso, Frame, SymFrame, SyscallConfig, SyscallTotals, Thread, KERNEL_DSO};

const LIBC: u32 = 1;
const APP: u32 = 2;

fn sym(function: &str, file: Option<&str>, line: u32) -> Vec<SymFrame> {
    vec![SymFrame {
        function: function.into(),
        file: file.map(Into::into),
        line,
    }]
}

/// A trace of process 100 ("srv"): stack 1 is an open that slept in
/// `ext4_lookup` under `do_open (app.c:42)`, stack 2 a read from
/// `do_read (app.c:50)` that slept in `pipe_read`.
fn trace() -> Trace {
    let mut t = Trace::default();
    t.header.start_ns = 1_000;
    t.end_ns = 1_000 + 2_000_000_000;
    t.syscall_config = Some(SyscallConfig {
        keep_ns: 1_000_000,
        sample_every: 10,
    });
    t.threads.insert(
        100,
        Thread {
            pid: 100,
            tid: 100,
            comm: "srv".into(),
            start: 0,
            end: 0,
            exited: false,
            exec: None,
        },
    );
    t.threads.insert(
        101,
        Thread {
            pid: 100,
            tid: 101,
            comm: "writer".into(),
            start: 0,
            end: 0,
            exited: false,
            exec: None,
        },
    );
    for (id, path) in [(LIBC, "/lib/libc.so.6"), (APP, "/opt/srv")] {
        t.dsos.insert(
            id,
            Dso {
                id,
                path: path.into(),
                build_id: None,
            },
        );
    }
    let k = |addr| Frame {
        dso: KERNEL_DSO,
        addr,
    };
    let u = |dso, addr| Frame { dso, addr };
    for (f, s) in [
        (k(1), sym("__schedule", None, 0)),
        (k(2), sym("io_schedule", None, 0)),
        (k(3), sym("ext4_lookup", None, 0)),
        (k(4), sym("pipe_read", None, 0)),
        (u(LIBC, 10), sym("__libc_open64", None, 0)),
        (u(LIBC, 11), sym("__libc_read", None, 0)),
        (u(APP, 20), sym("do_open", Some("/src/app.c"), 42)),
        (u(APP, 21), sym("do_read", Some("/src/app.c"), 50)),
        (u(APP, 22), sym("main", Some("/src/app.c"), 90)),
    ] {
        t.symbols.insert(f, s);
    }
    t.stacks.insert(
        1,
        vec![k(1), k(2), k(3), u(LIBC, 10), u(APP, 20), u(APP, 22)],
    );
    t.stacks
        .insert(2, vec![k(1), k(4), u(LIBC, 11), u(APP, 21), u(APP, 22)]);
    t.stacks
        .insert(3, vec![u(LIBC, 10), u(APP, 20), u(APP, 22)]);
    t
}

fn call(nr: u32, time: u64, wall: u64, blocked: [u64; 4], stack: u32, sampled: bool) -> Syscall {
    Syscall {
        time,
        end: time + wall,
        pid: 100,
        tid: 100,
        nr,
        blocked,
        sleeps: (blocked[0] + blocked[1] + blocked[3] > 0) as u32,
        min_flt: 0,
        maj_flt: 0,
        waker: Waker::Thread(101),
        stack,
        sampled,
    }
}

const OPENAT: u32 = 257;
const READ: u32 = 0;

#[test]
fn names_are_the_kernels() {
    assert_eq!(name(0), "read");
    assert_eq!(name(257), "openat");
    assert_eq!(name(202), "futex");
    assert_eq!(name(9999), "syscall_9999");
}

#[test]
fn quantiles_fall_in_the_right_bucket() {
    // 90 calls in [1024, 2048), 10 in [2^20, 2^21).
    let mut hist = vec![0u64; 22];
    hist[10] = 90;
    hist[20] = 10;
    let p50 = quantile(&hist, 0.5);
    assert!((1024..2048).contains(&p50), "{p50}");
    let p99 = quantile(&hist, 0.99);
    assert!((1 << 20..1 << 21).contains(&p99), "{p99}");
    assert_eq!(quantile(&[], 0.5), 0);
    assert_eq!(bucket_range(0), (0, 2));
    assert_eq!(bucket_range(3), (8, 16));
}

#[test]
fn a_trace_without_syscalls_is_refused() {
    let mut t = trace();
    t.syscall_config = None;
    assert_eq!(
        analyze(&t, &Options::default()).unwrap_err(),
        Error::NotRecorded
    );
}

#[test]
fn totals_are_exact_and_records_give_reasons_and_sites() {
    let mut t = trace();
    t.syscall_totals.push(SyscallTotals {
        pid: 100,
        nr: OPENAT,
        count: 1000,
        total_ns: 50_000_000,
        blocked: [40_000_000, 0, 100_000, 0],
        min_flt: 5,
        maj_flt: 0,
        hist: {
            let mut h = vec![0; 24];
            h[12] = 980; // ~4 µs warm opens
            h[22] = 20; // ~4 ms cold ones
            h
        },
    });
    t.syscall_totals.push(SyscallTotals {
        pid: 100,
        nr: READ,
        count: 3,
        total_ns: 3_000,
        blocked: [0, 0, 0, 2_000],
        min_flt: 0,
        maj_flt: 0,
        hist: vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 3],
    });
    // 20 cold opens kept for sleeping on I/O, 2 sampled warm ones.
    for i in 0..20 {
        t.syscalls.push(call(
            OPENAT,
            10_000 + i * 10_000_000,
            4_000_000,
            [2_000_000, 0, 5_000, 0],
            1,
            false,
        ));
    }
    for i in 0..2 {
        t.syscalls
            .push(call(OPENAT, 500_000_000 + i, 4_000, [0; 4], 3, true));
    }
    t.syscalls
        .push(call(READ, 900_000_000, 1_500, [0, 0, 0, 1_000], 2, false));

    let r = analyze(
        &t,
        &Options {
            slowest: 3,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(r.kept, 23);
    let p = &r.processes[0];
    assert_eq!((p.pid, p.comm.as_str()), (100, "srv"));
    assert_eq!(p.calls.len(), 2);
    let open = &p.calls[0];
    assert_eq!(open.name, "openat");
    assert_eq!(open.count, 1000, "counts are the in-kernel ones");
    assert_eq!(open.total_ns, 50_000_000);
    assert_eq!(open.blocked_ns.io, 40_000_000);
    assert!((4096..8192).contains(&open.p50_ns));
    assert!((1 << 22..1 << 23).contains(&open.p99_ns));
    assert_eq!(open.max_ns, 4_000_000);
    assert_eq!(
        open.reasons,
        vec![ReasonStats {
            reason: "ext4_lookup".into(),
            count: 20,
            blocked_ns: 40_000_000,
            max_contenders: 0,
        }]
    );
    // 20 kept for cause (weight 1) + 2 sampled (weight 10 each).
    assert_eq!(
        open.sites,
        vec![SiteStats {
            site: "do_open (app.c:42)".into(),
            count: 40,
            total_ns: 20 * 4_000_000 + 20 * 4_000,
        }]
    );
    assert_eq!(open.histogram.len(), 2);
    assert_eq!(open.histogram[1].count, 20);
    let read = &p.calls[1];
    assert_eq!(read.reasons[0].reason, "pipe_read");
    assert_eq!(read.sites[0].site, "do_read (app.c:50)");

    assert_eq!(r.slowest.len(), 3);
    let slow = &r.slowest[0];
    assert_eq!(slow.name, "openat");
    assert_eq!(slow.wall_ns, 4_000_000);
    assert_eq!(slow.on_cpu_ns, 4_000_000 - 2_005_000);
    assert_eq!(slow.reason.as_deref(), Some("ext4_lookup"));
    assert_eq!(slow.waker.as_deref(), Some("writer:101"));
    assert_eq!(slow.site.as_deref(), Some("do_open (app.c:42)"));
    assert_eq!(slow.kernel_stack, vec!["ext4_lookup".to_string()]);
    assert_eq!(slow.user_stack.len(), 3);
}

#[test]
fn contenders_are_other_threads_asleep_for_the_same_reason_meanwhile() {
    let mut t = trace();
    let mut a = call(READ, 1_000, 5_000, [0, 0, 0, 4_000], 2, false);
    let mut b = call(READ, 3_000, 5_000, [0, 0, 0, 4_000], 2, false);
    // Same thread as a, later: no contention with a, but with b.
    let mut c = call(READ, 7_000, 5_000, [0, 0, 0, 4_000], 2, false);
    // Another reason at the same time: not a contender.
    let mut d = call(OPENAT, 2_000, 5_000, [4_000, 0, 0, 0], 1, false);
    b.tid = 101;
    d.tid = 102;
    a.tid = 100;
    c.tid = 100;
    t.syscalls.extend([a, b, c, d]);
    let r = analyze(
        &t,
        &Options {
            slowest: 10,
            ..Default::default()
        },
    )
    .unwrap();
    let by_start: HashMap<u64, u32> = r
        .slowest
        .iter()
        .map(|i| (i.start_ns + 1_000, i.contenders))
        .collect();
    assert_eq!(by_start[&1_000], 1);
    assert_eq!(by_start[&3_000], 2);
    assert_eq!(by_start[&7_000], 1);
    assert_eq!(by_start[&2_000], 0);
    let read = r.processes[0]
        .calls
        .iter()
        .find(|c| c.name == "read")
        .unwrap();
    assert_eq!(read.reasons[0].max_contenders, 2);
}

/// Calls that all overlap each other: each has every call of the other
/// threads as a contender. Counting them pairwise took quadratic time (a
/// crafted trace of 100 000 such calls: billions of steps); the sweep is
/// quick, and exact.
#[test]
fn contenders_of_many_overlapping_calls_are_counted_quickly_and_exactly() {
    let mut t = trace();
    let n = 100_000u64;
    let threads = 4;
    for i in 0..n {
        let mut c = call(READ, 1_000 + i, 10_000_000, [0, 0, 0, 5_000_000], 2, false);
        c.tid = 100 + (i % threads) as u32;
        t.syscalls.push(c);
    }
    // One more, later, by itself.
    t.syscalls
        .push(call(READ, 500_000_000, 1_000, [0, 0, 0, 500], 2, false));
    let began = std::time::Instant::now();
    let reasons: HashMap<usize, Rc<str>> = (0..t.syscalls.len())
        .map(|i| (i, Rc::from("pipe_read")))
        .collect();
    let c = contenders(&t, &reasons);
    let took = began.elapsed();
    let others = (n - n / threads) as u32;
    assert!((0..n as usize).all(|i| c.get(&i) == Some(&others)));
    assert_eq!(c.get(&(n as usize)), None);
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
}

#[test]
fn without_totals_the_records_are_scaled_up() {
    let mut t = trace();
    for i in 0..3 {
        t.syscalls
            .push(call(READ, 1_000 + i * 100, 50, [0; 4], 3, true));
    }
    let r = analyze(&t, &Options::default()).unwrap();
    let c = &r.processes[0].calls[0];
    assert_eq!(c.count, 30);
    assert_eq!(c.total_ns, 1_500);
    assert!(c.reasons.is_empty());
}

#[test]
fn the_pid_filter_keeps_only_those_processes() {
    let mut t = trace();
    t.syscalls.push(call(READ, 1_000, 50, [0; 4], 3, false));
    let r = analyze(
        &t,
        &Options {
            pids: vec![7],
            slowest: 5,
        },
    )
    .unwrap();
    assert!(r.processes.is_empty());
    assert!(r.slowest.is_empty());
}
