//! Timed re-checks of a contended lock, credited to the holder as the
//! profile credits them ([`crate::profile::retries`]): a wait the timer
//! ended is one of a chain of waits for the thread that released the lock.
//!
//! Whether a wait is contended depends on its stack's symbols, which a
//! trace holds at its end, and the chain's waker comes after the waits it
//! credits: pass 1 keeps the sampled lock waits of each chain that has a
//! timer-ended one, and they are settled between the passes, when every
//! stack has its names. Only those chains are kept (few in most traces).

use crate::fxhash::FxHashMap;
use crate::profile::retries::Retries;
use crate::stacks::{lock_kind, Resolver};
use holdup_trace::{Class, Sample, StackId, Trace, Waker};

/// A sampled lock wait: when it began, its stack and its waker.
#[derive(Clone, Copy)]
struct Wait {
    start: u64,
    stack: StackId,
    waker: Waker,
}

/// The lock waits of the chains that hold a timer-ended wait, by thread.
#[derive(Default)]
pub(super) struct Chains {
    open: FxHashMap<u32, Vec<Wait>>,
    closed: Vec<(u32, Vec<Wait>)>,
}

/// The waker a timer-ended wait of a thread is credited with:
/// (tid, start) → waker.
pub(super) type Credited = FxHashMap<(u32, u64), Waker>;

impl Chains {
    /// Pass 1: a blocked sample, in file order. A wait woken by anyone but
    /// the timer, or a wait of another class, settles whatever chain is
    /// open; preemption and on-CPU time do not.
    pub(super) fn sample(&mut self, s: &Sample) {
        match s.class {
            _ if s.weight == 0 => {}
            Class::Cpu | Class::Sched => {}
            Class::Lock => {
                let open = self.open.entry(s.tid).or_default();
                // Before a timer-ended wait nothing is pending: a chain
                // without one credits every wait with its own waker.
                if open.is_empty() && s.waker != Waker::Timer {
                    return;
                }
                open.push(Wait {
                    start: s.time,
                    stack: s.stack,
                    waker: s.waker,
                });
                if !matches!(s.waker, Waker::Timer | Waker::None) {
                    self.close(s.tid);
                }
            }
            _ => self.close(s.tid),
        }
    }

    fn close(&mut self, tid: u32) {
        if let Some(open) = self.open.get_mut(&tid) {
            if !open.is_empty() {
                self.closed.push((tid, std::mem::take(open)));
            }
        }
    }

    /// Between the passes: the waker of each timer-ended wait that a
    /// chain credits to someone else, with the rule the profile uses.
    pub(super) fn settle(mut self, names: &Trace) -> Credited {
        let tids: Vec<u32> = self.open.keys().copied().collect();
        for tid in tids {
            self.close(tid);
        }
        let mut resolver = Resolver::new(names);
        let mut credited = Credited::default();
        for (tid, chain) in self.closed {
            let mut credit = |w: Wait, waker: Waker| {
                if waker != w.waker {
                    credited.insert((tid, w.start), waker);
                }
            };
            let mut retries = Retries::default();
            for w in chain {
                if lock_kind(&resolver.stack(w.stack)).is_contention() {
                    retries.contended(w, w.waker, &mut credit);
                } else {
                    retries.end(&mut credit);
                }
            }
            retries.end(&mut credit);
        }
        credited
    }
}

#[cfg(test)]
mod tests {
    use crate::waitgraph::{analyze, InMemory, Options, WaitGraph};
    use holdup_trace::synth::{TraceBuilder, MS, WAIT_FEATURES};
    use holdup_trace::{Class, Waker};

    const WAITER: u32 = 1;
    const HOLDER: u32 = 2;
    const POLLER: u32 = 3;
    const MONITOR_ENTER: u32 = 1;
    const TIMED_COND_WAIT: u32 = 2;

    /// A lock wait over [start, wake) ms, its segment and its sample.
    fn wait(r: &mut TraceBuilder, tid: u32, (start, wake): (f64, f64), waker: Waker, stack: u32) {
        r.seg(tid, start, wake, wake, Class::Lock, waker);
        let points = (wake - start).floor() as u32;
        r.blocked(tid, (start, wake), Class::Lock, waker, stack, points);
    }

    /// 50 rounds of 20 ms. The holder keeps a monitor 15 ms of each; the
    /// waiter, entering it, re-checks after 1 ms and 8 ms (the timer wakes
    /// it) and is woken by the holder's release at 15 ms. The poller waits
    /// on a condition variable with a timeout of 10 ms, then is signalled
    /// by the holder 5 ms later: its timeout is its own.
    fn rounds() -> TraceBuilder {
        let mut r = TraceBuilder::new(1000.0);
        r.stack(
            MONITOR_ENTER,
            &["pthread_cond_timedwait", "ObjectMonitor::EnterI", "run"],
        );
        r.stack(TIMED_COND_WAIT, &["pthread_cond_timedwait", "poll_queue"]);
        for k in 0..50 {
            let c = 20.0 * k as f64;
            wait(&mut r, WAITER, (c, c + 1.0), Waker::Timer, MONITOR_ENTER);
            wait(
                &mut r,
                WAITER,
                (c + 1.0, c + 9.0),
                Waker::Timer,
                MONITOR_ENTER,
            );
            let released = Waker::Thread(HOLDER);
            wait(&mut r, WAITER, (c + 9.0, c + 15.0), released, MONITOR_ENTER);
            let timeout = (c, c + 10.0);
            wait(&mut r, POLLER, timeout, Waker::Timer, TIMED_COND_WAIT);
            let signalled = (c + 10.0, c + 15.0);
            wait(&mut r, POLLER, signalled, released, TIMED_COND_WAIT);
            for ms in 0..20 {
                r.cpu(HOLDER, c + ms as f64 + 0.5, MONITOR_ENTER);
            }
        }
        r
    }

    fn graph(r: &TraceBuilder, long_ns: u64) -> WaitGraph {
        let recs = r.records();
        let mut src = InMemory {
            header: r.header(),
            features: WAIT_FEATURES,
            records: &recs,
        };
        let opts = Options {
            merge_similar: false,
            long_ns,
            ..Default::default()
        };
        analyze(&mut src, &opts).unwrap()
    }

    /// The raw wait of `from` on `to`, in ms (0 without an edge).
    fn wait_ms(g: &WaitGraph, from: &str, to: &str) -> f64 {
        let (Some(f), Some(t)) = (g.node(from), g.node(to)) else {
            return 0.0;
        };
        g.edge(f, t).map_or(0.0, |e| e.wait_ns as f64 / MS as f64)
    }

    #[test]
    fn timed_rechecks_of_a_monitor_wait_for_its_holder() {
        let r = rounds();
        // Through the sweep, and as long waits found by the first pass.
        for long_ns in [1 << 40, 0] {
            let g = graph(&r, long_ns);
            let holder = format!("t:{HOLDER}");
            let (waiter, poller) = (format!("t:{WAITER}"), format!("t:{POLLER}"));
            assert_eq!(wait_ms(&g, &waiter, &holder), 50.0 * 15.0, "{long_ns}");
            assert_eq!(wait_ms(&g, &waiter, "timer"), 0.0);
            let w = g.node(&waiter).unwrap();
            let edge = g.edge(w, g.node(&holder).unwrap()).unwrap();
            assert_eq!(edge.weight_ns, 50 * 15 * MS);
            // A condition variable's timeout is no re-check of a lock.
            assert_eq!(wait_ms(&g, &poller, "timer"), 50.0 * 10.0);
            assert_eq!(wait_ms(&g, &poller, &holder), 50.0 * 5.0);
        }
    }
}
