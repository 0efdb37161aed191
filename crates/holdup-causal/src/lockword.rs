//! What a mutex's own word says about its waiters, read without taking it.
//!
//! COZ's wrappers catch up (drain the samples, pay the delays owed) before
//! every call that may wake another thread, so that the woken one can skip
//! the delays added while it waited. An unlock that wakes nobody needs no
//! catch-up: the thread pays at its next delay check. Skipping it matters
//! because the catch-up runs inside the program's critical section, just
//! before the unlock: on a hot lock (RocksDB's block cache) it lengthened
//! every critical section, and so every other thread's wait.

use std::sync::atomic::{AtomicI32, Ordering};

/// glibc's `__kind` values whose lock word is 0 (free), 1 (held, nobody
/// waits) or 2 (held, someone may wait): the plain, error-checking and
/// adaptive mutexes without robust, priority or process-shared flags.
const SIMPLE_KINDS: [i32; 3] = [0, 2, 3];
/// The kind's bits that name those flags and the type.
const KIND_BITS: i32 = 0xff;

/// Whether unlocking `m` (held by the caller) may wake a thread. True
/// whenever the word cannot tell: another layout, another kind.
///
/// # Safety
/// `m` points at an initialised mutex.
pub unsafe fn may_wake(m: *const libc::pthread_mutex_t) -> bool {
    #[cfg(all(target_env = "gnu", target_pointer_width = "64"))]
    {
        // struct __pthread_mutex_s: int __lock at 0, int __kind at 16.
        let words = m as *const i32;
        let kind = unsafe { std::ptr::read_volatile(words.add(4)) } & KIND_BITS;
        if SIMPLE_KINDS.contains(&kind) {
            // SAFETY: the lock word is an aligned int that libc changes
            // atomically.
            let lock = unsafe { (*(words as *const AtomicI32)).load(Ordering::Relaxed) };
            return lock != 1;
        }
    }
    let _ = m;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    struct Mutex(Box<libc::pthread_mutex_t>);
    unsafe impl Send for Mutex {}
    unsafe impl Sync for Mutex {}

    fn mutex(kind: i32) -> Mutex {
        let mut m = Box::new(unsafe { std::mem::zeroed::<libc::pthread_mutex_t>() });
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            libc::pthread_mutexattr_init(&mut attr);
            libc::pthread_mutexattr_settype(&mut attr, kind);
            libc::pthread_mutex_init(&mut *m, &attr);
        }
        Mutex(m)
    }

    #[test]
    fn an_unlock_wakes_only_once_someone_waits() {
        for kind in [libc::PTHREAD_MUTEX_NORMAL, libc::PTHREAD_MUTEX_ERRORCHECK] {
            let m = std::sync::Arc::new(mutex(kind));
            let p = &*m.0 as *const _ as *mut libc::pthread_mutex_t;
            assert_eq!(unsafe { libc::pthread_mutex_lock(p) }, 0);
            assert!(!unsafe { may_wake(p) }, "kind {kind}: held, nobody waits");
            let waiter = {
                let m = m.clone();
                std::thread::spawn(move || {
                    let p = &*m.0 as *const _ as *mut libc::pthread_mutex_t;
                    unsafe {
                        libc::pthread_mutex_lock(p);
                        libc::pthread_mutex_unlock(p);
                    }
                })
            };
            // The waiter marks the word before it sleeps.
            let t0 = Instant::now();
            while !unsafe { may_wake(p) } {
                assert!(t0.elapsed() < Duration::from_secs(10), "kind {kind}");
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(unsafe { libc::pthread_mutex_unlock(p) }, 0);
            waiter.join().unwrap();
        }
    }

    #[test]
    fn a_kind_whose_word_says_nothing_always_may_wake() {
        let m = mutex(libc::PTHREAD_MUTEX_RECURSIVE);
        let p = &*m.0 as *const _ as *mut libc::pthread_mutex_t;
        assert_eq!(unsafe { libc::pthread_mutex_lock(p) }, 0);
        assert!(unsafe { may_wake(p) });
        assert_eq!(unsafe { libc::pthread_mutex_unlock(p) }, 0);
    }
}
