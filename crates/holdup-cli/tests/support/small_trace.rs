//! A small hand-made trace whose answers are known by construction, shared
//! by the export and report golden tests.

use holdup_trace::{
    features, Class, Dso, Finish, Frame, Header, Mmap, Record, Sample, Segment, Stack, SymFrame,
    Symbol, Waker, Writer, KERNEL_DSO,
};
use std::path::Path;

pub const MS: u64 = 1_000_000;
pub const T0: u64 = 5_000 * MS;

// Frames of the small trace.
pub const MAIN: Frame = Frame {
    dso: 1,
    addr: 0x100,
};
pub const WORK: Frame = Frame {
    dso: 1,
    addr: 0x200,
}; // `helper` inlined into `work`
pub const LOCK: Frame = Frame {
    dso: 2,
    addr: 0x300,
}; // in libc, which has no mapping record; no source line
pub const SCHEDULE: Frame = Frame {
    dso: KERNEL_DSO,
    addr: 0xffff_0000_0000_1000,
};
pub const FUTEX_WAIT: Frame = Frame {
    dso: KERNEL_DSO,
    addr: 0xffff_0000_0000_2000,
};
pub const VFS_READ: Frame = Frame {
    dso: KERNEL_DSO,
    addr: 0xffff_0000_0000_3000,
};

pub const APP_BASE: u64 = 0x5555_0000_0000;

pub fn sym(frame: Frame, frames: &[(&str, Option<&str>, u32)]) -> Record {
    Record::Symbol(Symbol {
        frame,
        frames: frames
            .iter()
            .map(|&(f, file, line)| SymFrame {
                function: f.into(),
                file: file.map(Into::into),
                line,
            })
            .collect(),
    })
}

pub fn sample(at: u64, tid: u32, class: Class, weight: u32, sched: u32, stack: u32) -> Record {
    Record::Sample(Sample {
        time: T0 + at * MS,
        wake: 0,
        end: T0 + at * MS,
        pid: 1,
        tid,
        cpu: 0,
        class,
        weight,
        sched_weight: sched,
        waker: Waker::None,
        stack,
        late_user_stack: false,
    })
}

/// Threads `a` (10) and `b` (11). In points of 1 ms:
/// a: 5 on-CPU in main>work>helper, 3 lock-blocked in pthread_mutex_lock
///    (futex_wait); b: 3 on-CPU in helper of which one carries 2 points of
///    steal (runqueue), 4 io-blocked in main (vfs_read).
/// Totals: cpu 8, lock 3, io 4, runqueue 2, all 17.
/// app is mapped in two pieces: file [0, 0x200) at APP_BASE and
/// [0x200, 0x1200) at APP_BASE + 0x10000; libc has a build id and no
/// mapping record. Wait segments: a waits for the lock over [5, 8) ms,
/// woken by b, runnable until 8.5 ms; b waits for io over [4, 7) ms, woken
/// by the block softirq, and is preempted over [3.5, 4) ms.
pub fn small_trace(path: &Path) {
    small_trace_named(path, "a");
}

/// The small trace with thread 10 named `a_name`.
pub fn small_trace_named(path: &Path, a_name: &str) {
    let header = Header {
        period_ns: MS,
        start_ns: T0,
        start_unix_ns: 1_700_000_000 * 1_000_000_000,
        hostname: "test-host".into(),
        ..Default::default()
    };
    let mut w = Writer::create(path, &header, features::SEGMENTS).unwrap();
    let mut recs = vec![
        Record::Dso(Dso {
            id: 1,
            path: "/usr/bin/app".into(),
            build_id: None,
        }),
        Record::Dso(Dso {
            id: 2,
            path: "/usr/lib/libc.so.6".into(),
            build_id: Some(vec![0xab, 0xcd, 0x01]),
        }),
        Record::Mmap(Mmap {
            time: T0,
            pid: 1,
            start: APP_BASE,
            end: APP_BASE + 0x200,
            file_offset: 0,
            dso: 1,
        }),
        Record::Mmap(Mmap {
            time: T0,
            pid: 1,
            start: APP_BASE + 0x10000,
            end: APP_BASE + 0x11000,
            file_offset: 0x200,
            dso: 1,
        }),
        Record::Comm {
            time: T0,
            pid: 1,
            tid: 10,
            comm: a_name.into(),
        },
        Record::Comm {
            time: T0,
            pid: 1,
            tid: 11,
            comm: "b".into(),
        },
        sym(MAIN, &[("main", Some("app.c"), 10)]),
        sym(
            WORK,
            &[("helper", Some("app.c"), 30), ("work", Some("app.c"), 20)],
        ),
        sym(LOCK, &[("pthread_mutex_lock", None, 0)]),
        sym(SCHEDULE, &[("schedule", None, 0)]),
        sym(FUTEX_WAIT, &[("futex_wait", None, 0)]),
        sym(VFS_READ, &[("vfs_read", None, 0)]),
        Record::Stack(Stack {
            id: 1,
            frames: vec![WORK, MAIN],
        }),
        Record::Stack(Stack {
            id: 2,
            frames: vec![SCHEDULE, FUTEX_WAIT, LOCK, WORK, MAIN],
        }),
        Record::Stack(Stack {
            id: 3,
            frames: vec![SCHEDULE, VFS_READ, MAIN],
        }),
    ];
    for t in 0..5 {
        recs.push(sample(t, 10, Class::Cpu, 1, 0, 1));
    }
    recs.push(sample(8, 10, Class::Lock, 3, 0, 2));
    recs.push(sample(1, 11, Class::Cpu, 1, 0, 1));
    recs.push(sample(2, 11, Class::Cpu, 1, 2, 1));
    recs.push(sample(3, 11, Class::Cpu, 1, 0, 1));
    recs.push(sample(7, 11, Class::Io, 4, 0, 3));
    let segment = |tid, start: f64, wake: f64, end: f64, class, waker| {
        let ms = |t: f64| {
            if t == 0.0 {
                0
            } else {
                T0 + (t * MS as f64) as u64
            }
        };
        Record::Segment(Segment {
            pid: 1,
            tid,
            start: ms(start),
            wake: ms(wake),
            end: ms(end),
            class,
            waker,
            cpu: Some(0),
        })
    };
    recs.push(segment(11, 3.5, 0.0, 4.0, Class::Sched, Waker::None));
    recs.push(segment(11, 4.0, 7.0, 7.0, Class::Io, Waker::Softirq(4)));
    recs.push(segment(10, 5.0, 8.0, 8.5, Class::Lock, Waker::Thread(11)));
    recs.push(Record::Finish(Finish {
        time: T0 + 10 * MS,
        exit_code: Some(0),
    }));
    for r in &recs {
        w.write(r).unwrap();
    }
    w.finish().unwrap();
}
