//! The functions this library exports in place of libc's.
//!
//! Blocking calls get COZ's pre_block/post_block (a wait ended by another
//! thread skips the delays added meanwhile: the waker paid them); calls that
//! wake another thread catch up first. Signal functions keep the delay
//! signal deliverable. Without an active runtime every wrapper is a plain
//! call to the real function.

use crate::counter::Counter;
use crate::processor::Forwarding;
use crate::progress;
use crate::real::{real, StartFn};
use crate::runtime::{self, Runtime};
use crate::threads::{self, DELAY_SIGNAL};
use libc::{c_char, c_int, c_void, pthread_attr_t, pthread_t, sigset_t, timespec};
use std::sync::atomic::Ordering;

/// The runtime, unless this thread is already inside it (an allocator or
/// a library called from the runtime may come back through a wrapper).
fn rt() -> Option<&'static Runtime> {
    let rt = runtime::get()?;
    match threads::current() {
        Some(st) if st.busy.load(Ordering::Acquire) => None,
        _ => Some(rt),
    }
}

/// Run a blocking call between pre_block and post_block.
#[inline]
fn blocking(call: impl FnOnce() -> c_int, woken: impl FnOnce(c_int) -> bool) -> c_int {
    match rt() {
        None => call(),
        Some(rt) => {
            rt.state.pre_block();
            let r = call();
            rt.state.post_block(woken(r));
            r
        }
    }
}

/// Take a lock: at once where it is free (no wait, so nothing to settle:
/// most calls of a program, at the price of a plain lock), else as a
/// blocking call. Only EBUSY means held: any other answer of the try is
/// the lock's (EOWNERDEAD: a robust mutex whose owner died is now ours).
#[inline]
fn locking(take_free: impl FnOnce() -> c_int, wait: impl FnOnce() -> c_int) -> c_int {
    match take_free() {
        libc::EBUSY => blocking(wait, |_| true),
        r => r,
    }
}

#[inline]
fn waking(call: impl FnOnce() -> c_int) -> c_int {
    if let Some(rt) = rt() {
        rt.catch_up();
    }
    call()
}

/// `--system`: a read or write on a pipe or a socket may wait for another
/// process of the program, like a pthread wait for another thread: the
/// process that ends the wait catches up first, so the waiter skips the
/// delays added meanwhile. (A peer outside the program is treated alike.)
/// Thread-level profiles and other files: a plain call.
#[inline]
fn ipc(fd: c_int, call: impl FnOnce() -> isize) -> isize {
    let Some(rt) = rt().filter(|rt| rt.state.domain.is_some()) else {
        return call();
    };
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let kind = if unsafe { libc::fstat(fd, &mut st) } == 0 {
        st.st_mode & libc::S_IFMT
    } else {
        0
    };
    if kind != libc::S_IFIFO && kind != libc::S_IFSOCK {
        return call();
    }
    rt.catch_up();
    rt.state.pre_block();
    let r = call();
    rt.state.post_block(true);
    r
}

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: usize) -> isize {
    ipc(fd, || unsafe { (real().read)(fd, buf, n) })
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    ipc(fd, || unsafe { (real().write)(fd, buf, n) })
}

#[no_mangle]
pub extern "C" fn _coz_get_counter(kind: c_int, name: *const c_char) -> *mut Counter {
    if name.is_null() {
        return std::ptr::null_mut();
    }
    let name = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy();
    let shared = runtime::get().and_then(|rt| rt.state.shared_points());
    match progress::counter(kind, &name, shared) {
        Some(c) => c as *const Counter as *mut Counter,
        None => std::ptr::null_mut(),
    }
}

struct StartArg {
    f: StartFn,
    arg: *mut c_void,
    local: u64,
}

/// New threads start from their creator's local delay (COZ): they owe what
/// it owed.
extern "C-unwind" fn start_thread(p: *mut c_void) -> *mut c_void {
    // SAFETY: allocated in pthread_create below.
    let StartArg { f, arg, local } = *unsafe { Box::from_raw(p as *mut StartArg) };
    if let Some(rt) = runtime::get() {
        rt.state.register_current_thread(local);
        install_exit_hook();
    }
    f(arg)
}

/// A thread can end by returning, by pthread_exit or by cancellation: a
/// thread-specific value's destructor sees all three.
fn install_exit_hook() {
    use std::sync::OnceLock;
    static KEY: OnceLock<libc::pthread_key_t> = OnceLock::new();
    extern "C" fn on_exit(_: *mut c_void) {
        if let Some(rt) = runtime::get() {
            rt.thread_exit();
        }
    }
    let key = *KEY.get_or_init(|| {
        let mut k: libc::pthread_key_t = 0;
        unsafe { libc::pthread_key_create(&mut k, Some(on_exit)) };
        k
    });
    // Any non-null value: only the destructor call matters.
    static MARK: u8 = 0;
    unsafe { libc::pthread_setspecific(key, &MARK as *const u8 as *const c_void) };
}

#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut pthread_t,
    attr: *const pthread_attr_t,
    f: StartFn,
    arg: *mut c_void,
) -> c_int {
    let Some(rt) = rt() else {
        return (real().pthread_create)(thread, attr, f, arg);
    };
    let local = match threads::current() {
        Some(st) => st.local.load(Ordering::Acquire),
        None => rt.state.global(),
    };
    let boxed = Box::into_raw(Box::new(StartArg { f, arg, local })) as *mut c_void;
    // SAFETY: same signature; the "C-unwind" ABI only allows forced unwinds
    // (pthread_exit, cancellation) to pass through start_thread.
    let tramp: StartFn = std::mem::transmute::<
        extern "C-unwind" fn(*mut c_void) -> *mut c_void,
        StartFn,
    >(start_thread);
    let r = (real().pthread_create)(thread, attr, tramp, boxed);
    if r != 0 {
        drop(Box::from_raw(boxed as *mut StartArg));
    }
    r
}

/// An unloaded library takes its unwind tables with it, and the profiler
/// unwinds through them (samples from inside the library may still be
/// queued): the library goes while the profiler cannot unwind, and the
/// profiler's list of loaded objects is made again before it can. A
/// dlclose from the runtime's own work (on the profiler thread, or on a
/// thread busy in the runtime; none is expected) goes straight through, as
/// it may hold the lock.
#[no_mangle]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    let Some(rt) = rt() else {
        return (real().dlclose)(handle);
    };
    if rt.state.profiler_tid.load(Ordering::Acquire) == threads::gettid() {
        return (real().dlclose)(handle);
    }
    let mut p = rt
        .samples
        .processor
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let r = (real().dlclose)(handle);
    if p.ready {
        p.reload_modules();
    } else {
        p.modules_stale = true;
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn pthread_exit(ret: *mut c_void) -> ! {
    if let Some(rt) = rt() {
        rt.thread_exit();
    }
    (real().pthread_exit)(ret);
    libc::abort()
}

#[no_mangle]
pub unsafe extern "C" fn pthread_join(t: pthread_t, ret: *mut *mut c_void) -> c_int {
    blocking(|| (real().pthread_join)(t, ret), |_| true)
}

#[no_mangle]
pub unsafe extern "C" fn pthread_tryjoin_np(t: pthread_t, ret: *mut *mut c_void) -> c_int {
    blocking(|| (real().pthread_tryjoin_np)(t, ret), |r| r == 0)
}

#[no_mangle]
pub unsafe extern "C" fn pthread_timedjoin_np(
    t: pthread_t,
    ret: *mut *mut c_void,
    abstime: *const timespec,
) -> c_int {
    blocking(
        || (real().pthread_timedjoin_np)(t, ret, abstime),
        |r| r == 0,
    )
}

#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_lock(m: *mut libc::pthread_mutex_t) -> c_int {
    locking(
        || (real().pthread_mutex_trylock)(m),
        || (real().pthread_mutex_lock)(m),
    )
}

#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_trylock(m: *mut libc::pthread_mutex_t) -> c_int {
    (real().pthread_mutex_trylock)(m)
}

#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_timedlock(
    m: *mut libc::pthread_mutex_t,
    abstime: *const timespec,
) -> c_int {
    blocking(|| (real().pthread_mutex_timedlock)(m, abstime), |r| r == 0)
}

#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_unlock(m: *mut libc::pthread_mutex_t) -> c_int {
    // Nobody to wake, nothing to catch up on (see lockword).
    if !unsafe { crate::lockword::may_wake(m) } {
        return (real().pthread_mutex_unlock)(m);
    }
    waking(|| (real().pthread_mutex_unlock)(m))
}

#[no_mangle]
pub unsafe extern "C" fn pthread_cond_wait(
    c: *mut libc::pthread_cond_t,
    m: *mut libc::pthread_mutex_t,
) -> c_int {
    blocking(|| (real().pthread_cond_wait)(c, m), |_| true)
}

#[no_mangle]
pub unsafe extern "C" fn pthread_cond_timedwait(
    c: *mut libc::pthread_cond_t,
    m: *mut libc::pthread_mutex_t,
    abstime: *const timespec,
) -> c_int {
    // A wait that timed out was ended by the clock, not by a thread.
    blocking(
        || (real().pthread_cond_timedwait)(c, m, abstime),
        |r| r == 0,
    )
}

#[no_mangle]
pub unsafe extern "C" fn pthread_cond_signal(c: *mut libc::pthread_cond_t) -> c_int {
    waking(|| (real().pthread_cond_signal)(c))
}

#[no_mangle]
pub unsafe extern "C" fn pthread_cond_broadcast(c: *mut libc::pthread_cond_t) -> c_int {
    waking(|| (real().pthread_cond_broadcast)(c))
}

#[no_mangle]
pub unsafe extern "C" fn pthread_barrier_wait(b: *mut libc::pthread_barrier_t) -> c_int {
    // Arriving may release the others: catch up, then wait like a lock.
    waking(|| blocking(|| (real().pthread_barrier_wait)(b), |_| true))
}

#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_rdlock(l: *mut libc::pthread_rwlock_t) -> c_int {
    locking(
        || (real().pthread_rwlock_tryrdlock)(l),
        || (real().pthread_rwlock_rdlock)(l),
    )
}

#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_timedrdlock(
    l: *mut libc::pthread_rwlock_t,
    t: *const timespec,
) -> c_int {
    blocking(|| (real().pthread_rwlock_timedrdlock)(l, t), |r| r == 0)
}

#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_wrlock(l: *mut libc::pthread_rwlock_t) -> c_int {
    locking(
        || (real().pthread_rwlock_trywrlock)(l),
        || (real().pthread_rwlock_wrlock)(l),
    )
}

#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_timedwrlock(
    l: *mut libc::pthread_rwlock_t,
    t: *const timespec,
) -> c_int {
    blocking(|| (real().pthread_rwlock_timedwrlock)(l, t), |r| r == 0)
}

#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_unlock(l: *mut libc::pthread_rwlock_t) -> c_int {
    waking(|| (real().pthread_rwlock_unlock)(l))
}

/// A spinning waiter is waiting, not working: it skips the delays its
/// holder paid, like a blocked one.
#[no_mangle]
pub unsafe extern "C" fn pthread_spin_lock(l: *mut libc::pthread_spinlock_t) -> c_int {
    blocking(|| (real().pthread_spin_lock)(l), |_| true)
}

#[no_mangle]
pub unsafe extern "C" fn pthread_spin_unlock(l: *mut libc::pthread_spinlock_t) -> c_int {
    waking(|| (real().pthread_spin_unlock)(l))
}

#[no_mangle]
pub unsafe extern "C" fn pthread_kill(t: pthread_t, sig: c_int) -> c_int {
    waking(|| (real().pthread_kill)(t, sig))
}

#[no_mangle]
pub unsafe extern "C" fn pthread_sigqueue(t: pthread_t, sig: c_int, val: libc::sigval) -> c_int {
    waking(|| (real().pthread_sigqueue)(t, sig, val))
}

#[no_mangle]
pub unsafe extern "C" fn kill(pid: libc::pid_t, sig: c_int) -> c_int {
    if pid == libc::getpid() {
        waking(|| (real().kill)(pid, sig))
    } else {
        (real().kill)(pid, sig)
    }
}

fn protecting() -> bool {
    runtime::get().is_some()
}

/// `set` without the delay signal.
unsafe fn without_delay_signal(set: *const sigset_t) -> sigset_t {
    let mut s = *set;
    libc::sigdelset(&mut s, DELAY_SIGNAL);
    s
}

/// The program may not take over or block the delay signal.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    if !protecting() {
        return (real().sigaction)(sig, act, old);
    }
    if sig == DELAY_SIGNAL {
        if !old.is_null() {
            std::ptr::write_bytes(old, 0, 1);
        }
        return 0;
    }
    if act.is_null() {
        return (real().sigaction)(sig, act, old);
    }
    let mut mine = *act;
    libc::sigdelset(&mut mine.sa_mask, DELAY_SIGNAL);
    (real().sigaction)(sig, &mine, old)
}

#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if protecting() && sig == DELAY_SIGNAL {
        return libc::SIG_DFL;
    }
    (real().signal)(sig, handler)
}

#[no_mangle]
pub unsafe extern "C" fn sigprocmask(
    how: c_int,
    set: *const sigset_t,
    old: *mut sigset_t,
) -> c_int {
    if protecting() && !set.is_null() && (how == libc::SIG_BLOCK || how == libc::SIG_SETMASK) {
        let s = without_delay_signal(set);
        return (real().sigprocmask)(how, &s, old);
    }
    (real().sigprocmask)(how, set, old)
}

#[no_mangle]
pub unsafe extern "C" fn pthread_sigmask(
    how: c_int,
    set: *const sigset_t,
    old: *mut sigset_t,
) -> c_int {
    if protecting() && !set.is_null() && (how == libc::SIG_BLOCK || how == libc::SIG_SETMASK) {
        let s = without_delay_signal(set);
        return (real().pthread_sigmask)(how, &s, old);
    }
    (real().pthread_sigmask)(how, set, old)
}

/// A signal sent by this process was sent after its sender caught up.
fn sent_by_us(info: &libc::siginfo_t) -> bool {
    unsafe { info.si_pid() == libc::getpid() }
}

/// Wait for a signal of `set` (the delay signal removed) between
/// pre_block and post_block.
unsafe fn wait_signal(
    set: *const sigset_t,
    info: &mut libc::siginfo_t,
    timeout: Option<*const timespec>,
) -> c_int {
    let s = without_delay_signal(set);
    let rt = rt();
    if let Some(rt) = rt {
        rt.state.pre_block();
    }
    let r = match timeout {
        None => (real().sigwaitinfo)(&s, info),
        Some(t) => (real().sigtimedwait)(&s, info, t),
    };
    if let Some(rt) = rt {
        rt.state.post_block(r > 0 && sent_by_us(info));
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn sigwait(set: *const sigset_t, sig: *mut c_int) -> c_int {
    if !protecting() || set.is_null() {
        return (real().sigwait)(set, sig);
    }
    let mut info: libc::siginfo_t = std::mem::zeroed();
    let r = wait_signal(set, &mut info, None);
    if r < 0 {
        return *libc::__errno_location();
    }
    if !sig.is_null() {
        *sig = r;
    }
    0
}

#[no_mangle]
pub unsafe extern "C" fn sigwaitinfo(set: *const sigset_t, info: *mut libc::siginfo_t) -> c_int {
    if !protecting() || set.is_null() {
        return (real().sigwaitinfo)(set, info);
    }
    let mut mine: libc::siginfo_t = std::mem::zeroed();
    let r = wait_signal(set, &mut mine, None);
    if r > 0 && !info.is_null() {
        *info = mine;
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn sigtimedwait(
    set: *const sigset_t,
    info: *mut libc::siginfo_t,
    t: *const timespec,
) -> c_int {
    if !protecting() || set.is_null() {
        return (real().sigtimedwait)(set, info, t);
    }
    let mut mine: libc::siginfo_t = std::mem::zeroed();
    let r = wait_signal(set, &mut mine, Some(t));
    if r > 0 && !info.is_null() {
        *info = mine;
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn sigsuspend(set: *const sigset_t) -> c_int {
    if !protecting() || set.is_null() {
        return (real().sigsuspend)(set);
    }
    let s = without_delay_signal(set);
    // Who sent the signal that ends the wait is unknown here: pay.
    blocking(|| (real().sigsuspend)(&s), |_| false)
}

/// `exit` runs the runtime's atexit handler; these two skip atexit.
#[no_mangle]
pub unsafe extern "C" fn _exit(code: c_int) -> ! {
    if let Some(rt) = runtime::get() {
        rt.shutdown();
    }
    (real()._exit)(code);
    libc::abort()
}

#[no_mangle]
pub unsafe extern "C" fn _Exit(code: c_int) -> ! {
    if let Some(rt) = runtime::get() {
        rt.shutdown();
    }
    (real()._Exit)(code);
    libc::abort()
}

/// The code of the wrappers that forward a program's call to libc's
/// function (run-time address ranges, and whether the call takes a lock).
/// A sample in that function, below one of them, is the program's call
/// made slower or waiting, in the caller's code: a lock taken in
/// `LRUCacheShard::Lookup` spins and enters the kernel in libc's
/// `pthread_mutex_lock`, below our wrapper. The runtime's own work (paying
/// delays, draining samples) happens in functions the wrappers call,
/// never in their own frames. A spinlock's spinning is no work of its
/// caller's but a wait (see `pthread_spin_lock`): its wrappers stay the
/// runtime's.
pub fn forwarding_ranges() -> Vec<Forwarding> {
    type Wrapper = *const ();
    let locks: [Wrapper; 6] = [
        pthread_mutex_lock as Wrapper,
        pthread_mutex_timedlock as Wrapper,
        pthread_rwlock_rdlock as Wrapper,
        pthread_rwlock_timedrdlock as Wrapper,
        pthread_rwlock_wrlock as Wrapper,
        pthread_rwlock_timedwrlock as Wrapper,
    ];
    let others: [Wrapper; 18] = [
        read as Wrapper,
        write as Wrapper,
        pthread_join as Wrapper,
        pthread_tryjoin_np as Wrapper,
        pthread_timedjoin_np as Wrapper,
        pthread_mutex_trylock as Wrapper,
        pthread_mutex_unlock as Wrapper,
        pthread_cond_wait as Wrapper,
        pthread_cond_timedwait as Wrapper,
        pthread_cond_signal as Wrapper,
        pthread_cond_broadcast as Wrapper,
        pthread_barrier_wait as Wrapper,
        pthread_rwlock_unlock as Wrapper,
        pthread_kill as Wrapper,
        pthread_sigqueue as Wrapper,
        kill as Wrapper,
        sigsuspend as Wrapper,
        sigwait as Wrapper,
    ];
    let tagged = |list: &[Wrapper], takes_lock: bool| -> Vec<Forwarding> {
        list.iter()
            .filter_map(|&f| symbol_range(f as usize))
            .map(|(start, end)| Forwarding {
                start,
                end,
                takes_lock,
            })
            .collect()
    };
    let mut all = tagged(&locks, true);
    all.extend(tagged(&others, false));
    all
}

/// The extent of the function at `addr`, from this library's dynamic
/// symbol table (every wrapper is exported).
fn symbol_range(addr: usize) -> Option<(u64, u64)> {
    /// glibc's flag for dladdr1: also return the symbol's entry.
    const RTLD_DL_SYMENT: c_int = 1;
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let mut sym: *mut c_void = std::ptr::null_mut();
    let found = crate::fork::with_loader(|| unsafe {
        libc::dladdr1(addr as *const c_void, &mut info, &mut sym, RTLD_DL_SYMENT)
    });
    if found == 0 || sym.is_null() || info.dli_saddr.is_null() {
        return None;
    }
    // SAFETY: dladdr1 points `sym` at the symbol's entry in the mapped table.
    let size = unsafe { (*(sym as *const libc::Elf64_Sym)).st_size };
    let start = info.dli_saddr as u64;
    (size > 0).then_some((start, start + size))
}
