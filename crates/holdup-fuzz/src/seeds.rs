//! The seed corpora, one per target: small valid inputs that use every
//! part of their format (every record kind, class and waker of a trace;
//! every section of a latency file; ...). Real files can be added with
//! `--corpus DIR`.

use holdup_trace::*;

fn trace(records: &[Record], features: u32, chunk_every: usize) -> Vec<u8> {
    let header = Header {
        period_ns: 1_000_000,
        start_ns: 1_000_000,
        target: "command".into(),
        command: vec!["app".into()],
        ncpus: 2,
        ..Default::default()
    };
    let mut w = Writer::new(Vec::new(), &header, features).unwrap();
    for (i, r) in records.iter().enumerate() {
        w.write(r).unwrap();
        if (i + 1) % chunk_every == 0 {
            w.flush_chunk().unwrap();
        }
    }
    w.finish().unwrap()
}

fn frame(dso: u32, addr: u64) -> Frame {
    Frame { dso, addr }
}

fn sample(time: u64, tid: u32, class: Class, weight: u32, waker: Waker, stack: u32) -> Record {
    Record::Sample(Sample {
        time,
        wake: if class == Class::Cpu {
            0
        } else {
            time + 500_000
        },
        end: time + 600_000,
        pid: 10,
        tid,
        cpu: (tid % 2) as u16,
        class,
        weight,
        sched_weight: 1,
        waker,
        stack,
        late_user_stack: tid.is_multiple_of(2),
        waker_stack: 0,
    })
}

fn segment(start: u64, tid: u32, class: Class, waker: Waker) -> Record {
    Record::Segment(Segment {
        pid: 10,
        tid,
        start,
        wake: start + 400_000,
        end: start + 450_000,
        class,
        waker,
        cpu: Some((tid % 2) as u16),
    })
}

fn bio(time: u64, tid: u32) -> Bio {
    Bio {
        time,
        dev: 8 << 20,
        sector: 4096,
        bytes: 4096,
        op: BioOp::from_u8(0),
        tracked: true,
        pid: 10,
        tid,
        error: 0,
    }
}

fn symbol(dso: u32, addr: u64, names: &[&str]) -> Record {
    Record::Symbol(Symbol {
        frame: frame(dso, addr),
        frames: names
            .iter()
            .map(|n| SymFrame {
                function: n.to_string(),
                file: Some("a.c".into()),
                line: 7,
            })
            .collect(),
    })
}

/// Two threads of one process: one reads a file, one takes a lock the
/// other holds; every record kind appears.
fn rich() -> Vec<Record> {
    let mut r = vec![
        Record::Fork {
            time: 1_000_000,
            pid: 10,
            tid: 11,
            parent_pid: 1,
            parent_tid: 1,
        },
        Record::Exec {
            time: 1_000_100,
            pid: 10,
            tid: 11,
            filename: "/usr/bin/app".into(),
        },
        Record::Comm {
            time: 1_000_200,
            pid: 10,
            tid: 11,
            comm: "reader".into(),
        },
        Record::Fork {
            time: 1_000_300,
            pid: 10,
            tid: 12,
            parent_pid: 10,
            parent_tid: 11,
        },
        Record::Comm {
            time: 1_000_400,
            pid: 10,
            tid: 12,
            comm: "locker".into(),
        },
        Record::Dso(Dso {
            id: 1,
            path: "/usr/bin/app".into(),
            build_id: Some(vec![1, 2, 3, 4]),
        }),
        Record::Dso(Dso {
            id: 2,
            path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
            build_id: None,
        }),
        Record::Stack(Stack {
            id: 1,
            frames: vec![
                frame(KERNEL_DSO, 0xffff_ffff_8100_0000),
                frame(2, 0x100),
                frame(1, 0x200),
                frame(1, 0x300),
            ],
        }),
        Record::Stack(Stack {
            id: 2,
            frames: vec![frame(2, 0x400), frame(1, 0x500), frame(UNKNOWN_DSO, 0x7)],
        }),
        symbol(KERNEL_DSO, 0xffff_ffff_8100_0000, &["io_schedule"]),
        symbol(2, 0x100, &["__libc_pread64"]),
        symbol(1, 0x200, &["do_reads", "inlined_helper"]),
        symbol(1, 0x300, &["main"]),
        symbol(2, 0x400, &["__lll_lock_wait"]),
        symbol(1, 0x500, &["worker"]),
    ];
    let classes = [
        Class::Cpu,
        Class::Io,
        Class::Lock,
        Class::Sched,
        Class::Other,
    ];
    let wakers = [
        Waker::None,
        Waker::Thread(12),
        Waker::Irq(24),
        Waker::Softirq(3),
        Waker::Timer,
    ];
    let mut t = 2_000_000;
    for i in 0..20u32 {
        let tid = 11 + i % 2;
        let class = classes[i as usize % classes.len()];
        let waker = wakers[i as usize % wakers.len()];
        r.push(sample(t, tid, class, 1 + i % 3, waker, 1 + i % 2));
        r.push(segment(t, tid, class, waker));
        t += 700_000;
    }
    r.push(Record::BioIssue(bio(t, 11)));
    r.push(Record::BioDone(bio(t + 100_000, 11)));
    r.push(Record::Mmap(Mmap {
        time: t,
        pid: 10,
        start: 0x5555_0000,
        end: 0x5555_1000,
        file_offset: 0,
        dso: 1,
    }));
    r.push(Record::IrqName {
        irq: 24,
        name: "nvme0q1".into(),
    });
    r.push(Record::Lost(Lost {
        what: "samples".into(),
        count: 3,
    }));
    r.push(Record::Lost(Lost {
        what: "samples (no thread state)".into(),
        count: 2,
    }));
    r.extend(syscalls());
    r.push(Record::Exit {
        time: t + 1_000_000,
        pid: 10,
        tid: 12,
    });
    r.push(Record::Finish(Finish {
        time: t + 2_000_000,
        exit_code: Some(0),
    }));
    r
}

/// System calls of both threads, overlapping, asleep for the same reason
/// (stack 1's wait reason): the shared synthetic ones.
fn syscalls() -> Vec<Record> {
    holdup_trace::synth::syscalls::overlapping_reads()
        .records()
        .into_iter()
        .filter(|r| {
            matches!(
                r,
                Record::SyscallConfig(_) | Record::Syscall(_) | Record::SyscallTotals(_)
            )
        })
        .collect()
}

/// Traces: all records in one chunk, in chunks of 7 and of 3, without the
/// segment and block-I/O features, and cut short; and the shared synthetic
/// workloads whose answers the tests know (a wait-for graph's knot, the
/// small trace, system calls).
pub fn traces() -> Vec<Vec<u8>> {
    use holdup_trace::synth::{small, syscalls, waits, WAIT_FEATURES};
    let rich = rich();
    let all = holdup_trace::features::SEGMENTS | holdup_trace::features::BLOCK_IO;
    let figure_1 = waits::figure_1();
    let calls = syscalls::overlapping_reads();
    vec![
        trace(&rich, all, 1_000),
        trace(&rich, all, 7),
        trace(&rich, 0, 3),
        trace(&rich[..12], all, 4),
        figure_1.bytes(&figure_1.header(), WAIT_FEATURES),
        small::trace("a").bytes(&small::header(), features::SEGMENTS),
        calls.bytes(&calls.header(), 0),
    ]
}

/// Latency files with every section: histograms over two intervals with
/// their causes, a root function with call paths below it and their times,
/// and wait sites of a system call.
pub fn latency_files() -> Vec<Vec<u8>> {
    use holdup_trace::latency::*;
    let causes: Vec<String> = ["iowait", "futex_wait", "preempted", "blocked", "irq:timer"]
        .map(String::from)
        .to_vec();
    let hist = |op: &str, interval: u32, shift: usize| {
        let mut count = vec![0u64; 24];
        let mut ns = vec![0u64; 24];
        for (k, n) in [
            (8 + shift, 40u64),
            (9 + shift, 25),
            (16 + shift, 12),
            (17 + shift, 3),
        ] {
            count[k] = n;
            ns[k] = n * (3 << k) / 2;
        }
        let cause_ns = (0..causes.len())
            .map(|c| ns.iter().map(|t| t / (2 + c as u64)).collect())
            .collect();
        IntervalHistogram {
            op: op.into(),
            pid: 7,
            comm: "app".into(),
            interval,
            count,
            ns,
            cause_ns,
        }
    };
    let data = LatencyData {
        holdup_version: "0.1.0".into(),
        command: vec!["./app".into()],
        start_unix_ns: 1,
        duration_ns: 2_000_000_000,
        interval_ns: 1_000_000_000,
        lost_events: 3,
        dropped: [
            ("calls (histogram table full)".to_string(), 1),
            (
                "system-call waits (no kernel stack for their site)".to_string(),
                2,
            ),
        ]
        .into_iter()
        .collect(),
        requested: vec!["func:handle".into()],
        histograms: vec![
            hist("func:handle", 0, 0),
            hist("func:handle", 1, 1),
            hist("syscall:read", 0, 2),
        ],
        fnodes: vec![
            CallPath {
                op: "func:handle".into(),
                id: 0,
                parent: None,
                func: "handle".into(),
            },
            CallPath {
                op: "func:handle".into(),
                id: 1,
                parent: Some(0),
                func: "store".into(),
            },
            CallPath {
                op: "func:handle".into(),
                id: 2,
                parent: Some(1),
                func: "flush".into(),
            },
        ],
        wait_sites: vec![WaitSite {
            op: "syscall:read".into(),
            pid: 7,
            slot: 18,
            cause: "iowait".into(),
            frames: vec!["folio_wait_bit_common".into(), "filemap_read".into()],
            count: 12,
            ns: 9_000_000,
        }],
        callees: [(1, 16, 4_000_000u64), (2, 16, 3_000_000), (1, 8, 100)]
            .iter()
            .map(|&(fnode, slot, ns)| CalleeTime {
                op: "func:handle".into(),
                pid: 7,
                fnode,
                slot,
                calls: 12,
                ns,
                cause_ns: vec![ns / 2, 0, 0, 0, 0],
                largest: 10,
                own_largest: 2,
            })
            .collect(),
        causes,
        decision_ops: 20,
    };
    let write = |d: &LatencyData| {
        let mut b = Vec::new();
        write_latency(&mut b, d).unwrap();
        b
    };
    let mut old = data.clone();
    old.causes.clear();
    for h in &mut old.histograms {
        h.cause_ns.truncate(OFF_CPU_CAUSES);
    }
    old.callees.clear();
    vec![write(&data), write(&old)]
}

/// A causal profile in COZ's format, as `holdup causal run` writes it.
const COZ: &str = "startup\ttime=1\n\
experiment\tselected=/src/a.c:10\tspeedup=0.00\tduration=1000000\tselected-samples=3\n\
throughput-point\tname=ops\tdelta=100\twindow-delta=10\twindow-duration=100\n\
latency-point\tname=req\tarrivals=5\tdepartures=4\tdifference=1\n\
experiment\tselected=/src/a.c:10\tspeedup=0.50\tduration=800000\tselected-samples=3\n\
throughput-point\tname=ops\tdelta=100\n\
experiment\tselected=io\tspeedup=0.25\tduration=900000\tselected-samples=0\n\
progress-point\tname=ops\tdelta=100\n\
samples\tlocation=/src/a.c:10\tcount=9\n\
runtime\ttime=5\tprogress-points=1\n";

pub fn coz_profiles() -> Vec<Vec<u8>> {
    vec![COZ.as_bytes().to_vec()]
}

/// A file's cached symbols, and a cached kernel symbol table.
pub fn symbol_caches() -> Vec<Vec<u8>> {
    let mut syms = holdup_trace::symfile::FileSymbols::new();
    syms.insert(
        0x1139,
        vec![
            SymFrame {
                function: "twice".into(),
                file: Some("/src/tiny.c".into()),
                line: 5,
            },
            SymFrame {
                function: "leaf".into(),
                file: Some("/src/tiny.c".into()),
                line: 10,
            },
        ],
    );
    syms.insert(0x40, Vec::new());
    syms.insert(
        0x1150,
        vec![SymFrame {
            function: "std::vector<int>::push_back(int const&)".into(),
            file: None,
            line: 0,
        }],
    );
    let kallsyms = "ffffffff81000000 T _stext\n\
ffffffff81001000 t io_schedule\n\
ffffffff81001000 T io_schedule_alias\n\
ffffffff81002000 D some_data\n\
ffffffffc0001000 t nvme_irq\t[nvme]\n";
    vec![
        holdup_trace::symfile::format(&syms).into_bytes(),
        kallsyms.as_bytes().to_vec(),
    ]
}

/// `/proc/PID/maps` of a small dynamically linked program.
pub fn proc_maps() -> Vec<Vec<u8>> {
    let text = "55d0c0a00000-55d0c0a01000 r--p 00000000 fe:01 1311 /usr/bin/app\n\
55d0c0a01000-55d0c0a02000 r-xp 00001000 fe:01 1311 /usr/bin/app\n\
55d0c0a02000-55d0c0a03000 r--p 00002000 fe:01 1311 /usr/bin/app\n\
7f1e2c000000-7f1e2c021000 rw-p 00000000 00:00 0 \n\
7f1e2c600000-7f1e2c628000 r--p 00000000 fe:01 2300 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
7f1e2c628000-7f1e2c7bd000 r-xp 00028000 fe:01 2300 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
7f1e2c7fe000-7f1e2c800000 r-xp 00000000 00:00 0 [vdso]\n\
7f1e2c900000-7f1e2c901000 r-xp 00000000 fe:01 2400 /tmp/gone.so (deleted)\n\
7ffd5a3c0000-7ffd5a3e1000 rw-p 00000000 00:00 0 [stack]\n";
    vec![text.as_bytes().to_vec()]
}

/// Perf maps as HotSpot, V8 and CPython write them, with a line cut short.
pub fn perf_maps() -> Vec<Vec<u8>> {
    vec![
        b"7f3a1c000000 40 Interpreter\n7f3a1c000100 1a0 LFoo;::bar\n7f3a1c0002a0 80 py::spin:/tmp/w.py\n"
            .to_vec(),
        b"0x55d0c0a01000 0x100 LazyCompile:*hot /app/x.js:3:10\r\n55d0c0a01080 10 over lapping\n55d0c0a0".to_vec(),
    ]
}

/// A jitdump file: its header, the lines of a piece of code, its load, a
/// move, an unknown record kind, and the close.
pub fn jitdumps() -> Vec<Vec<u8>> {
    let mut b = Vec::new();
    let u32s = |b: &mut Vec<u8>, v: &[u32]| v.iter().for_each(|x| b.extend(x.to_le_bytes()));
    let u64s = |b: &mut Vec<u8>, v: &[u64]| v.iter().for_each(|x| b.extend(x.to_le_bytes()));
    // magic, version, header size, machine (x86-64), padding, pid; time, flags
    u32s(&mut b, &[0x4A69_5444, 1, 40, 62, 0, 4242]);
    u64s(&mut b, &[0, 0]);
    let record = |b: &mut Vec<u8>, id: u32, body: &[u8]| {
        b.extend(id.to_le_bytes());
        b.extend((16 + body.len() as u32).to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend(body);
    };
    let mut lines = Vec::new();
    u64s(&mut lines, &[0x7000_1000, 2]);
    for (addr, line, file) in [
        (0x7000_1000u64, 3u32, &b"w.py\0"[..]),
        (0x7000_1010, 4, b"\xff\0"),
    ] {
        u64s(&mut lines, &[addr]);
        u32s(&mut lines, &[line, 0]);
        lines.extend(file);
    }
    record(&mut b, 2, &lines);
    let mut load = Vec::new();
    u32s(&mut load, &[4242, 4242]);
    u64s(&mut load, &[0x7000_1000, 0x7000_1000, 0x40, 1]);
    load.extend(b"py::spin:w.py\0");
    load.extend([0x90; 0x10]);
    record(&mut b, 0, &load);
    let mut moved = Vec::new();
    u32s(&mut moved, &[4242, 4242]);
    u64s(
        &mut moved,
        &[0x7000_2000, 0x7000_1000, 0x7000_2000, 0x40, 1],
    );
    record(&mut b, 1, &moved);
    record(&mut b, 7, &[0; 8]);
    record(&mut b, 3, &[]);
    vec![b]
}

/// Small ELF files built from `seeds/tiny.c` by `seeds/build`: DWARF 5
/// with .eh_frame and its index; zlib-compressed DWARF with .debug_frame;
/// DWARF 4.
pub fn elf_files() -> Vec<Vec<u8>> {
    vec![
        include_bytes!("../seeds/tiny.elf").to_vec(),
        include_bytes!("../seeds/tiny-debug-frame.elf").to_vec(),
        include_bytes!("../seeds/tiny-dwarf4.elf").to_vec(),
    ]
}
