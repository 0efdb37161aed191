//! Time, and the sleep that pays a delay.

/// CLOCK_MONOTONIC in ns: sample times and experiment boundaries compare
/// directly.
pub use holdup_bpf::monotonic_ns as now_ns;

/// Call `attempt` until it gives a value or the clock passes `deadline`
/// (ns), yielding the CPU between tries: a wait on a lock that another
/// process, or a thread gone in a fork, may never release.
pub fn retry_until<T>(deadline: u64, mut attempt: impl FnMut() -> Option<T>) -> Option<T> {
    loop {
        if let Some(v) = attempt() {
            return Some(v);
        }
        if now_ns() > deadline {
            return None;
        }
        unsafe { libc::sched_yield() };
    }
}

/// Sleep `ns` on CLOCK_MONOTONIC. Async-signal-safe.
///
/// The syscall is issued from this library's own code rather than through
/// libc's `clock_nanosleep`, so that the blocked samples the recorder takes
/// of a thread paying a delay have their IP inside the runtime and are
/// recognised as the profiler's doing, whatever the unwinder manages.
pub fn sleep_ns(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // Delays are often tens of µs: the default 50 µs timer slack would
    // double them. Only for this sleep; the program's own timers keep theirs.
    let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK) };
    if slack > 1000 {
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
    }
    raw_clock_nanosleep(&ts);
    if slack > 1000 {
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack as libc::c_ulong) };
    }
}

#[cfg(target_arch = "x86_64")]
fn raw_clock_nanosleep(ts: &libc::timespec) {
    let mut rem = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let mut req = *ts;
    loop {
        let ret: i64;
        // SAFETY: clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &rem); the
        // syscall clobbers rcx and r11 only.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") libc::SYS_clock_nanosleep => ret,
                in("rdi") libc::CLOCK_MONOTONIC as i64,
                in("rsi") 0i64,
                in("rdx") &req as *const libc::timespec,
                in("r10") &mut rem as *mut libc::timespec,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        // Interrupted by a signal: sleep the rest, the delay is owed.
        if ret == -(libc::EINTR as i64) {
            req = rem;
            continue;
        }
        break;
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn raw_clock_nanosleep(ts: &libc::timespec) {
    let mut req = *ts;
    let mut rem = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    while unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &req, &mut rem) } == libc::EINTR
    {
        req = rem;
    }
}

/// A small xorshift generator: experiments need cheap, not strong, randomness.
pub use holdup_coz::experiment::Rng;

/// A generator seeded differently in every process and run.
pub fn seeded_rng() -> Rng {
    Rng::from_seed(now_ns() ^ ((std::process::id() as u64) << 32))
}
