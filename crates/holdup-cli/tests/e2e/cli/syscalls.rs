//! `holdup syscalls` on a trace written here: its text output, and a trace
//! without system calls refused.

use crate::support::*;
use holdup_trace::{
    Class, Dso, Finish, Frame, Header, Record, Sample, Stack, SymFrame, Symbol, Syscall,
    SyscallConfig, SyscallTotals, Waker, Writer, KERNEL_DSO,
};
use std::path::Path;

#[test]
fn a_trace_without_system_calls_is_refused_with_one_line() {
    let dir = scratch("syscalls_refused");
    let data = dir.join("t.data");
    write_trace(&data, false);
    let out = holdup()
        .args(["syscalls", "-i", data.to_str().unwrap()])
        .bounded_output();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("recorded without --syscalls"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn the_text_output_is_stable() {
    let dir = scratch("syscalls_golden");
    let data = dir.join("t.data");
    write_trace(&data, true);
    let out = run_ok(&["syscalls", "--slowest", "2", "-i", data.to_str().unwrap()]);
    let golden = repo_root().join("crates/holdup-cli/tests/syscalls_golden");
    assert_golden(
        &golden,
        "report.txt",
        &String::from_utf8(out.stdout).unwrap(),
    );
}

/// A small trace: process 100 ("srv") opened a file 1000 times, 20 of them
/// waiting for the disk in `ext4_lookup`, from `do_open (app.c:42)`.
fn write_trace(path: &Path, with_syscalls: bool) {
    let file = std::fs::File::create(path).unwrap();
    let header = Header {
        period_ns: 1_000_000,
        start_ns: 1_000,
        ..Default::default()
    };
    let mut w = Writer::new(file, &header, 0).unwrap();
    let k = |addr| Frame {
        dso: KERNEL_DSO,
        addr,
    };
    let u = |addr| Frame { dso: 1, addr };
    let mut records = vec![
        Record::Comm {
            time: 1_000,
            pid: 100,
            tid: 100,
            comm: "srv".into(),
        },
        Record::Dso(Dso {
            id: 1,
            path: "/opt/srv".into(),
            build_id: None,
        }),
        Record::Stack(Stack {
            id: 1,
            frames: vec![k(1), k(2), u(20), u(22)],
        }),
        Record::Sample(Sample {
            time: 2_000,
            wake: 0,
            end: 2_000,
            pid: 100,
            tid: 100,
            cpu: 0,
            class: Class::Cpu,
            weight: 1,
            sched_weight: 0,
            waker: Waker::None,
            stack: 1,
            late_user_stack: false,
            waker_stack: 0,
        }),
    ];
    if with_syscalls {
        records.push(Record::SyscallConfig(SyscallConfig {
            keep_ns: 1_000_000,
            sample_every: 64,
        }));
        for i in 0..20u64 {
            records.push(Record::Syscall(Syscall {
                time: 10_000 + i * 10_000_000,
                end: 10_000 + i * 10_000_000 + 2_000_000 + i * 1_000,
                pid: 100,
                tid: 100,
                nr: 257,
                blocked: [1_500_000, 0, 10_000, 0],
                sleeps: 1,
                min_flt: 1,
                maj_flt: 0,
                waker: Waker::Softirq(4),
                stack: 1,
                sampled: false,
            }));
        }
        let mut hist = vec![0; 21];
        hist[12] = 980;
        hist[20] = 20;
        records.push(Record::SyscallTotals(SyscallTotals {
            pid: 100,
            nr: 257,
            count: 1000,
            total_ns: 44_190_000,
            blocked: [30_000_000, 0, 200_000, 0],
            min_flt: 20,
            maj_flt: 0,
            hist,
        }));
    }
    for (f, name, file, line) in [
        (k(1), "__schedule", None, 0),
        (k(2), "ext4_lookup", None, 0),
        (u(20), "do_open", Some("/src/app.c"), 42),
        (u(22), "main", Some("/src/app.c"), 90),
    ] {
        records.push(Record::Symbol(Symbol {
            frame: f,
            frames: vec![SymFrame {
                function: name.into(),
                file: file.map(Into::into),
                line,
            }],
        }));
    }
    records.push(Record::Finish(Finish {
        time: 1_000 + 1_000_000_000,
        exit_code: Some(0),
    }));
    for r in &records {
        w.write(r).unwrap();
    }
    w.finish().unwrap();
}
