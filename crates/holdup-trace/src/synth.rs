//! Synthetic traces whose answers are known by construction, for tests,
//! fuzz seeds and examples (the `synth` feature): one builder of records,
//! and the small workloads that several layers check (the analyses their
//! numbers, the renderers their words).
//!
//! Times are milliseconds from the recording's start `t0`; records that name
//! things (threads, stacks, symbols, files) come first, the timed ones in
//! the order they would arrive, a `Finish` at `end` last.

use crate::{
    features, Bio, BioOp, Class, Dso, Finish, Frame, Header, Reader, Record, Sample, Segment,
    Stack, SymFrame, Symbol, Trace, Waker, Writer,
};
use std::path::Path;

pub const MS: u64 = 1_000_000;
/// The device number of the builder's disk (major 254, minor 0).
pub const DISK: u32 = 254 << 20;

/// Records of one synthetic recording.
#[derive(Clone, Debug)]
pub struct TraceBuilder {
    /// Recording start (ns).
    pub t0: u64,
    /// The process of samples and segments.
    pub pid: u32,
    /// End of the recording, in ms from `t0`.
    pub end: f64,
    /// Records that name things, in order.
    pub names: Vec<Record>,
    /// (arrival key in ns, record), sorted by key when read.
    pub timed: Vec<(u64, Record)>,
}

impl Default for TraceBuilder {
    fn default() -> Self {
        TraceBuilder {
            t0: 1_000 * MS,
            pid: 100,
            end: 0.0,
            names: Vec::new(),
            timed: Vec::new(),
        }
    }
}

impl TraceBuilder {
    /// A recording of `end` ms from the default start, process 100.
    pub fn new(end: f64) -> Self {
        TraceBuilder {
            end,
            ..Default::default()
        }
    }

    /// `ms` after the start, in ns.
    pub fn ns(&self, ms: f64) -> u64 {
        self.t0 + (ms * MS as f64).round() as u64
    }

    pub fn comm(&mut self, pid: u32, tid: u32, comm: &str) {
        self.names.push(Record::Comm {
            time: self.t0,
            pid,
            tid,
            comm: comm.into(),
        });
    }

    /// A file that frames live in (the builder's user frames are in dso 1).
    pub fn dso(&mut self, id: u32, path: &str, build_id: Option<Vec<u8>>) {
        self.names.push(Record::Dso(Dso {
            id,
            path: path.into(),
            build_id,
        }));
    }

    /// Frame `frame` symbolized as `frames` (inlined ones first): function,
    /// file, line.
    pub fn symbol(&mut self, frame: Frame, frames: &[(&str, Option<&str>, u32)]) {
        self.names.push(Record::Symbol(Symbol {
            frame,
            frames: frames
                .iter()
                .map(|&(function, file, line)| SymFrame {
                    function: function.into(),
                    file: file.map(Into::into),
                    line,
                })
                .collect(),
        }));
    }

    /// Stack `id` of user frames in dso 1, one named function each, leaf
    /// first.
    pub fn stack(&mut self, id: u32, funcs: &[&str]) {
        let frames: Vec<Frame> = (0..funcs.len())
            .map(|i| Frame {
                dso: 1,
                addr: (id as u64) << 16 | i as u64,
            })
            .collect();
        for (f, name) in frames.iter().zip(funcs) {
            self.symbol(*f, &[(name, None, 0)]);
        }
        self.names.push(Record::Stack(Stack { id, frames }));
    }

    /// Off-CPU over [start, end) ms, woken at `wake` (negative: never).
    pub fn seg(&mut self, tid: u32, start: f64, wake: f64, end: f64, class: Class, waker: Waker) {
        let s = Segment {
            pid: self.pid,
            tid,
            start: self.ns(start),
            wake: if wake < 0.0 { 0 } else { self.ns(wake) },
            end: self.ns(end),
            class,
            waker,
            cpu: Some(0),
        };
        self.timed.push((s.end, Record::Segment(s)));
    }

    /// A blocked sample over [span.0, span.1) ms covering `weight` points.
    pub fn blocked(
        &mut self,
        tid: u32,
        span: (f64, f64),
        class: Class,
        waker: Waker,
        stack: u32,
        weight: u32,
    ) {
        let (start, wake) = span;
        let s = Sample {
            time: self.ns(start),
            wake: self.ns(wake),
            end: self.ns(wake),
            pid: self.pid,
            tid,
            cpu: 0,
            class,
            weight,
            sched_weight: 0,
            waker,
            stack,
            late_user_stack: false,
            waker_stack: 0,
        };
        self.timed.push((s.end + 1, Record::Sample(s)));
    }

    /// A sample at `at` ms of class `class` (on-CPU, or a blocked sample
    /// not tied to a wait) with `sched` points of runqueue wait.
    pub fn sample(&mut self, at: f64, tid: u32, class: Class, weight: u32, sched: u32, stack: u32) {
        let t = self.t0 + (at * MS as f64) as u64;
        let s = Sample {
            time: t,
            wake: 0,
            end: t,
            pid: self.pid,
            tid,
            cpu: 0,
            class,
            weight,
            sched_weight: sched,
            waker: Waker::None,
            stack,
            late_user_stack: false,
            waker_stack: 0,
        };
        self.timed.push((t, Record::Sample(s)));
    }

    /// An on-CPU sample at `at` ms.
    pub fn cpu(&mut self, tid: u32, at: f64, stack: u32) {
        self.sample(at, tid, Class::Cpu, 1, 0, stack);
    }

    /// A write of `bytes` to the disk, issued by `tid` at `issue` ms and
    /// completed at `done`.
    pub fn bio(&mut self, issue: f64, done: f64, tid: u32, bytes: u32) {
        let b = Bio {
            time: self.ns(issue),
            dev: DISK,
            sector: 8,
            bytes,
            op: BioOp::Write,
            pid: self.pid,
            tid,
            tracked: true,
            error: 0,
        };
        self.timed.push((b.time, Record::BioIssue(b.clone())));
        let done = self.ns(done);
        self.timed.push((
            done,
            Record::BioDone(Bio {
                time: done,
                tid: 0,
                pid: 0,
                ..b
            }),
        ));
    }

    /// Any record, arriving at `at` ms.
    pub fn at(&mut self, at: f64, r: Record) {
        let key = self.ns(at);
        self.timed.push((key, r));
    }

    /// All records: names, timed ones by arrival, the finish.
    pub fn records(&self) -> Vec<Record> {
        let mut v = self.names.clone();
        let mut t = self.timed.clone();
        t.sort_by_key(|(k, _)| *k);
        v.extend(t.into_iter().map(|(_, r)| r));
        v.push(Record::Finish(Finish {
            time: self.ns(self.end),
            exit_code: Some(0),
        }));
        v
    }

    /// The header of this recording: a 1 ms sampling period from `t0`.
    pub fn header(&self) -> Header {
        Header {
            period_ns: MS,
            start_ns: self.t0,
            ..Default::default()
        }
    }

    /// Write the trace to `path` with `header` and `features`.
    pub fn write(&self, path: &Path, header: &Header, features: u32) -> std::io::Result<()> {
        let mut w = Writer::create(path, header, features)?;
        for r in self.records() {
            w.write(&r)?;
        }
        w.finish()?;
        Ok(())
    }

    /// The trace file's bytes, with `header` and `features`.
    pub fn bytes(&self, header: &Header, features: u32) -> Vec<u8> {
        let mut w = Writer::new(Vec::new(), header, features).expect("writing to memory");
        for r in self.records() {
            w.write(&r).expect("writing to memory");
        }
        w.finish().expect("writing to memory")
    }

    /// The trace as a reader loads it.
    pub fn trace(&self, header: &Header, features: u32) -> Trace {
        let bytes = self.bytes(header, features);
        let mut reader = Reader::new(&bytes[..], "synthetic").expect("a trace just written");
        Trace::read(&mut reader).expect("a trace just written")
    }
}

/// The features a wait-for graph needs: wait segments and block I/O.
pub const WAIT_FEATURES: u32 = features::SEGMENTS | features::BLOCK_IO;

/// Workloads of the wait-for graph whose knots are known by construction
/// (wPerf's examples): the analysis checks their numbers, the renderers
/// their advice.
pub mod waits {
    use super::*;

    /// wPerf's Figure 1: producer A (10) hands items to B (11), which writes
    /// each one to the disk synchronously. Per 10 ms cycle: A produces for
    /// 2 ms then waits for B; B works 4 ms, then waits 6 ms for its write.
    pub fn figure_1() -> TraceBuilder {
        let (a, b) = (10, 11);
        let mut r = TraceBuilder::new(1000.0);
        r.comm(100, a, "app");
        r.comm(100, b, "app");
        r.stack(1, &["pwrite64", "consume", "consumer_main"]);
        r.stack(2, &["pthread_cond_wait", "produce", "producer_main"]);
        r.stack(3, &["checksum", "consume", "consumer_main"]);
        r.names.push(Record::IrqName {
            irq: 24,
            name: "virtio1-req.0".into(),
        });
        for k in 0..100 {
            let c = 10.0 * k as f64;
            // B: runs [c, c+4), waits for the disk [c+4, c+10).
            r.bio(c + 4.0, c + 9.99, b, 4096);
            r.seg(b, c + 4.0, c + 10.0, c + 10.0, Class::Io, Waker::Irq(24));
            r.blocked(b, (c + 4.0, c + 10.0), Class::Io, Waker::Irq(24), 1, 6);
            r.cpu(b, c + 1.0, 3);
            // A: runs [c, c+2), waits for B [c+2, c+10.001).
            r.seg(
                a,
                c + 2.0,
                c + 10.001,
                c + 10.002,
                Class::Lock,
                Waker::Thread(b),
            );
            r.blocked(
                a,
                (c + 2.0, c + 10.001),
                Class::Lock,
                Waker::Thread(b),
                2,
                8,
            );
        }
        r
    }

    /// Four workers (20–23) hand one mutex round: each holds it 1 ms of
    /// every 4 and waits 3 ms for it, woken by the previous holder.
    pub fn contending_workers() -> TraceBuilder {
        let mut r = TraceBuilder::new(1000.0);
        r.stack(5, &["pthread_mutex_lock", "work", "worker"]);
        r.stack(6, &["spin", "work", "worker"]);
        let ws = [20u32, 21, 22, 23];
        for &w in &ws {
            r.comm(100, w, &format!("worker-{}", w - 20));
        }
        r.comm(100, 1, "main");
        for k in 0..250u32 {
            for (j, &w) in ws.iter().enumerate() {
                let run = 4.0 * k as f64 + j as f64;
                if k < 249 {
                    // Released at run+1, acquired again 3 ms later, woken
                    // by the previous holder.
                    let prev = Waker::Thread(ws[(j + 3) % 4]);
                    r.seg(w, run + 1.0, run + 4.0, run + 4.0, Class::Lock, prev);
                    r.blocked(w, (run + 1.0, run + 4.0), Class::Lock, prev, 5, 3);
                }
                r.cpu(w, run + 0.5, 6);
            }
        }
        r
    }

    /// Two phases per 6 ms round with a barrier between: A (30) works 3 ms
    /// then 1, B (31) 1 then 3; each waits for the other at one barrier.
    pub fn barrier_phases() -> TraceBuilder {
        let (a, b) = (30, 31);
        let mut r = TraceBuilder::new(600.0);
        r.comm(100, a, "mapper");
        r.comm(100, b, "reducer");
        r.stack(7, &["pthread_barrier_wait", "phase", "mapper_main"]);
        r.stack(8, &["pthread_barrier_wait", "phase", "reducer_main"]);
        for k in 0..100 {
            let c = 6.0 * k as f64;
            r.seg(b, c + 1.0, c + 3.0, c + 3.0, Class::Lock, Waker::Thread(a));
            r.blocked(b, (c + 1.0, c + 3.0), Class::Lock, Waker::Thread(a), 8, 2);
            r.seg(a, c + 4.0, c + 6.0, c + 6.0, Class::Lock, Waker::Thread(b));
            r.blocked(a, (c + 4.0, c + 6.0), Class::Lock, Waker::Thread(b), 7, 2);
        }
        r
    }

    /// `a` waits `half` ms for `b`'s lock, then `b` as long for `a`'s,
    /// `rounds` times from the start.
    fn take_turns(r: &mut TraceBuilder, (a, b): (u32, u32), half: f64, rounds: u32) {
        for k in 0..rounds {
            let c = 2.0 * half * f64::from(k);
            r.seg(a, c, c + half, c + half, Class::Lock, Waker::Thread(b));
            let d = c + half;
            r.seg(b, d, d + half, d + half, Class::Lock, Waker::Thread(a));
        }
    }

    /// Threads a (1) and b (2) wait for each other in turn, 10 ms each; a
    /// is woken once by a ticker (3), which sleeps on a timer.
    pub fn pair_and_ticker() -> TraceBuilder {
        let mut r = TraceBuilder::new(1002.0);
        r.comm(100, 1, "a");
        r.comm(100, 2, "b");
        r.comm(100, 3, "ticker");
        take_turns(&mut r, (1, 2), 10.0, 50);
        // a is woken once by the ticker (0.5 ms), the ticker sleeps on a timer.
        r.seg(1, 1000.5, 1001.0, 1001.0, Class::Other, Waker::Thread(3));
        r.seg(3, 0.0, 990.0, 990.0, Class::Other, Waker::Timer);
        r
    }

    /// Threads a (10) and b (11) hand a lock back and forth, 5 ms each,
    /// ten times; c (12) waits 50 ms woken by interrupt 99, which no device
    /// explains.
    pub fn lock_pair_and_stray_irq() -> TraceBuilder {
        let mut r = TraceBuilder::new(100.0);
        r.comm(100, 10, "a");
        r.comm(100, 11, "b");
        r.comm(100, 12, "c");
        take_turns(&mut r, (10, 11), 5.0, 10);
        r.seg(12, 0.0, 50.0, 50.0, Class::Other, Waker::Irq(99));
        r
    }

    /// A server (90) runs 95 ms of its 100, runnable 3 ms more, and waits
    /// 2 ms for its client (91); the client waits for the server most of
    /// its life.
    pub fn saturated_server() -> TraceBuilder {
        let mut r = TraceBuilder::new(100.0);
        r.comm(100, 90, "server");
        r.comm(100, 91, "client");
        for k in 0..10 {
            let c = 10.0 * k as f64;
            r.seg(90, c, c + 0.2, c + 0.5, Class::Other, Waker::Thread(91));
            r.seg(
                91,
                c + 0.5,
                c + 9.5,
                c + 9.5,
                Class::Other,
                Waker::Thread(90),
            );
        }
        r
    }
}

/// System calls with known totals, sites and wait reasons (DeBox).
pub mod syscalls {
    use super::*;
    use crate::{SyscallConfig, SyscallTotals, KERNEL_DSO};

    const LIBC: u32 = 2;

    /// Process 10 (`srv`): threads 11 and 12 read, write and futex in turn,
    /// 0.9 ms each, overlapping, asleep 0.5 ms in `pipe_read` under
    /// `do_read (app.c:50)` and runnable 0.1 ms; `read` has exact totals
    /// (40 calls, 36 ms, a two-bucket histogram).
    pub fn overlapping_reads() -> TraceBuilder {
        let mut r = TraceBuilder::new(10.0);
        r.pid = 10;
        r.comm(10, 11, "srv");
        r.comm(10, 12, "writer");
        r.dso(1, "/opt/srv", None);
        r.dso(LIBC, "/lib/libc.so.6", None);
        let k = |addr| Frame {
            dso: KERNEL_DSO,
            addr,
        };
        let frames = [
            (k(0x1000), "__schedule", None, 0),
            (k(0x2000), "pipe_read", None, 0),
            (
                Frame {
                    dso: LIBC,
                    addr: 0x10,
                },
                "__libc_read",
                None,
                0,
            ),
            (
                Frame { dso: 1, addr: 0x20 },
                "do_read",
                Some("/src/app.c"),
                50,
            ),
            (Frame { dso: 1, addr: 0x30 }, "main", Some("/src/app.c"), 90),
        ];
        for &(f, function, file, line) in &frames {
            r.symbol(f, &[(function, file, line)]);
        }
        r.names.push(Record::Stack(Stack {
            id: 1,
            frames: frames.iter().map(|f| f.0).collect(),
        }));
        r.names.push(Record::SyscallConfig(SyscallConfig {
            keep_ns: 1_000_000,
            sample_every: 64,
        }));
        for i in 0..6u32 {
            let at = 1.0 + 0.3 * i as f64;
            let time = r.ns(at);
            r.at(
                at,
                Record::Syscall(crate::Syscall {
                    time,
                    end: time + 900_000,
                    pid: 10,
                    tid: 11 + i % 2,
                    nr: [0, 1, 202][i as usize % 3],
                    blocked: [0, 0, 100_000, 500_000],
                    sleeps: 1,
                    min_flt: 2,
                    maj_flt: i % 2,
                    waker: Waker::Thread(12),
                    stack: 1,
                    sampled: i == 5,
                }),
            );
        }
        r.at(
            9.0,
            Record::SyscallTotals(SyscallTotals {
                pid: 10,
                nr: 0,
                count: 40,
                total_ns: 36_000_000,
                blocked: [0, 0, 4_000_000, 20_000_000],
                min_flt: 80,
                maj_flt: 20,
                hist: [vec![0; 19], vec![30, 10]].concat(),
            }),
        );
        r
    }
}

/// A small hand-made trace whose answers are known by construction, for
/// the renderers' golden files and the commands that read a trace.
pub mod small {
    use super::*;
    use crate::{Mmap, KERNEL_DSO};

    /// Recording start.
    pub const T0: u64 = 5_000 * MS;

    pub const MAIN: Frame = Frame {
        dso: 1,
        addr: 0x100,
    };
    /// `helper` inlined into `work`.
    pub const WORK: Frame = Frame {
        dso: 1,
        addr: 0x200,
    };
    /// In libc, which has no mapping record; no source line.
    pub const LOCK: Frame = Frame {
        dso: 2,
        addr: 0x300,
    };
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

    /// Its header: 1 ms samples, a start in wall-clock time, a host.
    pub fn header() -> Header {
        Header {
            period_ns: MS,
            start_ns: T0,
            start_unix_ns: 1_700_000_000 * 1_000_000_000,
            hostname: "test-host".into(),
            ..Default::default()
        }
    }

    /// Threads `a` (10, named `a_name`) and `b` (11) of process 1. In
    /// points of 1 ms: a: 5 on-CPU in main>work>helper, 3 lock-blocked in
    /// pthread_mutex_lock (futex_wait); b: 3 on-CPU in helper of which one
    /// carries 2 points of steal (runqueue), 4 io-blocked in main
    /// (vfs_read). Totals: cpu 8, lock 3, io 4, runqueue 2, all 17.
    /// app is mapped in two pieces: file [0, 0x200) at APP_BASE and
    /// [0x200, 0x1200) at APP_BASE + 0x10000; libc has a build id and no
    /// mapping record. Wait segments: a waits for the lock over [5, 8) ms,
    /// woken by b, runnable until 8.5 ms; b waits for io over [4, 7) ms,
    /// woken by the block softirq, and is preempted over [3.5, 4) ms.
    pub fn trace(a_name: &str) -> TraceBuilder {
        let mut r = TraceBuilder {
            t0: T0,
            pid: 1,
            end: 10.0,
            ..Default::default()
        };
        r.dso(1, "/usr/bin/app", None);
        r.dso(2, "/usr/lib/libc.so.6", Some(vec![0xab, 0xcd, 0x01]));
        for (start, end, file_offset) in [
            (APP_BASE, APP_BASE + 0x200, 0),
            (APP_BASE + 0x10000, APP_BASE + 0x11000, 0x200),
        ] {
            r.names.push(Record::Mmap(Mmap {
                time: T0,
                pid: 1,
                start,
                end,
                file_offset,
                dso: 1,
            }));
        }
        r.comm(1, 10, a_name);
        r.comm(1, 11, "b");
        r.symbol(MAIN, &[("main", Some("app.c"), 10)]);
        r.symbol(
            WORK,
            &[("helper", Some("app.c"), 30), ("work", Some("app.c"), 20)],
        );
        r.symbol(LOCK, &[("pthread_mutex_lock", None, 0)]);
        r.symbol(SCHEDULE, &[("schedule", None, 0)]);
        r.symbol(FUTEX_WAIT, &[("futex_wait", None, 0)]);
        r.symbol(VFS_READ, &[("vfs_read", None, 0)]);
        for (id, frames) in [
            (1, vec![WORK, MAIN]),
            (2, vec![SCHEDULE, FUTEX_WAIT, LOCK, WORK, MAIN]),
            (3, vec![SCHEDULE, VFS_READ, MAIN]),
        ] {
            r.names.push(Record::Stack(Stack { id, frames }));
        }
        for t in 0..5 {
            r.sample(t as f64, 10, Class::Cpu, 1, 0, 1);
        }
        r.sample(8.0, 10, Class::Lock, 3, 0, 2);
        r.sample(1.0, 11, Class::Cpu, 1, 0, 1);
        r.sample(2.0, 11, Class::Cpu, 1, 2, 1);
        r.sample(3.0, 11, Class::Cpu, 1, 0, 1);
        r.sample(7.0, 11, Class::Io, 4, 0, 3);
        r.seg(11, 3.5, -1.0, 4.0, Class::Sched, Waker::None);
        r.seg(11, 4.0, 7.0, 7.0, Class::Io, Waker::Softirq(4));
        r.seg(10, 5.0, 8.0, 8.5, Class::Lock, Waker::Thread(11));
        // In the order made, not by arrival: the golden files pin the order
        // of pprof's samples, which follows the trace's.
        let made = std::mem::take(&mut r.timed);
        r.names.extend(made.into_iter().map(|(_, rec)| rec));
        r
    }
}
