//! Holders' activity on hand-made traces whose answer is known by
//! construction: times in ms, one sampling point per ms.

use super::*;
use crate::profile::Tag;
use holdup_trace::{Frame, Sample, Segment, SymFrame, Thread};

const MS: u64 = 1_000_000;
const T0: u64 = 1_000 * MS;
const DISK_IRQ: Waker = Waker::Irq(24);

fn ns(ms: f64) -> u64 {
    T0 + (ms * MS as f64).round() as u64
}

/// A trace built interval by interval.
struct Build {
    t: Trace,
}

impl Build {
    fn new(end_ms: u64) -> Build {
        let mut t = Trace::default();
        t.header.period_ns = MS;
        t.header.start_ns = T0;
        t.end_ns = T0 + end_ms * MS;
        Build { t }
    }

    fn thread(&mut self, tid: u32, comm: &str) {
        let (start, end) = (self.t.header.start_ns, self.t.end_ns);
        self.t.threads.insert(
            tid,
            Thread {
                pid: 100,
                tid,
                comm: comm.into(),
                start,
                end,
                exited: false,
                exec: None,
            },
        );
    }

    /// Stack `id`: one user frame per name, leaf first, in dso 1.
    fn stack(&mut self, id: StackId, funcs: &[&str]) {
        let frames: Vec<Frame> = (0..funcs.len())
            .map(|i| Frame {
                dso: 1,
                addr: u64::from(id) << 16 | i as u64,
            })
            .collect();
        for (f, name) in frames.iter().zip(funcs) {
            self.t.symbols.insert(
                *f,
                vec![SymFrame {
                    function: name.to_string(),
                    file: None,
                    line: 0,
                }],
            );
        }
        self.t.stacks.insert(id, frames);
    }

    /// Off-CPU over [start, end) ms, woken at `wake` (negative: never),
    /// with a blocked sample of `stack` when it covers sampling points.
    #[allow(clippy::too_many_arguments)]
    fn off(
        &mut self,
        tid: u32,
        start: f64,
        wake: f64,
        end: f64,
        class: Class,
        waker: Waker,
        stack: Option<StackId>,
    ) {
        let woken = wake >= 0.0;
        let w = if woken { wake } else { end };
        self.t.segments.push(Segment {
            pid: 100,
            tid,
            start: ns(start),
            wake: if woken { ns(wake) } else { 0 },
            end: ns(end),
            class,
            waker: if woken { waker } else { Waker::None },
            cpu: Some(0),
        });
        if let Some(stack) = stack {
            self.t.samples.push(Sample {
                time: ns(start),
                wake: ns(w),
                end: ns(end),
                pid: 100,
                tid,
                cpu: 0,
                class,
                weight: (w - start).round() as u32,
                sched_weight: (end - w).round() as u32,
                waker: if woken { waker } else { Waker::None },
                stack,
                late_user_stack: false,
                waker_stack: 0,
            });
        }
    }

    fn cpu(&mut self, tid: u32, at: f64, stack: StackId) {
        self.t.samples.push(Sample {
            time: ns(at),
            wake: 0,
            end: ns(at),
            pid: 100,
            tid,
            cpu: 0,
            class: Class::Cpu,
            weight: 1,
            sched_weight: 0,
            waker: Waker::None,
            stack,
            late_user_stack: false,
            waker_stack: 0,
        });
    }

    fn held(&self) -> Attribution {
        attribute(&self.t, &|_| true, Scope::Held)
    }
}

/// Points of the parts matching `f`, for the waiter `tid`.
fn sum(a: &Attribution, tid: u32, f: impl Fn(&Part) -> bool) -> f64 {
    a.parts
        .iter()
        .filter(|p| p.waiter.tid == tid && f(p))
        .map(|p| p.points)
        .sum()
}

#[track_caller]
fn near(what: &str, got: f64, want: f64) {
    assert!((got - want).abs() < 1e-6, "{what}: {got}, expected {want}");
}

const WAITER: u32 = 10;
const KEEPER: u32 = 11;
const S_LOCK: StackId = 1;
const S_SYNC: StackId = 2;
const S_WRITE: StackId = 3;
const S_OUTSIDE: StackId = 4;

/// A keeper holds a mutex over 10 ms of every 20: it writes on the CPU
/// for 2 ms, waits 6 ms for the disk, is runnable 1 ms, runs 1 ms more and
/// unlocks; then it works 10 ms outside the lock. The waiter waits for the
/// mutex exactly while the keeper holds it.
fn io_in_lock(rounds: u32) -> Build {
    let mut b = Build::new(20 * u64::from(rounds) + 1);
    b.thread(WAITER, "waiter");
    b.thread(KEEPER, "keeper");
    b.stack(S_LOCK, &["pthread_mutex_lock", "take", "waiter_main"]);
    b.stack(S_SYNC, &["fdatasync", "sync_under_lock", "keeper_main"]);
    b.stack(S_WRITE, &["write", "sync_under_lock", "keeper_main"]);
    b.stack(S_OUTSIDE, &["compute", "keeper_main"]);
    for k in 0..rounds {
        let c = 20.0 * f64::from(k) + 1.0;
        b.cpu(KEEPER, c + 1.0, S_WRITE);
        b.cpu(KEEPER, c + 2.0, S_WRITE);
        b.off(
            KEEPER,
            c + 2.0,
            c + 8.0,
            c + 9.0,
            Class::Io,
            DISK_IRQ,
            Some(S_SYNC),
        );
        b.cpu(KEEPER, c + 10.0, S_WRITE);
        for i in 1..=10 {
            b.cpu(KEEPER, c + 10.0 + f64::from(i), S_OUTSIDE);
        }
        b.off(
            WAITER,
            c,
            c + 10.0,
            c + 10.0,
            Class::Lock,
            Waker::Thread(KEEPER),
            Some(S_LOCK),
        );
        for i in 1..=10 {
            b.cpu(WAITER, c + 10.0 + f64::from(i), S_OUTSIDE);
        }
    }
    b
}

#[test]
fn the_holders_io_inside_the_lock_is_what_the_waiter_waited_for() {
    let a = attribute(&io_in_lock(50).t, &|tid| tid == WAITER, Scope::Held);
    let total = 50.0 * 10.0;
    near("followed", a.stats.points, total);
    // Every point of the waiter's mutex time is placed, and only once.
    near("sum", sum(&a, WAITER, |_| true), total);
    let io = sum(&a, WAITER, |p| {
        p.end == End::Outside(Class::Io, DISK_IRQ) && p.stack == Some(S_SYNC)
    });
    near("fdatasync [I]", io / total, 0.6);
    let runnable = sum(&a, WAITER, |p| {
        p.end == End::Runnable && p.stack == Some(S_SYNC)
    });
    near("fdatasync [S]", runnable / total, 0.1);
    let cpu = sum(&a, WAITER, |p| {
        p.end == End::Cpu && p.stack == Some(S_WRITE)
    });
    near("write [.]", cpu / total, 0.3);
    // The keeper's work outside the lock is not what the waiter waited for.
    near(
        "outside",
        sum(&a, WAITER, |p| p.stack == Some(S_OUTSIDE)),
        0.0,
    );
    assert!(a.parts.iter().all(|p| p.tid == KEEPER && p.path == DIRECT));
    assert!(a.stats.notes().is_empty(), "{:?}", a.stats.notes());
}

/// A waits for a mutex B holds; B waits for C on a pipe; C reads from the
/// disk. Over A's 10 ms: B runs [0,1) and [9,10), waits for C [1,8), is
/// runnable [8,9); C runs [1,2) and [7,8), waits for the disk [2,7).
fn chain() -> Build {
    let (a, b, c) = (1, 2, 3);
    let mut t = Build::new(10);
    t.thread(a, "a");
    t.thread(b, "b");
    t.thread(c, "c");
    t.stack(1, &["pthread_mutex_lock", "a_main"]);
    t.stack(2, &["read", "b_main"]);
    t.stack(3, &["pread64", "read_block", "c_main"]);
    t.stack(4, &["relay", "b_main"]);
    t.stack(5, &["parse", "c_main"]);
    t.off(a, 0.0, 10.0, 10.0, Class::Lock, Waker::Thread(b), Some(1));
    t.off(b, 1.0, 8.0, 9.0, Class::Other, Waker::Thread(c), Some(2));
    t.off(c, 2.0, 7.0, 7.0, Class::Io, DISK_IRQ, Some(3));
    t.cpu(b, 1.0, 4);
    t.cpu(b, 10.0, 4);
    t.cpu(c, 2.0, 5);
    t.cpu(c, 8.0, 5);
    t
}

#[test]
fn a_wait_through_a_chain_ends_on_the_disk_reads_of_its_last_thread() {
    let t = chain();
    let mut a = t.held();
    near("sum", sum(&a, 1, |_| true), 10.0);
    let via_b = a.paths.child(DIRECT, 2, Class::Other);
    let disk = sum(&a, 1, |p| {
        p.tid == 3 && p.path == via_b && p.end == End::Outside(Class::Io, DISK_IRQ)
    });
    near("c's disk reads", disk, 5.0);
    assert!(a
        .parts
        .iter()
        .any(|p| p.tid == 3 && p.stack == Some(3) && p.points > 4.99));
    near(
        "c on CPU",
        sum(&a, 1, |p| p.tid == 3 && p.end == End::Cpu),
        2.0,
    );
    near(
        "b on CPU",
        sum(&a, 1, |p| p.tid == 2 && p.end == End::Cpu),
        2.0,
    );
    near(
        "b runnable",
        sum(&a, 1, |p| p.tid == 2 && p.end == End::Runnable),
        1.0,
    );
    assert_eq!(
        a.paths.hops(via_b),
        vec![Hop {
            tid: 2,
            class: Class::Other
        }]
    );
    // B's own wait for C, followed as a waiter of its own: C's part only.
    near("b's wait", sum(&a, 2, |_| true), 7.0);
    near(
        "b's wait on c's disk",
        sum(&a, 2, |p| {
            p.tid == 3 && p.path == DIRECT && matches!(p.end, End::Outside(..))
        }),
        5.0,
    );
}

#[test]
fn the_whole_time_of_a_thread_keeps_its_own_work_and_starts_paths_at_it() {
    let mut t = chain();
    // A runs after its wait: 3 on-CPU samples of its own.
    t.t.end_ns = ns(13.0);
    for at in [11.0, 12.0, 13.0] {
        t.cpu(1, at, 1);
    }
    let mut a = attribute(&t.t, &|tid| tid == 1, Scope::Whole);
    near("sum", sum(&a, 1, |_| true), 13.0);
    near("own", sum(&a, 1, |p| p.tid == 1 && p.end == End::Cpu), 3.0);
    let a_waits = a.paths.child(DIRECT, 1, Class::Lock);
    near(
        "b's part",
        sum(&a, 1, |p| p.tid == 2 && p.path == a_waits),
        3.0,
    );
}

#[test]
fn unrecorded_wakers_unborn_threads_interrupts_and_open_waits_are_said_not_guessed() {
    let mut t = Build::new(40);
    t.thread(1, "w");
    t.thread(2, "late");
    t.t.threads.get_mut(&2).unwrap().start = ns(25.0);
    t.stack(1, &["wait", "main"]);
    // Woken by a thread the recording does not hold.
    t.off(1, 0.0, 10.0, 10.0, Class::Other, Waker::Thread(99), Some(1));
    // Woken by the disk's interrupt: not followed, never its thread.
    t.off(1, 10.0, 20.0, 20.0, Class::Io, DISK_IRQ, Some(1));
    // Woken by a thread created halfway through the wait.
    t.off(1, 20.0, 30.0, 30.0, Class::Lock, Waker::Thread(2), Some(1));
    t.cpu(2, 28.0, 1);
    // Still waiting when the recording ends.
    t.off(1, 30.0, -1.0, 40.0, Class::Lock, Waker::None, Some(1));
    let a = t.held();
    near("unrecorded", a.stats.unrecorded_points, 10.0);
    near("interrupts", a.stats.interrupt_points, 10.0);
    near("not alive", a.stats.not_alive_points, 5.0);
    near("open", a.stats.open_points, 10.0);
    near(
        "late thread on CPU",
        sum(&a, 1, |p| p.tid == 2 && p.end == End::Cpu),
        5.0,
    );
    // Nothing lands on the waiter itself or on the interrupted thread.
    assert!(a.parts.iter().all(|p| p.tid != 1), "{:?}", a.parts);
    let notes = a.stats.notes();
    assert_eq!(notes.len(), 5, "{notes:#?}");
    assert!(notes.iter().any(|n| n.contains("outside the recording")));
    assert!(notes.iter().any(|n| n.contains("before the recording")));
}

/// A waker whose recorded life ended before its wakeup (it woke the
/// waiter on its way out, after its exit was traced): the time past its
/// exit is said, never given to it or to another thread.
#[test]
fn the_time_after_a_wakers_exit_is_said_not_given_to_it() {
    let mut t = Build::new(40);
    t.thread(1, "w");
    t.thread(2, "gone");
    let gone = t.t.threads.get_mut(&2).unwrap();
    (gone.end, gone.exited) = (ns(25.0), true);
    t.stack(1, &["join", "main"]);
    t.off(1, 20.0, 30.0, 30.0, Class::Other, Waker::Thread(2), Some(1));
    t.cpu(2, 22.0, 1);
    let a = t.held();
    near(
        "before the exit",
        sum(&a, 1, |p| p.tid == 2 && p.end != End::NotAlive),
        5.0,
    );
    near("after it", a.stats.not_alive_points, 5.0);
    assert!(a.parts.iter().all(|p| p.tid == 2), "{:?}", a.parts);
    let notes = a.stats.notes();
    assert!(
        notes.iter().any(|n| n.contains("after it exited")),
        "{notes:#?}"
    );
}

#[test]
fn a_cycle_in_a_damaged_trace_is_cut_not_followed_forever() {
    let mut t = Build::new(10);
    t.thread(1, "a");
    t.thread(2, "b");
    t.stack(1, &["wait", "main"]);
    t.off(1, 0.0, 10.0, 10.0, Class::Lock, Waker::Thread(2), Some(1));
    t.off(2, 0.0, 10.0, 10.0, Class::Lock, Waker::Thread(1), Some(1));
    let a = t.held();
    near("cut", a.stats.cut_points, 20.0);
    near("sum", sum(&a, 1, |_| true), 10.0);
}

#[test]
fn short_critical_sections_are_named_by_samples_pooled_over_the_waits() {
    // 1000 waits of 0.4 ms on a holder on the CPU all along: one holder
    // sample in 2.5 waits lands inside one, 3 of 5 of them in `hash`.
    let mut t = Build::new(1000);
    t.thread(1, "w");
    t.thread(2, "h");
    t.stack(1, &["lock", "main"]);
    t.stack(2, &["hash", "main"]);
    t.stack(3, &["copy", "main"]);
    for k in 0..1000 {
        let c = f64::from(k);
        t.off(
            1,
            c,
            c + 0.4,
            c + 0.4,
            Class::Lock,
            Waker::Thread(2),
            Some(1),
        );
        // Whole-period waits are rare here; give each one point.
        t.t.samples.last_mut().unwrap().weight = 1;
        if k % 5 < 2 {
            let stack = if k % 5 == 0 { 3 } else { 2 };
            t.cpu(2, c + 0.3, stack);
        }
        t.cpu(2, c + 0.9, 3);
    }
    let a = t.held();
    near("sum", sum(&a, 1, |_| true), 1000.0);
    near("hash", sum(&a, 1, |p| p.stack == Some(2)), 500.0);
    near("copy", sum(&a, 1, |p| p.stack == Some(3)), 500.0);
}

/// A storm: `n` threads on a ring, each waiting for the one before it in
/// short turns, `rounds` times; a third of the waits end on the disk.
pub(crate) fn storm(n: u32, rounds: u32) -> Trace {
    let mut t = Build::new(u64::from(rounds) * 2 + 2);
    t.stack(1, &["recv", "worker"]);
    t.stack(2, &["send", "worker"]);
    for tid in 1..=n {
        t.thread(tid, "w");
    }
    let step = 2.0 / f64::from(n);
    for r in 0..rounds {
        for i in 0..n {
            let tid = i + 1;
            let c = f64::from(r) * 2.0 + f64::from(i) * step;
            let waker = if (r + i) % 3 == 0 {
                DISK_IRQ
            } else {
                Waker::Thread(if tid == 1 { n } else { tid - 1 })
            };
            let stack = (r % 7 == 0).then_some(1);
            t.off(
                tid,
                c + 0.3 * step,
                c + 2.0,
                c + 2.0 + 0.2 * step,
                Class::Other,
                waker,
                stack,
            );
            if r % 5 == 0 {
                t.cpu(tid, c + 0.2 * step, 2);
            }
        }
    }
    t.t
}

#[test]
#[ignore = "a measurement: prints the rate, run with --ignored --nocapture"]
fn rate_on_a_storm() {
    let trace = storm(200, 10_000);
    let t = std::time::Instant::now();
    let a = attribute(&trace, &|_| true, Scope::Held);
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{} scheduler events, {} waits followed, {} parts in {:.3} s: {:.2} M events/s",
        a.stats.events,
        a.stats.waits,
        a.parts.len(),
        secs,
        a.stats.events as f64 / secs / 1e6
    );
}

/// The rows of a thread, annotated.
fn rows_of(trace: &Trace, tid: u32) -> Vec<crate::profile::Row> {
    let mut p = crate::profile::profile(trace, &Default::default());
    annotate(trace, &mut p);
    let t = p.threads.into_iter().find(|t| t.tid == tid).unwrap();
    t.rows
}

/// (thread, via, class, site, samples) of a row's activities.
fn activities(r: &crate::profile::Row) -> Vec<(String, usize, Class, String, f64)> {
    r.while_held
        .as_ref()
        .unwrap()
        .activities
        .iter()
        .map(|a| {
            let site = a.site.clone().unwrap_or_default();
            (a.thread.clone(), a.via.len(), a.class, site, a.samples)
        })
        .collect()
}

#[test]
fn the_mutex_row_of_the_report_carries_what_the_holder_did() {
    let trace = io_in_lock(50).t;
    let rows = rows_of(&trace, WAITER);
    let r = rows
        .iter()
        .find(|r| r.tag == Tag::Blocked(Class::Lock))
        .unwrap();
    assert_eq!(&*r.symbol, "take → pthread_mutex_lock");
    let held = r.while_held.as_ref().unwrap();
    assert_eq!(held.samples, 500.0);
    let sync = "sync_under_lock → fdatasync".to_string();
    let write = "sync_under_lock → write".to_string();
    let k = "keeper:11".to_string();
    let got = activities(r);
    let want = [
        (k.clone(), 0, Class::Io, sync.clone(), 300.0),
        (k.clone(), 0, Class::Cpu, write, 150.0),
        (k, 0, Class::Sched, sync, 50.0),
    ];
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((&g.0, g.1, g.2, &g.3), (&w.0, w.1, w.2, &w.3));
        near(&g.3, g.4, w.4);
    }
    // JSON: per activity, with the interrupt that ended the disk wait.
    let json = serde_json::to_value(&**held).unwrap();
    let top = &json["activities"][0];
    assert_eq!(top["state"], "interrupt");
    assert_eq!(top["woken_by"], "irq:24");
    assert_eq!(top["class"], "io");
    // The keeper's own rows were woken by the disk: nothing to follow.
    let keeper = rows_of(&trace, KEEPER);
    assert!(keeper.iter().all(|r| r.while_held.is_none()));
}

#[test]
fn a_row_whose_waits_went_through_a_chain_names_the_thread_at_its_end() {
    let trace = chain().t;
    let rows = rows_of(&trace, 1);
    let got = activities(&rows[0]);
    assert_eq!(
        (&*got[0].0, got[0].1, got[0].2, &*got[0].3),
        ("c:3", 1, Class::Io, "read_block → pread64")
    );
    near("disk", got[0].4, 5.0);
    let held = rows[0].while_held.as_ref().unwrap();
    assert_eq!(held.activities[0].via[0].thread, "b:2");
    assert_eq!(held.activities[0].via[0].class, Class::Other);
    let b = rows_of(&trace, 2);
    let pipe = b
        .iter()
        .find(|r| r.tag == Tag::Blocked(Class::Other))
        .unwrap();
    let got = activities(pipe);
    assert_eq!((&*got[0].0, got[0].1, got[0].2), ("c:3", 0, Class::Io));
    near("b's wait on the disk", got[0].4, 5.0);
}

/// What the holders did inside the lock for thread `tid`: the facts of
/// the advice, shares rounded as the advice prints them (holdup-render's
/// advice tests word these facts).
fn advice_for(trace: &Trace, tid: u32) -> Option<(f64, f64, HolderDoing)> {
    let mut p = crate::profile::profile(trace, &Default::default());
    annotate(trace, &mut p);
    let i = inside_the_lock(p.threads.iter().find(|t| t.tid == tid).unwrap())?;
    Some((i.waiting_pct.round(), i.inside_pct.round(), i.doing))
}

#[test]
fn advice_names_the_io_inside_the_lock() {
    // 50% waiting for mutexes; the holder spends 60% of it in fdatasync.
    assert_eq!(
        advice_for(&io_in_lock(50).t, WAITER).unwrap(),
        (50.0, 60.0, HolderDoing::Io("fdatasync".into()))
    );
    // The keeper waits for the disk, not for a mutex: no such advice.
    assert_eq!(advice_for(&io_in_lock(50).t, KEEPER), None);
}

/// A waiter waits 10 ms per round for a holder that spends `runnable` ms
/// of it on the runqueue and the rest running `stack`.
fn holder_doing(runnable: f64, stack: &[&str]) -> Trace {
    let mut b = Build::new(200);
    b.thread(1, "w");
    b.thread(2, "h");
    b.stack(1, &["pthread_mutex_lock", "take"]);
    b.stack(2, stack);
    for k in 0..20 {
        let c = 10.0 * f64::from(k);
        b.off(
            1,
            c,
            c + 10.0,
            c + 10.0,
            Class::Lock,
            Waker::Thread(2),
            Some(1),
        );
        b.off(2, c, c, c + runnable, Class::Sched, Waker::None, Some(2));
        b.cpu(2, c + 9.5, 2);
    }
    b.t
}

#[test]
fn advice_gives_a_runnable_holder_a_core_and_moves_allocations_out() {
    let a = advice_for(&holder_doing(7.0, &["work", "hold"]), 1).unwrap();
    assert_eq!(a, (100.0, 70.0, HolderDoing::Runnable));
    let a = advice_for(&holder_doing(1.0, &["malloc", "hold"]), 1).unwrap();
    assert_eq!(a.1, 90.0);
    assert_eq!(a.2, HolderDoing::Allocating("malloc".into()));
}

#[test]
fn a_holders_wait_that_a_thread_outside_the_recording_ended_stays_the_holders() {
    // The keeper's disk waits are ended by the file system's journal
    // thread, which the recording does not hold.
    let mut b = io_in_lock(10);
    for s in &mut b.t.segments {
        if s.tid == KEEPER {
            s.waker = Waker::Thread(999);
        }
    }
    let a = attribute(&b.t, &|tid| tid == WAITER, Scope::Held);
    let io = sum(&a, WAITER, |p| {
        p.tid == KEEPER
            && p.end == End::Outside(Class::Io, Waker::Thread(999))
            && p.stack == Some(S_SYNC)
    });
    near("fdatasync [I]", io, 60.0);
    near("unrecorded", a.stats.unrecorded_points, 60.0);
    assert!(a.parts.iter().all(|p| p.tid == KEEPER));
}

#[test]
fn the_critical_path_of_a_thread_ends_its_waits_on_the_chain_behind_them() {
    let mut t = chain();
    t.t.end_ns = ns(12.0);
    t.cpu(1, 11.0, 1);
    t.cpu(1, 12.0, 1);
    let (paths, stats) = critical_paths(&t.t, &|tid| tid == 1);
    assert_eq!(paths.len(), 1);
    let a = &paths[0];
    assert_eq!(a.thread, "a:1");
    near("all of a's time", a.samples, 12.0);
    let top = &a.activities[0];
    assert_eq!((top.tid, top.class, top.state), (3, Class::Io, "interrupt"));
    assert_eq!(top.site.as_deref(), Some("read_block → pread64"));
    let via: Vec<(u32, Class)> = top.via.iter().map(|v| (v.tid, v.class)).collect();
    assert_eq!(via, vec![(1, Class::Lock), (2, Class::Other)]);
    near("disk", top.samples, 5.0);
    let own: f64 = a
        .activities
        .iter()
        .filter(|x| x.via.is_empty())
        .map(|x| x.samples)
        .sum();
    near("own", own, 2.0);
    // A's wait starts with the recording: it may have begun before.
    assert_eq!(stats.cut_by_start, 1);
    assert_eq!(stats.notes().len(), 1, "{:?}", stats.notes());

    let folded = critical_folded(&t.t, &|tid| tid == 1);
    let get = |line: &str| folded.iter().find(|(l, _)| l == line).map(|(_, n)| *n);
    assert_eq!(
        get("a;a_main;pthread_mutex_lock;[L] wait for b:2;[B] wait for c:3;c_main;read_block;pread64;[I] io wait"),
        Some(5),
        "{folded:#?}"
    );
    assert_eq!(
        get("a;a_main;pthread_mutex_lock;[L] wait for b:2;b_main;relay"),
        Some(2)
    );
    assert_eq!(
        get("a;a_main;pthread_mutex_lock"),
        Some(2),
        "a's own on-CPU time"
    );
    assert_eq!(folded.iter().map(|(_, n)| n).sum::<u64>(), 12);
}

/// A chain `depth` threads deep, `rounds` times: in every 10 ms, thread 1
/// waits for thread 2, which waits for thread 3, …, over intervals nested
/// inside each other, and the last runs on the CPU all along, sampled
/// every 0.5 ms; each waiting thread runs a little around its wait.
fn deep_chain(depth: u32, rounds: u32) -> Trace {
    let mut t = Build::new(10 * u64::from(rounds) + 10);
    t.stack(1, &["wait", "worker"]);
    t.stack(2, &["work", "worker"]);
    for tid in 1..=depth {
        t.thread(tid, "w");
    }
    for r in 0..rounds {
        let c = 10.0 * f64::from(r);
        for tid in 1..depth {
            let lead = 0.2 * f64::from(tid);
            t.cpu(tid, c + lead, 2);
            let woken = c + 9.0 - lead;
            t.off(
                tid,
                c + lead,
                woken,
                woken + 0.1,
                Class::Lock,
                Waker::Thread(tid + 1),
                Some(1),
            );
        }
        for k in 1..=20 {
            t.cpu(depth, c + 0.5 * f64::from(k), 2);
        }
    }
    t.t
}

/// The work of the attribution (intervals visited, pieces, elements looked
/// at by the searches) grows as the trace does: four times the rounds of a
/// deep chain cost four times the work, give or take the ends. A search
/// that scanned the time line, or a walk that started each wait at the
/// thread's first interval, would make it grow as the square.
#[test]
fn the_work_grows_linearly_with_the_trace() {
    const DEPTH: u32 = 12;
    let work = |rounds| {
        let trace = deep_chain(DEPTH, rounds);
        let a = attribute(&trace, &|_| true, Scope::Whole);
        // The chain is followed to its end: thread 1's waits end on the
        // last thread's CPU, through every thread between.
        let deepest = a
            .parts
            .iter()
            .filter(|p| p.waiter.tid == 1 && p.tid == DEPTH && p.end == End::Cpu)
            .map(|p| a.paths.hops(p.path).len())
            .max();
        assert_eq!(
            deepest,
            Some(DEPTH as usize - 1),
            "the chain is followed to its end"
        );
        (a.stats.work, trace.segments.len() + trace.samples.len())
    };
    let (small, small_events) = work(500);
    let (large, large_events) = work(2000);
    assert_eq!(large_events, 4 * small_events);
    let ratio = large as f64 / small as f64;
    assert!(
        (3.8..4.2).contains(&ratio),
        "4 times the trace cost {ratio:.2} times the work ({small} then {large})"
    );
}
