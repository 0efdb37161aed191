//! What the recorder's rows are called in the latency file: operations
//! (`syscall:read`, `func:lookup`, `block:vda`, `lock`), the cause columns
//! (named in [`holdup_trace::latency::causes`]) and the wait sites.

use holdup_analysis::syscalls::name as syscall_name;
use holdup_bpf::latency::{
    HistRow, LatencyOptions, KIND_BLOCK, KIND_KFUNC, KIND_LOCK, KIND_SYSCALL, KIND_UFUNC,
};
use holdup_trace::devices;
use holdup_trace::latency::{causes, CalleeTime, IntervalHistogram, WaitSite, OFF_CPU_CAUSES};

/// The wait sites of system calls, their stacks named by the kernel's
/// symbols: leaf first, from the first function below the scheduler.
pub fn wait_sites(rows: &[holdup_bpf::latency::SiteRow]) -> Vec<WaitSite> {
    const FRAMES: usize = 8;
    let Ok(ksyms) = holdup_symbolize::KernelSymbols::load() else {
        return Vec::new();
    };
    rows.iter()
        .filter_map(|r| {
            let frames: Vec<String> = r
                .stack
                .iter()
                .filter_map(|&ip| ksyms.find(ip).map(|(name, _)| name.to_string()))
                .skip_while(|n| holdup_analysis::stacks::is_scheduler_function(n))
                .take(FRAMES)
                .collect();
            Some(WaitSite {
                op: format!("syscall:{}", syscall_name(r.nr)),
                pid: r.tgid,
                slot: r.slot,
                cause: causes::OFF_CPU.get(r.cause as usize)?.to_string(),
                frames,
                count: r.count,
                ns: r.ns,
            })
        })
        .filter(|w| !w.frames.is_empty())
        .collect()
}

/// The names of the kernel's cause columns that took any time (the
/// off-CPU ones always), keeping only those columns in `histograms` and
/// `callees`: most interrupts never run inside a traced call.
pub fn keep_used_causes(
    device_irqs: &[Option<String>],
    histograms: &mut [IntervalHistogram],
    callees: &mut [CalleeTime],
) -> Vec<String> {
    use holdup_bpf::latency::{
        CAUSES, CAUSE_IRQ_DEV, CAUSE_IRQ_OTHER, CAUSE_IRQ_TIMER, CAUSE_SOFTIRQ,
    };
    let name = |c: usize| -> String {
        match c {
            _ if c < OFF_CPU_CAUSES => causes::OFF_CPU[c].to_string(),
            CAUSE_IRQ_TIMER => causes::IRQ_TIMER.into(),
            CAUSE_IRQ_OTHER => causes::IRQ_OTHER.into(),
            _ if c >= CAUSE_SOFTIRQ => causes::softirq(c - CAUSE_SOFTIRQ),
            _ => match device_irqs.get(c - CAUSE_IRQ_DEV) {
                Some(Some(n)) => causes::irq(n),
                _ => causes::IRQ_UNNAMED.into(),
            },
        }
    };
    let used = |c: usize| {
        c < OFF_CPU_CAUSES
            || histograms
                .iter()
                .any(|h| h.cause_ns.get(c).is_some_and(|v| v.iter().any(|&n| n > 0)))
            || callees
                .iter()
                .any(|t| t.cause_ns.get(c).is_some_and(|&n| n > 0))
    };
    let keep: Vec<usize> = (0..CAUSES).filter(|&c| used(c)).collect();
    for h in histograms.iter_mut() {
        h.cause_ns = columns(&h.cause_ns, &keep);
    }
    for t in callees.iter_mut() {
        t.cause_ns = columns(&t.cause_ns, &keep);
    }
    keep.into_iter().map(name).collect()
}

/// The elements of `v` at `keep`.
fn columns<T: Clone>(v: &[T], keep: &[usize]) -> Vec<T> {
    keep.iter().filter_map(|&c| v.get(c).cloned()).collect()
}

/// The `vda` of `block:vda`: this machine's name for the device (the
/// recorder runs here), its numbers if it has none.
fn block_name(dev: u32) -> String {
    devices::block_name(dev).unwrap_or_else(|| {
        let (major, minor) = devices::major_minor(dev);
        format!("{major}:{minor}")
    })
}

pub fn op_name(row: &HistRow, opts: &LatencyOptions) -> String {
    match row.kind {
        KIND_SYSCALL => format!("syscall:{}", syscall_name(row.id)),
        KIND_KFUNC => format!(
            "kfunc:{}",
            opts.kfuncs.get(row.id as usize).map_or("?", |s| s.as_str())
        ),
        KIND_UFUNC => format!(
            "func:{}",
            opts.ufuncs
                .get(row.id as usize)
                .map_or("?", |f| f.symbol.as_str())
        ),
        KIND_BLOCK => format!("block:{}", block_name(row.id)),
        KIND_LOCK => "lock".to_string(),
        k => format!("kind{k}:{}", row.id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdup_bpf::latency::{CAUSES, CAUSE_IRQ_DEV, CAUSE_IRQ_TIMER, CAUSE_SOFTIRQ};

    #[test]
    fn only_the_interrupt_columns_that_took_time_are_kept_and_named() {
        let mut cause_ns = vec![vec![0u64; 3]; CAUSES];
        cause_ns[0][1] = 10; // iowait
        cause_ns[CAUSE_IRQ_DEV + 1][2] = 20;
        cause_ns[CAUSE_SOFTIRQ + 3][0] = 30; // net_rx
        let mut histograms = vec![IntervalHistogram {
            op: "syscall:read".into(),
            pid: 1,
            comm: "app".into(),
            interval: 0,
            count: vec![1; 3],
            ns: vec![100; 3],
            cause_ns,
        }];
        let mut callee_ns = vec![0u64; CAUSES];
        callee_ns[CAUSE_IRQ_TIMER] = 5;
        callee_ns[CAUSE_IRQ_DEV + 2] = 7; // a device slot never named
        let mut callees = vec![CalleeTime {
            op: "func:handle".into(),
            pid: 1,
            fnode: 1,
            slot: 2,
            calls: 1,
            ns: 50,
            cause_ns: callee_ns,
            largest: 0,
            own_largest: 0,
        }];
        let devices = vec![Some("nvme0q1".to_string()), Some("virtio1".to_string())];
        let names = keep_used_causes(&devices, &mut histograms, &mut callees);
        assert_eq!(
            names,
            [
                causes::IOWAIT,
                causes::FUTEX_WAIT,
                causes::PREEMPTED,
                causes::BLOCKED,
                causes::IRQ_TIMER,
                "irq:virtio1",
                causes::IRQ_UNNAMED,
                "softirq:net_rx",
            ]
        );
        let h = &histograms[0].cause_ns;
        assert_eq!(h.len(), names.len());
        assert_eq!((h[0][1], h[5][2], h[7][0]), (10, 20, 30));
        assert_eq!(callees[0].cause_ns, [0, 0, 0, 0, 5, 0, 7, 0]);
    }
}
