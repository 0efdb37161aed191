//! Print the raw blocked samples of a process, for debugging the recorder.
use holdup_bpf::records::RawRecord;
use holdup_bpf::{Recorder, RecorderOptions, Target};

fn main() {
    let pid: u32 = std::env::args().nth(1).expect("pid").parse().unwrap();
    let mut rec = Recorder::start(RecorderOptions {
        target: Target::Pids(vec![pid]),
        ..Default::default()
    })
    .unwrap();
    for _ in 0..10 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        rec.drain_records(|r| {
            if let RawRecord::Sample(s) = r {
                if s.rec.class != 0 {
                    println!(
                        "tid {} class {} w {}+{} flags {:#x} ip {:#x} sp {:#x} bp {:#x} k {} fp {} copy {}",
                        s.rec.tid, s.rec.class, s.rec.weight, s.rec.sched_weight, s.rec.flags, s.rec.ip, s.rec.sp, s.rec.bp,
                        s.rec.kstack_len, s.rec.fp_len, s.rec.copy_len
                    );
                }
            }
        });
    }
}
