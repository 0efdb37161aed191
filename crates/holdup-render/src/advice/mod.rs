//! Every line of advice holdup prints, in one place: per thread in the
//! report (`thread`, and `holder` for a thread waiting on mutexes whose
//! holders' activity was followed) and per knot of the wait-for graph
//! (`knot`). The
//! analyses find the facts (a knot's shape, its vertices, edges and
//! stacks; a thread's samples); the words are said here. Both call a thread
//! CPU-bound by the analyses' one rule and say so in the same words.

pub mod holder;
pub mod knot;
pub mod thread;

pub use holder::holder;
pub use knot::{knot, KnotAdvice};
pub use thread::thread;

/// What a CPU-bound thread's advice says: its shares (the part a short
/// label keeps) and the rest.
fn cpu_bound_text(on_pct: f64, runnable_pct: f64) -> (String, &'static str) {
    (
        format!("on CPU {on_pct:.0}%, runnable {runnable_pct:.0}%"),
        ": CPU-bound — more cores / more worker threads / faster code",
    )
}

fn pct(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * n as f64 / total as f64
    }
}
