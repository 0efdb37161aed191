use holdup_bpf::records::RawRecord;
use holdup_bpf::{Recorder, RecorderOptions, Target};
use std::collections::HashMap;

fn main() {
    let pid: u32 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(0);
    let opts = RecorderOptions {
        target: if pid == 0 {
            Target::All
        } else {
            Target::Pids(vec![pid])
        },
        ..Default::default()
    };
    libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, |_l, m| eprint!("{m}"))));
    let mut rec = match Recorder::start(opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1)
        }
    };
    let now = nix_now();
    rec.set_start(now);
    let mut counts: HashMap<&'static str, u64> = HashMap::new();
    let mut weights = [0u64; 5];
    let mut sched_w = 0u64;
    let mut mm = 0;
    let mut late = 0;
    let mut kdepth = 0u64;
    let mut fpdepth = 0u64;
    let mut copy = 0u64;
    for _ in 0..10 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        rec.drain_address_events(|_m| mm += 1);
        rec.drain_records(|r| {
            let k = match r {
                RawRecord::Sample(s) => {
                    weights[s.rec.class as usize] += s.rec.weight as u64;
                    sched_w += s.rec.sched_weight as u64;
                    if s.rec.flags & holdup_bpf::records::SF_LATE_USTACK != 0 {
                        late += 1;
                    }
                    kdepth += s.rec.kstack_len as u64;
                    fpdepth += s.rec.fp_len as u64;
                    copy += s.rec.copy_len as u64;
                    "sample"
                }
                RawRecord::Segment(_) => "segment",
                RawRecord::Fork(_) => "fork",
                RawRecord::Exec(_) => "exec",
                RawRecord::Comm(_) => "comm",
                RawRecord::Exit(_) => "exit",
                RawRecord::BioIssue(_) => "bio_issue",
                RawRecord::BioDone(_) => "bio_done",
                RawRecord::SyscallStack(_) => "syscall_stack",
                RawRecord::WakerUstack(_) => "waker_ustack",
                RawRecord::Syscall(_) => "syscall",
                RawRecord::PyCode(_) => "py_code",
                RawRecord::GoWait(_) => "go_wait",
            };
            *counts.entry(k).or_default() += 1;
        });
    }
    rec.flush_open().unwrap();
    let mut tail = 0;
    rec.drain_records(|r| {
        if let RawRecord::Sample(s) = r {
            if s.rec.flags & holdup_bpf::records::SF_BLOCKED_TAIL != 0 {
                tail += 1
            }
        }
    });
    let ns = *counts.get("sample").unwrap_or(&1);
    println!("{counts:?} mmaps={mm} weights(cpu,io,lock,sched,other)={weights:?} +sched_tail={sched_w} late={late} tail={tail} lost={:?}", rec.lost().total());
    println!(
        "avg kstack={} fp={} copy={}",
        kdepth / ns,
        fpdepth / ns,
        copy / ns
    );
}

fn nix_now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
