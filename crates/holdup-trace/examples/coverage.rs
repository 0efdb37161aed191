//! Per thread: lifetime, off-CPU time from segments, and what the samples
//! cover — for checking a recording by hand:
//! `cargo run -p holdup-trace --example coverage -- holdup.data`.

use holdup_trace::*;

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "holdup.data".into());
    let t = Trace::load(std::path::Path::new(&path)).expect("trace");
    let p = t.header.period_ns as f64;
    for th in t.threads.values() {
        let segs: f64 = t
            .segments
            .iter()
            .filter(|s| s.tid == th.tid)
            .map(|s| (s.end - s.start) as f64)
            .sum();
        let (mut cpu, mut blocked, mut late) = (0u64, 0u64, 0u64);
        for s in t.samples.iter().filter(|s| s.tid == th.tid) {
            if s.class == Class::Cpu {
                cpu += s.weight as u64;
            } else {
                blocked += (s.weight + s.sched_weight) as u64;
                late += s.late_user_stack as u64;
            }
        }
        let life = th.lifetime_ns() as f64;
        println!(
            "{:>7} {:<16} coverage {:.3}  life {:>8.3} s  off-CPU (segments) {:>8.3} s  blocked samples {:>8.3} s  on-CPU {:>8.3} s (life - off {:>8.3} s)  late {}",
            th.tid,
            th.comm,
            (blocked + cpu) as f64 * p / life,
            life / 1e9,
            segs / 1e9,
            blocked as f64 * p / 1e9,
            cpu as f64 * p / 1e9,
            (life - segs) / 1e9,
            late
        );
    }
}
