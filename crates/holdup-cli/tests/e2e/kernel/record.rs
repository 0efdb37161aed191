//! `holdup record` + `report` on workloads whose answer is known by
//! construction, on the real kernel. Needs root and BPF.

use crate::support::*;
use serde_json::Value;

fn total(samples: &Value) -> f64 {
    ["cpu", "io", "lock", "sched", "other"]
        .iter()
        .map(|c| samples[c].as_f64().unwrap())
        .sum()
}

fn share(t: &Value, class: &str) -> f64 {
    t["samples"][class].as_f64().unwrap() / total(&t["samples"])
}

/// The function entry named `name` (or containing it) in a thread.
fn function<'a>(t: &'a Value, name: &str) -> &'a Value {
    t["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["symbol"].as_str().unwrap() == name)
        .unwrap_or_else(|| panic!("no function {name} in thread {}", t["tid"]))
}

fn functions_matching(t: &Value, pred: impl Fn(&str) -> bool) -> Vec<&Value> {
    t["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| pred(f["symbol"].as_str().unwrap()))
        .collect()
}

/// Threads that ran a function anywhere on their stacks.
fn threads_with<'a>(r: &'a Value, func: &str) -> Vec<&'a Value> {
    threads(r)
        .iter()
        .filter(|t| {
            t["functions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["symbol"] == func)
        })
        .collect()
}

/// The numbers of the `record -v` line (in `stderr`) that contains `marker`.
fn numbers_on(stderr: &str, marker: &str) -> Vec<u64> {
    stderr
        .lines()
        .find(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("record -v prints a line with {marker:?}"))
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// Every thread that lived long enough is covered: (on + blocked) samples ×
/// period ≈ lifetime (the issue asks for 10%; each thread's two sampling
/// clocks make it exact but for the last period, so 3% is asserted).
fn assert_coverage(r: &Value) {
    let period = r["period_ns"].as_f64().unwrap();
    for t in threads(r) {
        let life = t["lifetime_ns"].as_f64().unwrap();
        if life < 100e6 {
            continue;
        }
        let covered = total(&t["samples"]) * period;
        let ratio = covered / life;
        assert!(
            (0.97..=1.03).contains(&ratio),
            "thread {} ({}) covered {:.3} s of its {:.3} s lifetime (ratio {ratio:.3})",
            t["tid"],
            t["comm"],
            covered / 1e9,
            life / 1e9
        );
    }
}

#[test]
#[ignore = "needs root and BPF"]
fn a_thread_sleeping_half_the_time_is_half_blocked() {
    let _serial = serial();
    let dir = scratch("half_sleeper");
    let bin = workload("half_sleeper");
    let data = record(&dir, &[], &[bin.to_str().unwrap(), "60"]);
    let r = report(&data);
    let worker = threads_with(&r, "half_sleeper");
    assert_eq!(worker.len(), 1, "one thread runs half_sleeper");
    let t = worker[0];
    // By construction: 60 × 10 ms of thread CPU time and 60 sleeps of 10 ms
    // (plus timer slack). Waiting for a core, if the machine is busy, is
    // runqueue time and must not leak into either.
    let secs = |class: &str| {
        t["samples"][class].as_f64().unwrap() * r["period_ns"].as_f64().unwrap() / 1e9
    };
    assert_near("cpu seconds", secs("cpu"), 0.600, 0.06);
    assert_near("sleep seconds", secs("other"), 0.620, 0.07);
    assert!(share(t, "io") + share(t, "lock") < 0.01);
    // The sleep is attributed to the caller of the libc wrapper.
    let f = function(t, "half_sleeper");
    let thread_total = total(&t["samples"]);
    assert!(
        total(&f["total"]) >= 0.95 * thread_total,
        "half_sleeper covers the thread"
    );
    assert!(
        f["total"]["other"].as_f64().unwrap() >= 0.95 * t["samples"]["other"].as_f64().unwrap()
    );
    assert_eq!(
        f["file"].as_str().map(|p| p.ends_with("half_sleeper.c")),
        Some(true)
    );
    assert_coverage(&r);
}

#[test]
#[ignore = "needs root and BPF"]
fn o_direct_reads_are_io_under_the_calling_function() {
    let _serial = serial();
    let dir = scratch("direct_reads");
    let bin = workload("direct_reads");
    let file = dir.join("data.bin");
    let data = record(
        &dir,
        &[],
        &[
            bin.to_str().unwrap(),
            file.to_str().unwrap(),
            "64",
            "300",
            "1024",
        ],
    );
    let r = report(&data);
    let readers = threads_with(&r, "do_reads");
    assert_eq!(readers.len(), 1);
    let t = readers[0];
    let io = t["samples"]["io"].as_f64().unwrap();
    // 1 MiB reads: 65-80% on a virtual disk whose file sits in the host's
    // cache, ~10% CPU cost of each request. The rest is [S]: waiting for a
    // core on a busy machine, or steal time when the host serves the
    // request on the virtual CPU's own time. Never [I] for either.
    assert!(share(t, "io") >= 0.45, "io share {:.2}", share(t, "io"));
    assert!(
        share(t, "io") + share(t, "sched") >= 0.75,
        "off-CPU share {:.2}",
        share(t, "io") + share(t, "sched")
    );
    assert!(
        share(t, "lock") + share(t, "other") < 0.02,
        "nothing but cpu, io and runqueue"
    );
    let f = function(t, "do_reads");
    assert!(
        f["total"]["io"].as_f64().unwrap() >= 0.95 * io,
        "io under do_reads: {f}"
    );
    // The wait is the pread wrapper's own (innermost user frame).
    let pread_io: f64 = functions_matching(t, |s| s.contains("pread"))
        .iter()
        .map(|f| f["self"]["io"].as_f64().unwrap())
        .sum();
    assert!(pread_io >= 0.9 * io, "pread self io {pread_io} of {io}");
    // The [I] row names the site: the caller and the libc call it made.
    let site = t["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["class"] == "io")
        .expect("an io site");
    assert!(
        site["site"]
            .as_str()
            .unwrap()
            .ends_with("do_reads → pread64"),
        "{site}"
    );
    assert!(site["samples"].as_f64().unwrap() >= 0.9 * io, "{site}");
    assert_coverage(&r);
}

/// fdatasync works on a CPU in short bursts between its two waits (for the
/// write, for the flush). That CPU time is the call's: sampled where a
/// burst ends, not at the next tick that finds the thread running (mostly
/// in the loop it computes in between, which got 40% of the calls' CPU
/// time that way, and the calls 92% of their time in all).
#[test]
#[ignore = "needs root and BPF"]
fn the_cpu_time_of_a_system_call_between_its_waits_is_the_calls() {
    let _serial = serial();
    with_second_try(the_cpu_time_of_a_system_call_between_its_waits_once);
}

fn the_cpu_time_of_a_system_call_between_its_waits_once() {
    let dir = scratch("sync_bursts");
    let bin = workload("causal_fsync");
    // Two threads, each 1500 times: under a mutex, 4 × (pwrite +
    // fdatasync); outside it, 0.3 ms of computing.
    let (data, out) = record_with_output(
        &dir,
        &[],
        &[
            bin.to_str().unwrap(),
            dir.to_str().unwrap(),
            "1500",
            "4",
            "0.3",
        ],
    );
    let visits = 3000.0;
    let printed = printed_fields(&out);
    let sync_s = field(&printed, "sync_ns") * visits / 1e9;
    let sync_cpu_s = field(&printed, "sync_cpu_ns") * visits / 1e9;
    let r = report(&data);
    let period_s = r["period_ns"].as_f64().unwrap() / 1e9;
    let workers = threads_with(&r, "log_record");
    assert_eq!(workers.len(), 2, "both workers log");
    let (mut all, mut cpu) = (0.0, 0.0);
    for t in workers {
        let f = function(t, "log_record");
        all += total(&f["total"]) * period_s;
        cpu += f["total"]["cpu"].as_f64().unwrap() * period_s;
    }
    eprintln!(
        "log_record: {all:.3} s ({:.3} of its clock), on a CPU {cpu:.3} s ({:.3} of its CPU clock)",
        all / sync_s,
        cpu / sync_cpu_s
    );
    // Measured 0.99-1.07 of the workload's clock and 0.83-1.07 of its CPU
    // time over 22 runs (11 with CPU hogs beside it), 0.73 of the CPU time
    // once in a whole suite (its other tests' processes preempting the
    // workload: the part of a burst before its wait, in a run longer than
    // 25 µs, is left to the ticks); without the burst sampling 0.92 and
    // 0.60, with ticks also charging the bursts up to 1.12 and 1.38, with no
    // tick in any run's first 25 µs taking points 0.955-1.04 here and 0.935
    // in one run elsewhere.
    assert_near("seconds in log_record", all, sync_s, 0.08 * sync_s);
    assert!(
        (0.75 * sync_cpu_s..=1.15 * sync_cpu_s).contains(&cpu),
        "log_record on a CPU for {cpu:.3} s, {sync_cpu_s:.3} s by the thread's own clock"
    );
    assert_coverage(&r);
}

#[test]
#[ignore = "needs root and BPF"]
fn threads_serialized_on_one_mutex_wait_on_the_lock_under_the_caller() {
    let _serial = serial();
    let dir = scratch("mutex_fight");
    let bin = workload("mutex_fight");
    let data = record(&dir, &[], &[bin.to_str().unwrap(), "4", "60"]);
    let r = report(&data);
    let workers = threads_with(&r, "worker");
    assert_eq!(workers.len(), 4);
    let period_s = r["period_ns"].as_f64().unwrap() / 1e9;
    let mut lock_total = 0.0;
    let mut life_total = 0.0;
    for t in &workers {
        // By construction each thread burns 60 × 2.5 ms of CPU.
        let cpu_s = t["samples"]["cpu"].as_f64().unwrap() * period_s;
        assert_near("cpu seconds per worker", cpu_s, 0.150, 0.03);
        // Everything else is waiting for the lock (or for a core).
        assert_near(
            "lock + cpu + sched",
            share(t, "lock") + share(t, "cpu") + share(t, "sched"),
            1.0,
            0.03,
        );
        assert!(
            share(t, "lock") >= 0.35,
            "lock share {:.2}",
            share(t, "lock")
        );
        let lock = t["samples"]["lock"].as_f64().unwrap();
        let f = function(t, "worker");
        assert!(f["total"]["lock"].as_f64().unwrap() >= 0.95 * lock);
        assert_eq!(
            f["self"]["lock"].as_f64().unwrap(),
            0.0,
            "the wait belongs to the libc frames below worker"
        );
        lock_total += lock;
        life_total += total(&t["samples"]);
    }
    // Serialized: while one of four holds the lock, the others wait.
    assert!(
        lock_total / life_total >= 0.5,
        "pooled lock share {:.2}",
        lock_total / life_total
    );
    assert_coverage(&r);
}

#[test]
#[ignore = "needs root and BPF"]
fn more_spinning_threads_than_cores_wait_in_the_runqueue() {
    let _serial = serial();
    let dir = scratch("spinners");
    let bin = workload("spinners");
    let data = record(&dir, &[], &[bin.to_str().unwrap(), "4", "0.25"]);
    let r = report(&data);
    let spinners = threads_with(&r, "spin");
    assert_eq!(spinners.len(), 4);
    let period_s = r["period_ns"].as_f64().unwrap() / 1e9;
    for t in &spinners {
        // Each spins 0.25 s of its own CPU time; the rest of its life it is
        // runnable, waiting for the one core.
        assert_near(
            "cpu seconds",
            t["samples"]["cpu"].as_f64().unwrap() * period_s,
            0.25,
            0.03,
        );
        assert_near(
            "cpu + sched",
            share(t, "cpu") + share(t, "sched"),
            1.0,
            0.05,
        );
    }
    // 1 − cores/threads on an idle machine; more if something else runs there.
    let mean: f64 = spinners.iter().map(|t| share(t, "sched")).sum::<f64>() / 4.0;
    assert!(
        (0.68..0.92).contains(&mean),
        "mean sched share {mean:.3}, expected about 0.75"
    );
    assert_coverage(&r);
}

#[test]
#[ignore = "needs root and BPF"]
fn forked_children_and_exec_are_followed() {
    let _serial = serial();
    let dir = scratch("forker");
    let forker = workload("forker");
    let sleeper = workload("half_sleeper");
    let data = record(
        &dir,
        &[],
        &[forker.to_str().unwrap(), sleeper.to_str().unwrap(), "10"],
    );
    let r = report(&data);
    let child = threads_with(&r, "child_work");
    assert_eq!(child.len(), 1, "the forked child's work is recorded");
    let child_pid = child[0]["pid"].as_u64().unwrap();
    let execd = threads_with(&r, "half_sleeper");
    assert_eq!(execd.len(), 1, "the exec'd program is recorded");
    assert_eq!(
        execd[0]["pid"].as_u64().unwrap(),
        child_pid,
        "exec keeps the pid"
    );
    let parent_pids: Vec<u64> = threads(&r)
        .iter()
        .map(|t| t["pid"].as_u64().unwrap())
        .collect();
    assert!(
        parent_pids.iter().any(|&p| p != child_pid),
        "the parent is there too"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn symbols_resolve_after_the_target_is_gone() {
    let _serial = serial();
    let dir = scratch("gone");
    let bin = dir.join("short_lived");
    std::fs::copy(workload_with("half_sleeper", &["-gdwarf-4"]), &bin).unwrap();
    let data = record(&dir, &[], &[bin.to_str().unwrap(), "10"]);
    std::fs::remove_file(&bin).unwrap();
    let r = report(&data);
    let t = threads_with(&r, "half_sleeper");
    assert_eq!(t.len(), 1);
    let f = function(t[0], "half_sleeper");
    assert!(f["file"].as_str().unwrap().ends_with("half_sleeper.c"));
    assert!(f["line"].as_u64().unwrap() > 0, "DWARF 4 line info: {f}");
}

/// A thread without rseq gets no rseq_update on its way back to user space:
/// on a kernel with BPF task work (6.18+) a work queued at its switch-in
/// takes its stack, and the system-wide sys_exit fallback (which costs
/// every system call on the machine) stays detached; before that kernel,
/// the fallback takes it.
#[test]
#[ignore = "needs root and BPF"]
fn threads_without_rseq_still_get_the_stack_they_blocked_with() {
    let _serial = serial();
    let dir = scratch("no_rseq");
    let bin = workload("half_sleeper");
    let data = dir.join("holdup.data");
    let out = run_ok(&[
        "record",
        "-v",
        "-o",
        data.to_str().unwrap(),
        "--",
        "env",
        "GLIBC_TUNABLES=glibc.pthread.rseq=0",
        bin.to_str().unwrap(),
        "40",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let task_work = std::fs::read("/sys/kernel/btf/vmlinux")
        .is_ok_and(|btf| contains(&btf, b"bpf_task_work_schedule_resume_impl"));
    let r = report(&data);
    let t = threads_with(&r, "half_sleeper")[0];
    let other = t["samples"]["other"].as_f64().unwrap();
    // The sleep is seen under usleep, not under whatever ran next.
    let under_usleep = function(t, "usleep")["total"]["other"].as_f64().unwrap();
    if task_work {
        assert!(
            stderr.contains("sys_exit fallback not needed"),
            "task work serves threads without rseq: {stderr}"
        );
        let taken: u64 = stderr
            .lines()
            .find_map(|l| {
                l.rsplit("; ")
                    .next()?
                    .strip_suffix(" user stacks of threads without rseq taken by task work")?
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("no task-work count in: {stderr}"));
        assert!(
            taken >= 30,
            "{taken} stacks taken by task work of 40 sleeps"
        );
        assert!(
            under_usleep >= 0.95 * other,
            "{under_usleep} of {other} under usleep"
        );
    } else {
        // Only the first few, before the fallback is attached, may be late.
        assert!(
            under_usleep >= 0.85 * other,
            "{under_usleep} of {other} under usleep"
        );
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
#[ignore = "needs root and BPF"]
fn waits_for_kernel_locks_are_lock_waits() {
    let _serial = serial();
    let dir = scratch("kernel_lock");
    let bin = workload("kernel_lock");
    let file = dir.join("shared.log");
    // Four threads write to one file descriptor: they queue on its
    // position mutex (and the inode's rw-semaphore) inside write(2).
    let data = record(
        &dir,
        &[],
        &[bin.to_str().unwrap(), file.to_str().unwrap(), "4", "1500"],
    );
    let r = report(&data);
    let writers = threads_with(&r, "append_records");
    assert_eq!(writers.len(), 4);
    let lock: f64 = writers
        .iter()
        .map(|t| t["samples"]["lock"].as_f64().unwrap())
        .sum();
    let all: f64 = writers.iter().map(|t| total(&t["samples"])).sum();
    assert!(
        lock / all >= 0.05,
        "kernel lock waits are [L]: {lock} of {all}"
    );
    let in_write: f64 = writers
        .iter()
        .flat_map(|t| functions_matching(t, |s| s.contains("write")))
        .map(|f| f["self"]["lock"].as_f64().unwrap())
        .sum();
    assert!(
        in_write >= 0.9 * lock,
        "the waits are inside write(2): {in_write} of {lock}"
    );
}

/// A context-switch storm: 400 processes on 2 CPUs. The recorder keeps up
/// (nothing lost, nothing garbled: a sample built in task context must not
/// be overwritten by an on-CPU sample interrupting it) and every process is
/// still covered for its whole life.
#[test]
#[ignore = "needs root and BPF"]
fn a_context_switch_storm_loses_nothing() {
    let _serial = serial();
    let dir = scratch("storm");
    let data = record(
        &dir,
        &["--ring-mb", "64"],
        &[
            "perf",
            "bench",
            "sched",
            "messaging",
            "-g",
            "10",
            "-l",
            "300",
        ],
    );
    let r = report(&data);
    assert_eq!(r["lost_events"], 0, "lost or unparsable records");
    assert!(threads(&r).len() >= 400, "{} threads", threads(&r).len());
    assert_coverage(&r);
}

/// Kernel stacks of blocked samples are reused from a thread's earlier walks
/// (or another thread's) only where the thread blocked at the same place:
/// a thread alternates between a read of a pipe and a read of a Unix
/// socket, through one call site (same system call, same user stack), and
/// the kernel wait site of each blocked sample must still be the right one.
/// Six such threads take turns, each new one blocking where the one before
/// did. The workload times its own waits; the reuse must really have
/// happened (most stacks), new threads must have taken stacks walked by
/// others, and no check of a reused stack may have found it wrong. The
/// same goes for the user stacks, which the drainer replays from an earlier
/// unwind at the same registers: most are replayed, and still lead to the
/// caller.
#[test]
#[ignore = "needs root and BPF"]
fn reused_kernel_stacks_keep_each_wait_at_its_own_site() {
    let _serial = serial();
    let dir = scratch("two_waits");
    let bin = workload("two_waits");
    let data = dir.join("holdup.data");
    let out = run_ok(&[
        "record",
        "-v",
        "-o",
        data.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
        "300",
        "6",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (pipe, socket) = (
        printed_value(&stdout, "pipe"),
        printed_value(&stdout, "socket"),
    );

    let stderr = String::from_utf8_lossy(&out.stderr);
    let counts_on = |marker: &str| numbers_on(&stderr, marker);
    let counts = counts_on("kernel stacks of blocked samples");
    let [walked, reused, shared, checked, differed] = counts[..] else {
        panic!("unexpected kernel stack counts: {counts:?}");
    };
    assert!(
        reused >= 2 * walked,
        "{reused} stacks reused, {walked} walked: the reuse did not happen"
    );
    // Twelve first blocks of a thread at a site (six threads, two sites),
    // most of them on a CPU where an earlier thread walked that site.
    assert!(
        shared >= 4,
        "{shared} stacks taken from other threads' walks"
    );
    assert!(checked > 0, "no reuse was checked by a walk");
    assert_eq!(differed, 0, "checks found reused stacks wrong");
    let user = counts_on("user stacks:");
    assert!(
        user.len() == 5 && user[1] * 2 >= user[0],
        "user stacks (unwound, replayed, CFI frames, chain frames, copy bytes): {user:?}"
    );
    // The verifier's work is most of every recording's start-up, some µs
    // per instruction: a Python walk that made 600k of each of five
    // programs kept short workloads from being recorded at all. About 100k
    // in all now, 40k in the largest program.
    let load = counts_on("BPF programs:");
    assert!(
        load.len() >= 3 && load[0] > 0 && load[1] <= 400_000 && load[2] <= 150_000,
        "BPF programs (loaded, instructions verified, in the largest): {load:?}"
    );

    let r = report(&data);
    let readers = threads_with(&r, "wait_on");
    assert_eq!(readers.len(), 6, "threads that wait in wait_on");
    let period = r["period_ns"].as_f64().unwrap() / 1e9;
    // Blocked, and then runnable until it ran: both are the read's time.
    let waited_in = |kernel_fn: &str| -> f64 {
        readers
            .iter()
            .flat_map(|t| functions_matching(t, |s| s == kernel_fn))
            .map(|f| {
                (f["total"]["other"].as_f64().unwrap() + f["total"]["sched"].as_f64().unwrap())
                    * period
            })
            .sum()
    };
    let on_pipe = waited_in("anon_pipe_read").max(waited_in("pipe_read"));
    let on_socket = waited_in("unix_stream_read_generic");
    assert_near(
        "seconds blocked reading the pipe",
        on_pipe,
        pipe,
        0.1 * pipe,
    );
    assert_near(
        "seconds blocked reading the socket",
        on_socket,
        socket,
        0.15 * socket,
    );
}

/// Code in the vDSO (no file on disk) is named and unwound through: a loop
/// reading the clock spends its time in `[vdso]` clock_gettime, under its
/// caller.
#[test]
#[ignore = "needs root and BPF"]
fn time_in_the_vdso_is_named_and_has_its_caller() {
    let _serial = serial();
    let dir = scratch("vdso_loop");
    let bin = workload("vdso_loop");
    let data = record(&dir, &[], &[bin.to_str().unwrap()]);
    let r = report(&data);
    let t = &threads_with(&r, "poll_clock")[0];
    let thread_total = total(&t["samples"]);
    let in_vdso: f64 = functions_matching(t, |s| s.contains("clock_gettime"))
        .into_iter()
        .filter(|f| f["dso"] == "[vdso]")
        .map(|f| total(&f["self"]))
        .sum();
    assert!(
        in_vdso > 0.5 * thread_total,
        "{in_vdso} of {thread_total} in the vDSO: {t}"
    );
    // Unwound through the vDSO: its time is under poll_clock.
    assert!(total(&function(t, "poll_clock")["total"]) > 0.9 * thread_total);
}

/// A stack shallower than the copy the recorder takes of it sends only what
/// lies below its top: the main thread's start (its arguments and
/// environment lie above) and the thread descriptor of a thread glibc made
/// (its TLS pointer). Two threads of a program built without frame pointers
/// (so no frame record cuts the copy) take turns blocking a few frames
/// deep; with 4 KiB copies asked for, they would send 4 KiB each. Their
/// stacks must still be whole, down to `_start` and `clone3`, with their
/// waits where the workload measured them.
#[test]
#[ignore = "needs root and BPF"]
fn a_shallow_stack_is_copied_only_up_to_its_top() {
    let _serial = serial();
    let dir = scratch("shallow_waits");
    let bin = workload_with("shallow_waits", &["-fomit-frame-pointer"]);
    let data = dir.join("holdup.data");
    let out = run_ok(&[
        "record",
        "-v",
        "--stack-bytes",
        "4096",
        "-o",
        data.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
        "200",
    ]);
    // (unwound, replayed, CFI frames, chain frames, copy bytes each)
    let user = numbers_on(&String::from_utf8_lossy(&out.stderr), "user stacks:");
    // About 450 bytes for the main thread, 2.2 KiB for the other (glibc
    // keeps room for libraries' TLS below its descriptor); 2.3 KiB if only
    // the main thread's copy were cut, 3.1 KiB if only the other's.
    assert!(
        user.len() == 5 && user[4] < 1800,
        "bytes of stack copy per sample (last): {user:?}"
    );

    let stdout = String::from_utf8_lossy(&out.stdout);
    let r = report(&data);
    let period = r["period_ns"].as_f64().unwrap() / 1e9;
    for (side, outermost) in [("main_side", "_start"), ("thread_side", "clone3")] {
        let ts = threads_with(&r, side);
        assert_eq!(ts.len(), 1, "threads in {side}");
        let t = ts[0];
        let read = function(t, "read_one");
        let blocked = (read["total"]["other"].as_f64().unwrap()
            + read["total"]["sched"].as_f64().unwrap())
            * period;
        let measured = printed_value(&stdout, side);
        assert_near(
            &format!("seconds {side} blocked in read_one"),
            blocked,
            measured,
            0.1 * measured + 2.0 * period,
        );
        // Every one of those samples reaches the thread's outermost frame.
        let whole = function(t, outermost);
        let under = whole["total"]["other"].as_f64().unwrap();
        assert!(
            under >= read["total"]["other"].as_f64().unwrap(),
            "{side}: {under} of its blocked samples reach {outermost}"
        );
    }
}

/// Every off-CPU interval of a thread is a wait segment, whether it made a
/// blocked sample (whose record then carries the segment) or not: the
/// off-CPU time the wait-for graph has for each thread is the time its
/// blocked samples cover, within a sampling period.
#[test]
#[ignore = "needs root and BPF"]
fn every_off_cpu_interval_is_a_wait_segment() {
    let _serial = serial();
    let dir = scratch("segments");
    let bin = workload("shallow_waits");
    let data = record(&dir, &[], &[bin.to_str().unwrap(), "200"]);
    let r = report(&data);
    let period = r["period_ns"].as_f64().unwrap();
    let g = json(&["waitgraph", "--json", "-i", data.to_str().unwrap()]);
    let nodes = g["nodes"].as_array().unwrap();
    let mut checked = 0;
    for t in threads(&r) {
        let s = &t["samples"];
        let points: f64 = ["io", "lock", "sched", "other"]
            .iter()
            .map(|c| s[c].as_f64().unwrap())
            .sum();
        let tid = t["tid"].as_u64().unwrap();
        let node = nodes
            .iter()
            .find(|n| n["tids"].as_array().unwrap() == &vec![Value::from(tid)])
            .unwrap_or_else(|| panic!("no wait-for graph node of thread {tid}"));
        let off = node["wait_ns"].as_f64().unwrap() + node["runnable_ns"].as_f64().unwrap();
        assert!(points >= 300.0, "thread {tid}: {points} blocked points");
        assert_near(
            &format!("thread {tid}: off-CPU periods in wait segments"),
            off / period,
            points,
            2.0 + 0.01 * points,
        );
        checked += 1;
    }
    assert_eq!(checked, 2, "threads checked");
}
