//! Write a synthetic trace with many samples, for timing the analyses:
//! `cargo run --release -p holdup-trace --example synth -- OUT SAMPLES`.

use holdup_trace::*;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let out = args.next().unwrap_or_else(|| "synth.data".into());
    let n: u64 = args
        .next()
        .map_or(1_000_000, |s| s.parse().expect("SAMPLES"));
    let header = Header {
        period_ns: 1_000_000,
        start_ns: 1_000_000_000,
        target: "synthetic".into(),
        ..Default::default()
    };
    let mut w = Writer::create(std::path::Path::new(&out), &header, features::SEGMENTS)?;
    w.write(&Record::Dso(Dso {
        id: 1,
        path: "/usr/bin/app".into(),
        build_id: None,
    }))?;
    // 64 threads, 2000 distinct stacks of depth 12 over 300 functions.
    for tid in 0..64u32 {
        w.write(&Record::Comm {
            time: 0,
            pid: 100,
            tid: 100 + tid,
            comm: format!("worker{}", tid % 8),
        })?;
    }
    for f in 0..300u64 {
        w.write(&Record::Symbol(Symbol {
            frame: Frame {
                dso: 1,
                addr: f * 16,
            },
            frames: vec![SymFrame {
                function: format!("function_{f}"),
                file: Some("app.c".into()),
                line: f as u32,
            }],
        }))?;
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for id in 1..=2000u32 {
        let frames = (0..12)
            .map(|_| Frame {
                dso: 1,
                addr: (rand() % 300) * 16,
            })
            .collect();
        w.write(&Record::Stack(Stack { id, frames }))?;
    }
    let classes = [
        Class::Cpu,
        Class::Cpu,
        Class::Io,
        Class::Lock,
        Class::Sched,
        Class::Other,
    ];
    for i in 0..n {
        let class = classes[(rand() % 6) as usize];
        let time = 1_000_000_000 + i * 1000;
        w.write(&Record::Sample(Sample {
            time,
            wake: if class == Class::Cpu { 0 } else { time + 500 },
            end: time + 900,
            pid: 100,
            tid: 100 + (rand() % 64) as u32,
            cpu: 0,
            class,
            weight: if class == Class::Cpu {
                1
            } else {
                1 + (rand() % 4) as u32
            },
            sched_weight: 0,
            waker: Waker::Thread(100),
            stack: 1 + (rand() % 2000) as u32,
            late_user_stack: false,
            waker_stack: 0,
        }))?;
    }
    w.write(&Record::Finish(Finish {
        time: 1_000_000_000 + n * 1000,
        exit_code: Some(0),
    }))?;
    w.finish()?;
    Ok(())
}
