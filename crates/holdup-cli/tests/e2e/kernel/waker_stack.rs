//! The waker's stack at the wakeup (offwaketime's view), on the real
//! kernel: the mutex waits of held_io's waiter carry the keeper's unlock
//! (its futex wake) with the keeper's own function that called
//! pthread_mutex_unlock (the waker's user stack is unwound with CFI: the
//! libc it unlocks in has no frame pointers), and no wait an interrupt
//! ended carries the stack of the thread the interrupt came upon. Needs
//! root and BPF.

use crate::support::*;
use holdup_trace::{Class, Trace, Waker};

#[test]
#[ignore = "needs root and BPF"]
fn mutex_waits_carry_the_unlock_and_interrupt_wakeups_no_stack() {
    let _serial = serial();
    let dir = scratch("waker_stack");
    let bin = workload("held_io");
    let file = dir.join("held_io.dat");
    let data = record(
        &dir,
        &[],
        &[bin.to_str().unwrap(), "lock", file.to_str().unwrap(), "1.5"],
    );
    let r = report(&data);
    let waiter = threads(&r).iter().find(|t| t["comm"] == "waiter").unwrap();
    let (mut locked, mut unlock, mut in_keeper) = (0.0, 0.0, 0.0);
    for s in waiter["sites"].as_array().unwrap() {
        if s["class"] != "lock" || s["lock_kind"] != "mutex" {
            continue;
        }
        locked += s["while_held"]["samples"].as_f64().unwrap_or(0.0);
        for w in s["while_held"]["woken_at"].as_array().into_iter().flatten() {
            let stack = w["stack"].as_str().unwrap();
            let samples = w["samples"].as_f64().unwrap();
            if stack.contains("futex_wake_[k]") && stack.contains("lll_lock_wake") {
                unlock += samples;
            }
            // held_io's keeper() calls pthread_mutex_unlock itself (libc
            // names it __GI___pthread_mutex_unlock_usercnt inside).
            let frames: Vec<&str> = stack.split(';').collect();
            if frames
                .windows(2)
                .any(|f| f[0] == "keeper" && f[1].contains("pthread_mutex_unlock"))
            {
                in_keeper += samples;
            }
        }
    }
    eprintln!("{unlock} of {locked} mutex samples woken at the keeper's unlock");
    assert!(locked >= 200.0, "too few mutex samples to judge: {locked}");
    assert!(unlock >= 0.9 * locked, "{unlock} of {locked}");
    eprintln!("{in_keeper} of {locked} woken at keeper → pthread_mutex_unlock");
    assert!(in_keeper >= 0.9 * locked, "{in_keeper} of {locked}");
    let text = String::from_utf8(run_ok(&["report", "-i", data.to_str().unwrap()]).stdout).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains("woken at: keeper → pthread_mutex_unlock")),
        "{text}"
    );

    // Interrupts: their wakeups carry no stack; threads' mostly do.
    let trace = Trace::load(&data).unwrap();
    let blocked = |s: &&holdup_trace::Sample| s.class != Class::Cpu && s.weight > 0;
    let by_interrupt: Vec<_> = trace
        .samples
        .iter()
        .filter(blocked)
        .filter(|s| s.waker.is_interrupt())
        .collect();
    assert!(
        by_interrupt.iter().all(|s| s.waker_stack == 0),
        "a wakeup in interrupt context carries a thread's stack"
    );
    let by_thread = trace
        .samples
        .iter()
        .filter(blocked)
        .filter(|s| matches!(s.waker, Waker::Thread(_)) && s.wake > s.time)
        .count();
    let with_stack = trace
        .samples
        .iter()
        .filter(blocked)
        .filter(|s| s.waker_stack != 0)
        .count();
    eprintln!(
        "{} blocked samples woken by interrupts; {with_stack} of {by_thread} woken by threads carry a stack",
        by_interrupt.len()
    );
    assert!(
        with_stack * 10 >= by_thread * 9,
        "{with_stack} of {by_thread}"
    );
}
