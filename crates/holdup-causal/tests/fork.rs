//! A fork while the runtime holds a lock must leave the child free to take
//! it: `causal run --system` starts a runtime in every child, whose
//! profiler lists the loaded objects (`dl_iterate_phdr`) and reads the
//! progress points. Without the atfork handlers the child below waits for
//! ever (here: until its alarm kills it).

use holdup_causal::fork;
use holdup_causal::progress::POINTS;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static INSIDE: AtomicBool = AtomicBool::new(false);

unsafe extern "C" fn slow(
    _: *mut libc::dl_phdr_info,
    _: libc::size_t,
    _: *mut libc::c_void,
) -> libc::c_int {
    INSIDE.store(true, Ordering::Release);
    std::thread::sleep(Duration::from_millis(50));
    0
}

unsafe extern "C" fn fast(
    _: *mut libc::dl_phdr_info,
    _: libc::size_t,
    _: *mut libc::c_void,
) -> libc::c_int {
    0
}

extern "C" fn child() {
    fork::child(true);
}

#[test]
fn a_child_forked_while_the_runtime_holds_its_locks_can_take_them() {
    unsafe { libc::pthread_atfork(Some(fork::prepare), Some(fork::parent), Some(child)) };
    // One thread lists the loaded objects slowly, another holds the
    // progress points; the fork comes while both are busy.
    let loader = std::thread::spawn(|| {
        fork::with_loader(|| unsafe { libc::dl_iterate_phdr(Some(slow), std::ptr::null_mut()) })
    });
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let points = std::thread::spawn(move || {
        let _held = POINTS.lock().unwrap();
        held_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(300));
    });
    held_rx.recv().unwrap();
    while !INSIDE.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // The child: both locks must be free; the alarm ends a hang.
        unsafe {
            libc::alarm(5);
            libc::dl_iterate_phdr(Some(fast), std::ptr::null_mut());
        }
        let ok = POINTS.try_lock().is_ok();
        unsafe { libc::_exit(if ok { 0 } else { 3 }) };
    }
    assert!(pid > 0, "fork failed");
    let mut status = 0;
    unsafe { libc::waitpid(pid, &mut status, 0) };
    loader.join().unwrap();
    points.join().unwrap();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child hung on a lock held at the fork (status {status:#x})"
    );
}
