//! The seed corpus: small traces that use every record kind and every
//! class and waker, and a small causal profile. Real recordings can be
//! added with `--corpus DIR`.

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

/// The built-in seeds.
pub fn seeds() -> Vec<Vec<u8>> {
    let rich = rich();
    let all = holdup_trace::features::SEGMENTS | holdup_trace::features::BLOCK_IO;
    vec![
        trace(&rich, all, 1_000),
        trace(&rich, all, 7),
        trace(&rich, 0, 3),
        trace(&rich[..12], all, 4),
        COZ.as_bytes().to_vec(),
    ]
}
