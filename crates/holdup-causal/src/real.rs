//! The real functions behind the interposed ones, resolved once.
//!
//! `dlsym(RTLD_NEXT, …)` finds the next definition after this library.
//! Versioned symbols are asked for by version with `dlvsym`: glibc keeps an
//! old `pthread_cond_*` (GLIBC_2.2.5, a different condition variable layout)
//! next to the current one (GLIBC_2.3.2), and the default `dlsym` answer is
//! not guaranteed to be the one the program was linked against.

use libc::{c_int, c_void, pthread_attr_t, pthread_t, sigset_t, timespec};
use std::sync::OnceLock;

pub type StartFn = extern "C" fn(*mut c_void) -> *mut c_void;

macro_rules! real_table {
    ($( $name:ident $(@ $ver:literal)? : fn($($arg:ty),*) $(-> $ret:ty)?; )*) => {
        #[allow(non_snake_case)]
        pub struct Real {
            $( pub $name: unsafe extern "C" fn($($arg),*) $(-> $ret)?, )*
        }

        fn resolve() -> Real {
            Real {
                $( $name: unsafe {
                    let name = concat!(stringify!($name), "\0").as_ptr() as *const libc::c_char;
                    #[allow(unused_mut, unused_assignments)]
                    let mut p: *mut c_void = std::ptr::null_mut();
                    $( p = libc::dlvsym(libc::RTLD_NEXT, name, concat!($ver, "\0").as_ptr() as *const libc::c_char); )?
                    if p.is_null() {
                        p = libc::dlsym(libc::RTLD_NEXT, name);
                    }
                    if p.is_null() {
                        // Nothing to fall back to: the program could not
                        // have run without it either.
                        libc::abort();
                    }
                    std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) $(-> $ret)?>(p)
                }, )*
            }
        }
    };
}

real_table! {
    pthread_create: fn(*mut pthread_t, *const pthread_attr_t, StartFn, *mut c_void) -> c_int;
    pthread_exit: fn(*mut c_void);
    pthread_join: fn(pthread_t, *mut *mut c_void) -> c_int;
    pthread_tryjoin_np: fn(pthread_t, *mut *mut c_void) -> c_int;
    pthread_timedjoin_np: fn(pthread_t, *mut *mut c_void, *const timespec) -> c_int;
    pthread_mutex_lock: fn(*mut libc::pthread_mutex_t) -> c_int;
    pthread_mutex_trylock: fn(*mut libc::pthread_mutex_t) -> c_int;
    pthread_mutex_timedlock: fn(*mut libc::pthread_mutex_t, *const timespec) -> c_int;
    pthread_mutex_unlock: fn(*mut libc::pthread_mutex_t) -> c_int;
    pthread_cond_wait @ "GLIBC_2.3.2": fn(*mut libc::pthread_cond_t, *mut libc::pthread_mutex_t) -> c_int;
    pthread_cond_timedwait @ "GLIBC_2.3.2": fn(*mut libc::pthread_cond_t, *mut libc::pthread_mutex_t, *const timespec) -> c_int;
    pthread_cond_signal @ "GLIBC_2.3.2": fn(*mut libc::pthread_cond_t) -> c_int;
    pthread_cond_broadcast @ "GLIBC_2.3.2": fn(*mut libc::pthread_cond_t) -> c_int;
    pthread_barrier_wait: fn(*mut libc::pthread_barrier_t) -> c_int;
    pthread_rwlock_rdlock: fn(*mut libc::pthread_rwlock_t) -> c_int;
    pthread_rwlock_timedrdlock: fn(*mut libc::pthread_rwlock_t, *const timespec) -> c_int;
    pthread_rwlock_wrlock: fn(*mut libc::pthread_rwlock_t) -> c_int;
    pthread_rwlock_tryrdlock: fn(*mut libc::pthread_rwlock_t) -> c_int;
    pthread_rwlock_trywrlock: fn(*mut libc::pthread_rwlock_t) -> c_int;
    pthread_rwlock_timedwrlock: fn(*mut libc::pthread_rwlock_t, *const timespec) -> c_int;
    pthread_rwlock_unlock: fn(*mut libc::pthread_rwlock_t) -> c_int;
    pthread_spin_lock: fn(*mut libc::pthread_spinlock_t) -> c_int;
    pthread_spin_unlock: fn(*mut libc::pthread_spinlock_t) -> c_int;
    pthread_kill: fn(pthread_t, c_int) -> c_int;
    pthread_sigqueue: fn(pthread_t, c_int, libc::sigval) -> c_int;
    pthread_sigmask: fn(c_int, *const sigset_t, *mut sigset_t) -> c_int;
    sigprocmask: fn(c_int, *const sigset_t, *mut sigset_t) -> c_int;
    sigaction: fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
    signal: fn(c_int, libc::sighandler_t) -> libc::sighandler_t;
    sigwait: fn(*const sigset_t, *mut c_int) -> c_int;
    sigwaitinfo: fn(*const sigset_t, *mut libc::siginfo_t) -> c_int;
    sigtimedwait: fn(*const sigset_t, *mut libc::siginfo_t, *const timespec) -> c_int;
    sigsuspend: fn(*const sigset_t) -> c_int;
    kill: fn(libc::pid_t, c_int) -> c_int;
    read: fn(c_int, *mut c_void, usize) -> isize;
    write: fn(c_int, *const c_void, usize) -> isize;
    dlclose: fn(*mut c_void) -> c_int;
    _exit: fn(c_int);
    _Exit: fn(c_int);
}

static REAL: OnceLock<Real> = OnceLock::new();

/// The table, resolved on first use (which may come before the runtime's
/// constructor: other libraries' constructors can lock mutexes).
pub fn real() -> &'static Real {
    REAL.get_or_init(resolve)
}
