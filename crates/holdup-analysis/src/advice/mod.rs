//! Every line of advice holdup prints, in one place: per thread in the
//! report (`thread`) and per knot of the wait-for graph (`knot`). Both call
//! a thread CPU-bound by one rule and say so in the same words.

pub mod knot;
pub mod thread;

pub use thread::thread;

/// Running or runnable more than 90% of its life: the thread waits for
/// nobody, its CPU is the bottleneck (wPerf's sink).
pub fn is_cpu_bound(busy: u64, life: u64) -> bool {
    life > 0 && busy as u128 * 10 > life as u128 * 9
}

fn cpu_bound_text(on_pct: f64, runnable_pct: f64) -> String {
    format!(
        "on CPU {on_pct:.0}%, runnable {runnable_pct:.0}%: CPU-bound — more cores / more worker threads / faster code"
    )
}

fn pct(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * n as f64 / total as f64
    }
}
