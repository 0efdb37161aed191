//! Fuzzing of everything `holdup` parses that it did not write itself in
//! the same run: traces, latency files, causal profiles, symbol cache
//! files, `/proc/PID/maps` text and ELF files ([`targets`]), each followed
//! by what the commands do with it.
//!
//! Two drivers share the targets: a stable-Rust in-process fuzzer with a
//! format-aware mutator ([`fuzz`], the `holdup-fuzz` binary, and a bounded
//! run in the test suite), and coverage-guided libFuzzer runs through
//! `cargo fuzz` (the `fuzz/` directory, `scripts/fuzz`).
//!
//! Bugs looked for, per input: a panic (caught, the input kept), a hang
//! (a watchdog aborts the run and names the input) and an allocation
//! driven by a length in the file rather than by the data (a counting
//! allocator refuses more than [`MAX_LIVE`] bytes live or [`MAX_ONE`] in
//! one allocation, and names the input before it aborts). Builds meant for
//! fuzzing check integer overflow (the `fuzz` profile; `cargo fuzz` with
//! `-a`).

mod elfinfo;
mod memfile;
pub mod mutate;
pub mod seeds;
pub mod targets;

pub use targets::{Target, TARGETS};

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
/// The running target, as an index into [`TARGETS`].
static TARGET: AtomicUsize = AtomicUsize::new(0);
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
    put(b" of target ");
    put(TARGETS[TARGET.load(Relaxed)].name.as_bytes());
    put(b", seed ");
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

/// The most bytes live at once in this process so far.
pub fn peak_live_bytes() -> usize {
    PEAK.load(Relaxed)
}

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
        // Outside a run (one input checked, or the caller's own asserts
        // after a run) panics are told as usual.
        let usual = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
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
            if CURRENT.load(Relaxed) == 0 {
                usual(info);
            }
            *PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some((msg, at));
        }));
    });
}

pub struct Config {
    pub target: &'static Target,
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

impl Config {
    /// A run of `target` from its seeds.
    pub fn new(target: &'static Target) -> Self {
        Config {
            target,
            seed: 1,
            max_inputs: 100_000,
            max_time: None,
            corpus: (target.seeds)(),
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
    /// Inputs the target's parser accepted.
    pub parsed: u64,
    pub peak_live_bytes: usize,
    pub largest_input: usize,
}

/// Input number `index` of a run, as [`fuzz`] makes it.
pub fn make_input(seed: u64, index: u64, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut b = mutate::input(seed, index, corpus);
    b.truncate(MAX_INPUT);
    b
}

/// Run one input of `target` under the panic catcher: whether it parsed,
/// or the panic's (message, location).
pub fn check(target: &Target, input: &[u8]) -> Result<bool, (String, String)> {
    quiet_panics();
    panic::catch_unwind(AssertUnwindSafe(|| (target.run)(input))).map_err(|_| {
        PANIC
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_default()
    })
}

pub fn fuzz(cfg: &Config) -> Stats {
    start_watchdog(cfg.hang_limit);
    SEED.store(cfg.seed, Relaxed);
    let target = TARGETS.iter().position(|t| std::ptr::eq(t, cfg.target));
    TARGET.store(target.unwrap_or(0), Relaxed);
    let t0 = Instant::now();
    let mut s = Stats::default();
    for index in 0..cfg.max_inputs {
        if cfg.max_time.is_some_and(|m| t0.elapsed() >= m) {
            break;
        }
        let input = make_input(cfg.seed, index, &cfg.corpus);
        s.largest_input = s.largest_input.max(input.len());
        CURRENT.store(index + 1, Relaxed);
        STARTED_MS.store(now_ms(), Relaxed);
        let result = check(cfg.target, &input);
        STARTED_MS.store(0, Relaxed);
        s.inputs += 1;
        let crashed = match result {
            Ok(parsed) => {
                s.parsed += parsed as u64;
                None
            }
            Err(panic) => Some(panic),
        };
        if cfg.progress_every > 0 && s.inputs.is_multiple_of(cfg.progress_every) {
            eprintln!(
                "holdup-fuzz: {} seed {}: {} inputs, {:.0} s, {} panics",
                cfg.target.name,
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
                    let name = format!("{}-{}-{index}.bin", cfg.target.name, cfg.seed);
                    let _ = std::fs::write(dir.join(name), &input);
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
    CURRENT.store(0, Relaxed);
    s.elapsed = t0.elapsed();
    s.peak_live_bytes = PEAK.load(Relaxed);
    s
}
