//! A stable-Rust, in-process fuzzer for everything that reads a file given
//! to `holdup`: the trace reader and the report, script, flame and
//! waitgraph analyses, and the causal profile parser behind `causal report`.
//!
//! Bugs it looks for, per input: a panic (caught, the input kept), a hang
//! (a watchdog aborts the run and names the input) and an allocation
//! driven by a length in the file rather than by the data (a counting
//! allocator refuses more than [`MAX_LIVE`] bytes live or
//! [`MAX_ONE`] in one allocation, and names the input before it aborts).

pub mod mutate;
pub mod seeds;
pub mod targets;

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// Inputs are at most this large: enough for many chunks and records,
/// small enough that a run of millions is quick.
pub const MAX_INPUT: usize = 64 << 10;
/// Bytes live at once. A 64 KiB input needs a few MiB to analyse.
pub const MAX_LIVE: usize = 256 << 20;
/// Bytes in one allocation.
pub const MAX_ONE: usize = 64 << 20;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static SEED: AtomicU64 = AtomicU64::new(0);
/// Index of the input being run, +1 (0: none).
static CURRENT: AtomicU64 = AtomicU64::new(0);
/// When the current input started, in ms since [`epoch`] (0: idle).
static STARTED_MS: AtomicU64 = AtomicU64::new(0);

struct Counting;

/// Write `msg` and the current input to stderr without allocating.
fn say_without_alloc(msg: &str) {
    let mut buf = [0u8; 160];
    let mut n = 0;
    let mut put = |s: &[u8]| {
        for &c in s {
            if n < buf.len() {
                buf[n] = c;
                n += 1;
            }
        }
    };
    put(b"holdup-fuzz: ");
    put(msg.as_bytes());
    let current = CURRENT.load(Relaxed);
    if current == 0 {
        put(b" (a given input, not one of a run)\n");
        unsafe { libc::write(2, buf.as_ptr() as *const libc::c_void, n) };
        return;
    }
    put(b": input ");
    let mut num = [0u8; 20];
    let mut digits = |mut v: u64, put: &mut dyn FnMut(&[u8])| {
        let mut i = num.len();
        loop {
            i -= 1;
            num[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        put(&num[i..]);
    };
    digits(current - 1, &mut put);
    put(b" of seed ");
    digits(SEED.load(Relaxed), &mut put);
    put(b" (make it again with --replay)\n");
    unsafe { libc::write(2, buf.as_ptr() as *const libc::c_void, n) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let size = layout.size();
        let live = LIVE.fetch_add(size, Relaxed) + size;
        if size > MAX_ONE || live > MAX_LIVE {
            LIVE.fetch_sub(size, Relaxed);
            say_without_alloc("allocation cap exceeded");
            // A null return makes Rust abort with an allocation error.
            return std::ptr::null_mut();
        }
        PEAK.fetch_max(live, Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old {
            let grow = new_size - old;
            let live = LIVE.fetch_add(grow, Relaxed) + grow;
            if new_size > MAX_ONE || live > MAX_LIVE {
                LIVE.fetch_sub(grow, Relaxed);
                say_without_alloc("allocation cap exceeded");
                return std::ptr::null_mut();
            }
            PEAK.fetch_max(live, Relaxed);
        } else {
            LIVE.fetch_sub(old - new_size, Relaxed);
        }
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    epoch().elapsed().as_millis() as u64 + 1
}

/// Abort, naming the input, if one input runs longer than `limit`.
fn start_watchdog(limit: Duration) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        epoch();
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(100));
            let started = STARTED_MS.load(Relaxed);
            if started != 0 && now_ms().saturating_sub(started) > limit.as_millis() as u64 {
                say_without_alloc("hang (per-input time limit)");
                std::process::abort();
            }
        });
    });
}

/// The last panic's message and location, caught by our hook.
static PANIC: Mutex<Option<(String, String)>> = Mutex::new(None);

fn quiet_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        panic::set_hook(Box::new(|info| {
            let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
                s.to_string()
            } else if let Some(s) = info.payload().downcast_ref::<String>() {
                s.clone()
            } else {
                "panic".to_string()
            };
            let at = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()))
                .unwrap_or_default();
            *PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some((msg, at));
        }));
    });
}

pub struct Config {
    pub seed: u64,
    pub max_inputs: u64,
    pub max_time: Option<Duration>,
    pub corpus: Vec<Vec<u8>>,
    /// Where crashing inputs are written, if anywhere.
    pub crash_dir: Option<PathBuf>,
    pub hang_limit: Duration,
    /// Print a progress line every this many inputs (0: never).
    pub progress_every: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            seed: 1,
            max_inputs: 100_000,
            max_time: None,
            corpus: seeds::seeds(),
            crash_dir: None,
            hang_limit: Duration::from_secs(10),
            progress_every: 0,
        }
    }
}

#[derive(Debug)]
pub struct Crash {
    pub index: u64,
    pub message: String,
    pub location: String,
    pub input: Vec<u8>,
}

#[derive(Debug, Default)]
pub struct Stats {
    pub inputs: u64,
    pub elapsed: Duration,
    /// The first input for each distinct panic location.
    pub crashes: Vec<Crash>,
    pub panics: u64,
    /// Inputs that were traces whose header was read.
    pub traces_read: u64,
    pub peak_live_bytes: usize,
    pub largest_input: usize,
}

/// Input number `index` of a run, as [`fuzz`] makes it.
pub fn make_input(seed: u64, index: u64, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut b = mutate::input(seed, index, corpus);
    b.truncate(MAX_INPUT);
    b
}

/// Run one input under the panic catcher; the panic's (message, location).
pub fn check(input: &[u8]) -> Option<(String, String)> {
    quiet_panics();
    match panic::catch_unwind(AssertUnwindSafe(|| targets::run_one(input))) {
        Ok(()) => None,
        Err(_) => Some(
            PANIC
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .unwrap_or_default(),
        ),
    }
}

pub fn fuzz(cfg: &Config) -> Stats {
    start_watchdog(cfg.hang_limit);
    SEED.store(cfg.seed, Relaxed);
    let t0 = Instant::now();
    let mut s = Stats::default();
    for index in 0..cfg.max_inputs {
        if cfg.max_time.is_some_and(|m| t0.elapsed() >= m) {
            break;
        }
        let input = make_input(cfg.seed, index, &cfg.corpus);
        s.largest_input = s.largest_input.max(input.len());
        if holdup_trace::Reader::new(&input[..], "fuzz").is_ok() {
            s.traces_read += 1;
        }
        CURRENT.store(index + 1, Relaxed);
        STARTED_MS.store(now_ms(), Relaxed);
        let crashed = check(&input);
        STARTED_MS.store(0, Relaxed);
        s.inputs += 1;
        if cfg.progress_every > 0 && s.inputs.is_multiple_of(cfg.progress_every) {
            eprintln!(
                "holdup-fuzz: seed {}: {} inputs, {:.0} s, {} panics",
                cfg.seed,
                s.inputs,
                t0.elapsed().as_secs_f64(),
                s.panics
            );
        }
        if let Some((message, location)) = crashed {
            s.panics += 1;
            if !s.crashes.iter().any(|c| c.location == location) {
                if let Some(dir) = &cfg.crash_dir {
                    let _ = std::fs::create_dir_all(dir);
                    let _ = std::fs::write(dir.join(format!("crash-{index}.bin")), &input);
                }
                s.crashes.push(Crash {
                    index,
                    message,
                    location,
                    input,
                });
            }
        }
    }
    s.elapsed = t0.elapsed();
    s.peak_live_bytes = PEAK.load(Relaxed);
    s
}
