//! What a wait is for, by the frames on its stack: one table of rules for
//! the managed runtimes (the JVM, Go, libuv), whose locks, parks and idle
//! loops all end in the same futex and epoll calls, then the C library's
//! primitives. The runtime decides, not the glibc call underneath: a JVM
//! thread entering a monitor sleeps in `pthread_cond_timedwait` yet waits
//! for the monitor's holder.

use crate::stacks::Func;

/// What a lock wait ([L]) waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LockKind {
    /// A mutex (or rwlock, or kernel lock, or a runtime's monitor) held by
    /// another thread: contention.
    Mutex,
    /// A signal from another thread: a condition variable, a join, a
    /// barrier, a semaphore. Idle by design unless the signaller is late.
    Signal,
    /// A thread with nothing to do: a runtime's scheduler or event loop
    /// waiting for work, a sleep.
    Idle,
    /// CPython's global interpreter lock, held by the thread running
    /// Python: contention of its own kind, as every Python thread takes it.
    Gil,
}

impl LockKind {
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::Signal => "signal",
            LockKind::Idle => "idle",
            LockKind::Gil => "gil",
        }
    }

    /// Waits for a lock another thread holds: its waker is the holder.
    pub fn is_contention(self) -> bool {
        matches!(self, LockKind::Mutex | LockKind::Gil)
    }
}

/// One rule: a frame whose name contains every one of `words` means
/// `kind`, for the reason `why` (shown in advice).
#[derive(Debug, PartialEq, Eq)]
pub struct Rule {
    pub words: &'static [&'static str],
    pub kind: LockKind,
    pub why: &'static str,
}

const fn rule(words: &'static [&'static str], kind: LockKind, why: &'static str) -> Rule {
    Rule { words, kind, why }
}

use LockKind::{Gil, Idle, Mutex, Signal};

/// Runtime rules, by priority: the first rule that matches any frame of a
/// stack decides, wherever the frame is (a monitor enter parks through
/// the same `os::PlatformEvent::park` as a sleep, and a `java.util.concurrent`
/// lock through the same `LockSupport.park` as an idle pool thread, so the
/// outer frame must win over the inner one). Names are as the runtimes
/// spell them: HotSpot's C++, Java frames from a perf map
/// (`java.util.concurrent.locks.AbstractQueuedSynchronizer::acquire` or with
/// `.`), Go's `runtime.` functions, libuv's C, CPython's C and its Python
/// frames as the recorder names them (`Condition.wait (threading.py:324)`;
/// 3.10 has no qualified names: `wait (threading.py:302)`).
pub const RUNTIME_RULES: &[Rule] = &[
    // JVM: monitor enter (`synchronized`), also when `Object.wait` re-enters.
    rule(
        &["ObjectMonitor::EnterI"],
        Mutex,
        "a JVM thread entering a monitor another thread holds",
    ),
    rule(
        &["ObjectMonitor::ReenterI"],
        Mutex,
        "a JVM thread re-entering its monitor after Object.wait",
    ),
    rule(
        &["ObjectMonitor::enter"],
        Mutex,
        "a JVM thread entering a monitor another thread holds",
    ),
    // JVM: java.util.concurrent locks park under an AQS acquire; so do a
    // latch's await and a semaphore's acquire, which wait for a signal.
    rule(
        &["CountDownLatch", "await"],
        Signal,
        "a JVM thread waiting for a CountDownLatch to count down",
    ),
    rule(
        &["Semaphore", "acquire"],
        Signal,
        "a JVM thread waiting for a Semaphore's permit",
    ),
    rule(
        &["AbstractQueuedSynchronizer", "acquire"],
        Mutex,
        "a JVM thread taking a java.util.concurrent lock another thread holds",
    ),
    // The JIT compiles a lock's `lock()` long before the AQS code under
    // it, which stays interpreted (unnamed) while contention is rare: a
    // park under a lock's own frame is its acquisition (unlock never parks).
    rule(
        &["ReentrantLock"],
        Mutex,
        "a JVM thread taking a ReentrantLock another thread holds",
    ),
    rule(
        &["ReentrantReadWriteLock"],
        Mutex,
        "a JVM thread taking a read-write lock another thread holds",
    ),
    rule(
        &["ObjectMonitor::wait"],
        Signal,
        "a JVM thread in Object.wait, waiting for notify",
    ),
    rule(&["JavaThread::sleep"], Idle, "a JVM thread in Thread.sleep"),
    rule(
        &["ThreadPoolExecutor", "getTask"],
        Idle,
        "a JVM pool thread waiting for a task",
    ),
    rule(
        &["ForkJoinPool", "awaitWork"],
        Idle,
        "a JVM fork-join worker waiting for a task",
    ),
    rule(
        &["Parker::park"],
        Signal,
        "a JVM thread in LockSupport.park, waiting for unpark",
    ),
    // Go: the runtime's own locks are contention; an OS thread (M) parked
    // in the scheduler has no goroutine to run.
    rule(
        &["runtime.lock2"],
        Mutex,
        "a Go runtime lock another thread holds",
    ),
    rule(
        &["runtime.notesleep"],
        Idle,
        "a Go OS thread parked in the scheduler, with no goroutine to run",
    ),
    rule(
        &["runtime.notetsleep"],
        Idle,
        "a Go OS thread parked in the scheduler, with no goroutine to run",
    ),
    rule(
        &["runtime.stopm"],
        Idle,
        "a Go OS thread parked in the scheduler, with no goroutine to run",
    ),
    rule(
        &["runtime.findRunnable"],
        Idle,
        "a Go OS thread looking for a goroutine to run",
    ),
    rule(
        &["runtime.netpoll"],
        Idle,
        "a Go OS thread waiting in the network poller",
    ),
    rule(
        &["runtime.sysmon"],
        Idle,
        "the Go runtime's monitor thread between its rounds",
    ),
    rule(
        &["runtime.templateThread"],
        Idle,
        "the Go runtime's template thread",
    ),
    // libuv (Node): the event loop waiting in epoll for the next event.
    rule(
        &["uv__io_poll"],
        Idle,
        "a libuv event loop waiting for events",
    ),
    // CPython: a thread that takes the GIL back (after a blocking call, or
    // when the running thread was asked to drop it) waits for the GIL
    // whatever Python frames are above.
    rule(
        &["take_gil"],
        Gil,
        "a Python thread waiting for the GIL another thread holds",
    ),
    // A thread that dropped the GIL on request waits until another took it.
    rule(
        &["drop_gil"],
        Gil,
        "a Python thread handing the GIL over, until another takes it",
    ),
    // threading's waits all take a `_thread.lock` in the end (a join, an
    // Event, a Condition, a queue): the Python frame says what the lock
    // stands for. A Condition's own lock is a mutex, taken on `with cond:`
    // and again after the wait.
    rule(
        &["_acquire_restore (threading.py"],
        Mutex,
        "a Python thread re-taking a Condition's lock after its wait",
    ),
    rule(
        &["__enter__ (threading.py"],
        Mutex,
        "a Python thread entering a Condition whose lock another thread holds",
    ),
    rule(
        &["wait (threading.py"],
        Signal,
        "a Python thread in Condition.wait, Event.wait or Barrier.wait",
    ),
    rule(
        &["wait_for (threading.py"],
        Signal,
        "a Python thread in Condition.wait_for",
    ),
    rule(
        &["join (threading.py"],
        Signal,
        "a Python thread joining another",
    ),
    rule(
        &["_wait_for_tstate_lock (threading.py"],
        Signal,
        "a Python thread joining another",
    ),
    rule(
        &["_shutdown (threading.py"],
        Signal,
        "the Python main thread waiting for the other threads at exit",
    ),
    rule(
        &["acquire (threading.py"],
        Signal,
        "a Python thread waiting for a Semaphore's release",
    ),
    rule(
        &["(queue.py"],
        Signal,
        "a Python thread waiting for a queue.Queue's item or room",
    ),
    rule(
        &["_queue_SimpleQueue_get"],
        Signal,
        "a Python thread waiting for a queue.SimpleQueue's item",
    ),
    rule(
        &["(selectors.py"],
        Idle,
        "a Python selector (or asyncio's loop) waiting for events",
    ),
    // Anything else that takes a `_thread.lock` or RLock (`with lock:`,
    // `lock.acquire()`) from the program's own code is contention; the
    // exported function stands for both where the interpreter is stripped.
    rule(
        &["lock_PyThread_acquire_lock"],
        Mutex,
        "a Python thread taking a threading.Lock another thread holds",
    ),
    rule(
        &["rlock_acquire"],
        Mutex,
        "a Python thread taking a threading.RLock another thread holds",
    ),
    rule(
        &["PyThread_acquire_lock_timed"],
        Mutex,
        "a Python thread taking a lock another thread holds",
    ),
];

/// The C library's and the kernel's primitives, matched on lower-case
/// names; the innermost frame that names one decides: a condition
/// variable that re-takes its mutex after the signal
/// (`__pthread_mutex_cond_lock → __lll_lock_wait`) waits for the mutex.
/// Mutex words are tried first in a frame, as `__pthread_mutex_cond_lock`
/// would also match "cond".
pub const PRIMITIVE_RULES: &[Rule] = &[
    rule(&["lll_lock"], Mutex, "a mutex another thread holds"),
    rule(&["mutex_lock"], Mutex, "a mutex another thread holds"),
    rule(&["mutex_cond_lock"], Mutex, "a mutex another thread holds"),
    rule(&["mutex_timedlock"], Mutex, "a mutex another thread holds"),
    rule(&["mutex::lock"], Mutex, "a mutex another thread holds"),
    rule(
        &["rwlock"],
        Mutex,
        "a reader-writer lock another thread holds",
    ),
    rule(&["spin_lock"], Mutex, "a spin lock another thread holds"),
    rule(&["cond_wait"], Signal, "a condition variable"),
    rule(&["cond_timedwait"], Signal, "a condition variable"),
    rule(&["cond_clockwait"], Signal, "a condition variable"),
    rule(&["condition_variable"], Signal, "a condition variable"),
    rule(&["condvar"], Signal, "a condition variable"),
    rule(&["pthread_join"], Signal, "a join"),
    rule(&["clockjoin"], Signal, "a join"),
    rule(&["timedjoin"], Signal, "a join"),
    rule(&["thread::join"], Signal, "a join"),
    rule(&["barrier"], Signal, "a barrier"),
    rule(&["sem_wait"], Signal, "a semaphore"),
    rule(&["sem_timedwait"], Signal, "a semaphore"),
    rule(&["sem_clockwait"], Signal, "a semaphore"),
];

fn matches(rule: &Rule, name: &str) -> bool {
    rule.words.iter().all(|w| name.contains(w))
}

/// The rule that says what a blocked stack (leaf first) waits for, if any.
pub fn rule_for(funcs: &[Func]) -> Option<&'static Rule> {
    let runtime = RUNTIME_RULES
        .iter()
        .find(|r| funcs.iter().any(|f| matches(r, &f.name)));
    runtime.or_else(|| {
        funcs.iter().find_map(|f| {
            let name = f.name.to_ascii_lowercase();
            PRIMITIVE_RULES.iter().find(|r| matches(r, &name))
        })
    })
}

/// Classify a lock wait by its stack (leaf first), with [`rule_for`].
/// Futex waits whose stack names no primitive (a raw `syscall(SYS_futex)`)
/// stay mutexes: the conservative reading of `lock`.
pub fn lock_kind(funcs: &[Func]) -> LockKind {
    rule_for(funcs).map_or(Mutex, |r| r.kind)
}

/// Why a blocked stack is idle (a runtime waiting for work, a sleep), or
/// `None` when it is not known to be.
pub fn idle_why(funcs: &[Func]) -> Option<&'static str> {
    rule_for(funcs).filter(|r| r.kind == Idle).map(|r| r.why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::tests::{stack, K, LIBC};

    const JVM: &str = "libjvm.so";
    const JIT: &str = "[jit]";

    /// The futex wait under a JVM park, then the given frames, outermost last.
    fn jvm_park(outer: &[(&'static str, &'static str)]) -> Vec<Func> {
        let mut f = vec![
            (K, "futex_do_wait"),
            (LIBC, "__futex_abstimed_wait_common"),
            (LIBC, "___pthread_cond_timedwait64"),
        ];
        f.extend_from_slice(outer);
        stack(&f)
    }

    fn go_futex(outer: &[(&'static str, &'static str)]) -> Vec<Func> {
        let mut f = vec![
            (K, "futex_do_wait"),
            ("prog", "runtime.futex"),
            ("prog", "runtime.futexsleep"),
        ];
        f.extend_from_slice(outer);
        stack(&f)
    }

    #[test]
    fn a_jvm_monitor_enter_is_contention_though_it_parks_on_a_condition_variable() {
        for enter in [
            "ObjectMonitor::EnterI(JavaThread*)",
            "ObjectMonitor::enter(JavaThread*)",
        ] {
            let s = jvm_park(&[
                (JVM, "os::PlatformEvent::park(long)"),
                (JVM, enter),
                (
                    JVM,
                    "ObjectSynchronizer::enter(Handle, BasicLock*, JavaThread*)",
                ),
                (JIT, "Monitor::lambda$main$1"),
            ]);
            assert_eq!(lock_kind(&s), Mutex, "{enter}");
        }
    }

    #[test]
    fn object_wait_is_a_signal_until_it_reenters_its_monitor() {
        let waiting = jvm_park(&[
            (JVM, "os::PlatformEvent::park(long)"),
            (JVM, "ObjectMonitor::wait(long, bool, JavaThread*)"),
            (JVM, "JVM_MonitorWait"),
        ]);
        assert_eq!(lock_kind(&waiting), Signal);
        let reentering = jvm_park(&[
            (JVM, "os::PlatformEvent::park()"),
            (JVM, "ObjectMonitor::ReenterI(JavaThread*, ObjectWaiter*)"),
            (JVM, "ObjectMonitor::wait(long, bool, JavaThread*)"),
            (JVM, "JVM_MonitorWait"),
        ]);
        assert_eq!(lock_kind(&reentering), Mutex);
    }

    #[test]
    fn a_juc_lock_acquire_is_contention_and_a_bare_park_a_signal() {
        let park = [
            (JVM, "Parker::park(bool, long)"),
            (JVM, "Unsafe_Park"),
            (JIT, "jdk.internal.misc.Unsafe::park"),
            (JIT, "java.util.concurrent.locks.LockSupport::park"),
        ];
        let mut acquire = park.to_vec();
        acquire.push((
            JIT,
            "java.util.concurrent.locks.AbstractQueuedSynchronizer::acquire",
        ));
        acquire.push((JIT, "java.util.concurrent.locks.ReentrantLock::lock"));
        assert_eq!(lock_kind(&jvm_park(&acquire)), Mutex);
        assert_eq!(lock_kind(&jvm_park(&park)), Signal);
        // The AQS frames interpreted, the lock's compiled: as HotSpot's
        // perf map names it.
        for lock in [
            "void java.util.concurrent.locks.ReentrantLock.lock()",
            "void java.util.concurrent.locks.ReentrantLock.lockInterruptibly()",
            "void java.util.concurrent.locks.ReentrantReadWriteLock$WriteLock.lock()",
        ] {
            let mut interpreted = park.to_vec();
            interpreted.extend([(JIT, "Interpreter"), (JIT, lock)]);
            assert_eq!(lock_kind(&jvm_park(&interpreted)), Mutex, "{lock}");
        }
        // A condition's await is a signal; re-taking the lock after it is not.
        let mut await_ = park.to_vec();
        await_.push((
            JIT,
            "java.util.concurrent.locks.AbstractQueuedSynchronizer$ConditionObject::await",
        ));
        assert_eq!(lock_kind(&jvm_park(&await_)), Signal);
    }

    #[test]
    fn a_latch_or_a_semaphore_is_a_signal_though_it_parks_under_an_aqs_acquire() {
        // Named as HotSpot's perf map names compiled methods.
        let under = |outer: &'static str, acquire: &'static str| {
            jvm_park(&[
                (JVM, "Parker::park(bool, long)"),
                (JVM, "Unsafe_Park"),
                (JIT, acquire),
                (JIT, outer),
            ])
        };
        let shared =
            "void java.util.concurrent.locks.AbstractQueuedSynchronizer.acquireSharedInterruptibly(int)";
        for outer in [
            "void java.util.concurrent.CountDownLatch.await()",
            "void java.util.concurrent.Semaphore.acquire()",
        ] {
            assert_eq!(lock_kind(&under(outer, shared)), Signal, "{outer}");
        }
        // A read lock is a lock.
        let read_lock = "void java.util.concurrent.locks.ReentrantReadWriteLock$ReadLock.lock()";
        let acquire_shared =
            "void java.util.concurrent.locks.AbstractQueuedSynchronizer.acquireShared(int)";
        assert_eq!(lock_kind(&under(read_lock, acquire_shared)), Mutex);
    }

    #[test]
    fn jvm_sleeps_and_idle_pool_threads_are_idle() {
        let sleep = jvm_park(&[
            (JVM, "os::PlatformEvent::park(long)"),
            (JVM, "JavaThread::sleep(long)"),
            (JVM, "JVM_Sleep"),
        ]);
        assert_eq!(lock_kind(&sleep), Idle);
        assert_eq!(idle_why(&sleep), Some("a JVM thread in Thread.sleep"));
        for pool in [
            "java.util.concurrent.ThreadPoolExecutor::getTask",
            "java.util.concurrent.ForkJoinPool.awaitWork",
        ] {
            let s = jvm_park(&[
                (JVM, "Parker::park(bool, long)"),
                (JIT, "java.util.concurrent.locks.LockSupport::park"),
                (JIT, pool),
            ]);
            assert_eq!(lock_kind(&s), Idle, "{pool}");
        }
    }

    #[test]
    fn go_threads_parked_in_the_scheduler_are_idle() {
        for outer in [
            &[("prog", "runtime.notesleep"), ("prog", "runtime.mPark")][..],
            &[
                ("prog", "runtime.notetsleep_internal"),
                ("prog", "runtime.notetsleep"),
                ("prog", "runtime.sysmon"),
            ],
            &[("prog", "runtime.stopm"), ("prog", "runtime.schedule")],
            &[
                ("prog", "runtime.findRunnable"),
                ("prog", "runtime.schedule"),
            ],
            &[
                ("prog", "runtime.netpoll"),
                ("prog", "runtime.findRunnable"),
            ],
            &[
                ("prog", "runtime.templateThread"),
                ("prog", "runtime.mstart1"),
            ],
        ] {
            let s = go_futex(outer);
            assert_eq!(lock_kind(&s), Idle, "{outer:?}");
            assert!(
                idle_why(&s).unwrap().starts_with("a Go")
                    || idle_why(&s).unwrap().starts_with("the Go")
            );
        }
    }

    #[test]
    fn a_go_runtime_lock_is_contention_even_in_the_scheduler() {
        let s = go_futex(&[
            ("prog", "runtime.lock2"),
            ("prog", "runtime.lockWithRank"),
            ("prog", "runtime.findRunnable"),
        ]);
        assert_eq!(lock_kind(&s), Mutex);
        assert_eq!(idle_why(&s), None);
    }

    #[test]
    fn a_libuv_event_loop_in_epoll_is_idle() {
        let s = stack(&[
            (K, "ep_poll"),
            (K, "do_epoll_wait"),
            (LIBC, "epoll_wait"),
            ("node", "uv__io_poll"),
            ("node", "uv_run"),
            ("node", "node::SpinEventLoop(node::Environment*)"),
        ]);
        assert_eq!(idle_why(&s), Some("a libuv event loop waiting for events"));
    }

    const PY: &str = "[python]";
    const LIBPY: &str = "libpython3.12.so.1.0";

    /// A `_thread.lock` acquisition (CPython 3.12's native frames) under
    /// the given Python frames, innermost first.
    fn py_lock_wait(python: &[&'static str]) -> Vec<Func> {
        let mut f = vec![
            (K, "futex_do_wait"),
            (LIBC, "__futex_abstimed_wait_common"),
            (LIBC, "__new_sem_wait_slow64"),
            (LIBPY, "PyThread_acquire_lock_timed"),
            (LIBPY, "acquire_timed"),
            (LIBPY, "lock_PyThread_acquire_lock"),
        ];
        f.extend(python.iter().map(|&p| (PY, p)));
        f.push((LIBPY, "thread_run"));
        stack(&f)
    }

    #[test]
    fn a_python_lock_taken_in_the_programs_code_is_contention() {
        let with_lock =
            py_lock_wait(&["contender (locks.py:21)", "Thread.run (threading.py:1010)"]);
        assert_eq!(lock_kind(&with_lock), Mutex);
        // 3.10 names functions without their class.
        let v310 = py_lock_wait(&["contender (locks.py:21)", "run (threading.py:946)"]);
        assert_eq!(lock_kind(&v310), Mutex);
        let mut rlock = py_lock_wait(&["contender (locks.py:21)"]);
        rlock[5].name = "rlock_acquire".into();
        assert_eq!(lock_kind(&rlock), Mutex);
    }

    #[test]
    fn python_joins_events_conditions_and_queues_are_signals() {
        for python in [
            // 3.10 to 3.12
            &[
                "Thread._wait_for_tstate_lock (threading.py:1119)",
                "Thread.join (threading.py:1096)",
                "main (app.py:30)",
            ][..],
            &[
                "_wait_for_tstate_lock (threading.py:1081)",
                "join (threading.py:1060)",
            ],
            &[
                "Condition.wait (threading.py:327)",
                "Event.wait (threading.py:629)",
            ],
            &["wait (threading.py:320)", "wait (threading.py:607)"],
            &[
                "Condition.wait (threading.py:331)",
                "Queue.get (queue.py:171)",
            ],
            &[
                "Barrier._wait (threading.py:728)",
                "Barrier.wait (threading.py:701)",
            ],
            &["Semaphore.acquire (threading.py:475)"],
            &["_shutdown (threading.py:1583)"],
        ] {
            assert_eq!(lock_kind(&py_lock_wait(python)), Signal, "{python:?}");
        }
        // 3.13 joins through the parking lot, not a lock.
        let join = stack(&[
            (K, "futex_do_wait"),
            (LIBC, "__new_sem_wait_slow64"),
            (LIBPY, "_PySemaphore_PlatformWait"),
            (LIBPY, "_PyParkingLot_Park"),
            (LIBPY, "PyEvent_WaitTimed"),
            (LIBPY, "ThreadHandle_join"),
            (PY, "Thread.join (threading.py:1092)"),
            (PY, "main (app.py:30)"),
        ]);
        assert_eq!(lock_kind(&join), Signal);
    }

    #[test]
    fn a_conditions_own_lock_is_contention() {
        // `with cond:` inside Queue.get, and re-taking it after the wait.
        let enter = py_lock_wait(&[
            "Condition.__enter__ (threading.py:287)",
            "Queue.get (queue.py:154)",
        ]);
        assert_eq!(lock_kind(&enter), Mutex);
        let restore = py_lock_wait(&[
            "Condition._acquire_restore (threading.py:300)",
            "Condition.wait (threading.py:331)",
        ]);
        assert_eq!(lock_kind(&restore), Mutex);
    }

    #[test]
    fn python_selectors_are_idle_and_the_gil_is_its_own_kind() {
        let select = stack(&[
            (K, "ep_poll"),
            (LIBC, "epoll_wait"),
            (LIBPY, "select_epoll_poll_impl"),
            (PY, "EpollSelector.select (selectors.py:468)"),
            (PY, "BaseEventLoop._run_once (base_events.py:1949)"),
        ]);
        assert_eq!(
            idle_why(&select),
            Some("a Python selector (or asyncio's loop) waiting for events")
        );
        // Taking the GIL back after a join's wait: the GIL, not the join.
        let gil = stack(&[
            (K, "futex_do_wait"),
            (LIBC, "___pthread_cond_timedwait64"),
            (LIBPY, "take_gil"),
            (LIBPY, "PyEval_RestoreThread"),
            (LIBPY, "lock_PyThread_acquire_lock"),
            (PY, "Thread._wait_for_tstate_lock (threading.py:1119)"),
        ]);
        assert_eq!(lock_kind(&gil), Gil);
        assert!(Gil.is_contention() && Mutex.is_contention() && !Signal.is_contention());
    }

    #[test]
    fn every_rule_is_reachable_by_a_frame_that_names_only_it() {
        // No rule is shadowed by an earlier one that matches the same name.
        for (table, fold) in [(RUNTIME_RULES, false), (PRIMITIVE_RULES, true)] {
            for r in table {
                let name = r.words.join("::");
                let name = if fold {
                    name.to_ascii_lowercase()
                } else {
                    name
                };
                let first = table.iter().find(|q| matches(q, &name)).unwrap();
                assert_eq!(first.kind, r.kind, "{name} is decided by {first:?}");
            }
        }
    }
}
