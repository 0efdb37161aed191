//! `holdup record`: run the recorder and write the trace as it goes.

use crate::record::drain::Drainer;
use crate::record::finish;
use crate::record::launch::{self, ExitStatus, Launched};
use anyhow::{bail, Context};
use holdup_bpf::{Recorder, RecorderOptions, SyscallOptions, Target};
use holdup_trace::{features, Finish, Header, Lost, Record, SyscallConfig, Writer};
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Sampling frequency in Hz; on-CPU and blocked samples share its period.
    #[arg(short = 'F', long = "freq", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub freq: u64,
    /// Trace file to write.
    #[arg(short, long, default_value = "holdup.data")]
    pub output: PathBuf,
    /// Record existing processes (comma-separated pids) instead of a command.
    #[arg(short, long, value_delimiter = ',', conflicts_with = "all")]
    pub pid: Vec<u32>,
    /// Record every task on the system.
    #[arg(short, long)]
    pub all: bool,
    /// Stop after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Do not follow processes forked by the target.
    #[arg(long)]
    pub no_inherit: bool,
    /// Do not record wait segments (lowest overhead; no wait-for graph).
    #[arg(long)]
    pub no_segments: bool,
    /// Do not record block-device requests.
    #[arg(long)]
    pub no_block_io: bool,
    /// Bytes of user stack copied per sample for unwinding through code
    /// without frame pointers.
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(0..=4096))]
    pub stack_bytes: u32,
    /// Ring buffer size in MiB (a power of two).
    #[arg(long, default_value_t = 32)]
    pub ring_mb: u32,
    /// Record system calls (for `holdup syscalls`): every call is counted
    /// and timed, slow, blocked or faulting ones are kept whole.
    #[arg(long)]
    pub syscalls: bool,
    /// With --syscalls: keep every invocation at least this long (µs).
    #[arg(long, default_value_t = 1000, requires = "syscalls")]
    pub syscall_keep_us: u64,
    /// With --syscalls: keep one in N of the other invocations.
    #[arg(long, default_value_t = 256, requires = "syscalls", value_parser = clap::value_parser!(u32).range(1..))]
    pub syscall_sample: u32,
    /// With --syscalls: let the programs read the results of their own last
    /// system call without making another (include/holdup_debox.h); they
    /// find the map through the HOLDUP_DEBOX environment variable.
    #[arg(long, requires = "syscalls")]
    pub inband: bool,
    /// Print what the trace holds, by record kind, at the end.
    #[arg(short, long)]
    pub verbose: bool,
    /// The command to run and record: after `--`, or from the first word
    /// that is not an option (an unknown option is an error, as in perf).
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Plain configuration, independent of the command line.
#[derive(Clone, Debug)]
pub struct Config {
    pub output: PathBuf,
    pub target: Target,
    pub command: Vec<String>,
    pub period_ns: u64,
    pub duration: Option<Duration>,
    pub verbose: bool,
    pub options: RecorderOptions,
}

impl TryFrom<Args> for Config {
    type Error = anyhow::Error;

    fn try_from(a: Args) -> anyhow::Result<Config> {
        let target = choose_target(a.all, &a.pid, !a.command.is_empty(), ("record", "record"))?;
        if !a.ring_mb.is_power_of_two() {
            bail!("--ring-mb must be a power of two");
        }
        let period_ns = 1_000_000_000 / a.freq;
        let duration = match a.duration {
            Some(s) if !(s > 0.0 && s.is_finite()) => {
                bail!("--duration must be a positive number of seconds")
            }
            Some(s) => Some(Duration::from_secs_f64(s)),
            None => None,
        };
        Ok(Config {
            output: a.output,
            command: a.command,
            period_ns,
            duration,
            verbose: a.verbose,
            options: RecorderOptions {
                target: target.clone(),
                period_ns,
                follow_children: !a.no_inherit,
                segments: !a.no_segments,
                block_io: !a.no_block_io,
                stack_copy_bytes: a.stack_bytes,
                ring_bytes: a.ring_mb << 20,
                syscalls: a.syscalls.then(|| SyscallOptions {
                    keep_ns: a.syscall_keep_us.saturating_mul(1000),
                    sample_every: a.syscall_sample,
                    inband: a.inband,
                }),
            },
            target,
        })
    }
}

pub(crate) static SIGNALS: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::SeqCst);
}

pub(crate) fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The lowest descriptor number from `from` on that is not open.
fn free_fd(from: i32) -> Option<i32> {
    (from..from + 1000).find(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0)
}

/// A target that keeps every CPU busy with hundreds of runnable threads
/// would leave the drain loop a sliver of CPU, too little to empty the ring
/// buffer: events would be lost. A higher priority for this thread only
/// (nice is per thread on Linux; the command was forked before) keeps it
/// ahead; it takes the same CPU time, only sooner. Without the privilege
/// to raise it, the default stays.
fn drain_ahead_of_the_target() {
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -10) };
}

/// CPU time used by this process so far (user + system).
fn own_cpu() -> Duration {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// What `-a`, `-p PID,…` and a command ask to record (a command starts
/// with no pid: it is added once launched). For none of them the error
/// says there is nothing to `verb` and shows `holdup SUBCOMMAND -- CMD`.
pub fn choose_target(
    all: bool,
    pids: &[u32],
    has_command: bool,
    (verb, subcommand): (&str, &str),
) -> anyhow::Result<Target> {
    Ok(match (all, pids.is_empty(), has_command) {
        (true, _, false) => Target::All,
        (false, false, false) => {
            for &pid in pids {
                if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    bail!("no process with pid {pid}");
                }
            }
            Target::Pids(pids.to_vec())
        }
        (false, true, true) => Target::Pids(Vec::new()),
        (false, true, false) => {
            bail!("nothing to {verb}: give a command (holdup {subcommand} -- CMD), -p PID or -a")
        }
        _ => bail!("give either a command, -p PID or -a, not several"),
    })
}

fn header(cfg: &Config, start_ns: u64) -> Header {
    let uname = |f: fn(&libc::utsname) -> &[libc::c_char]| {
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        unsafe { libc::uname(&mut u) };
        let bytes: Vec<u8> = f(&u)
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Header {
        holdup_version: env!("CARGO_PKG_VERSION").to_string(),
        period_ns: cfg.period_ns,
        start_ns,
        start_unix_ns: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        hostname: uname(|u| &u.nodename),
        kernel: uname(|u| &u.release),
        ncpus: holdup_bpf::perf::online_cpus().map_or(0, |c| c.len() as u32),
        command: cfg.command.clone(),
        target: match (&cfg.target, cfg.command.is_empty()) {
            (Target::All, _) => "all".into(),
            (_, false) => "command".into(),
            _ => "pid".into(),
        },
        pids: match &cfg.target {
            Target::Pids(p) => p.clone(),
            Target::All => Vec::new(),
        },
        stack_copy_bytes: cfg.options.stack_copy_bytes,
    }
}

type Out = BufWriter<File>;

/// Move everything the recorder has into the trace.
fn drain(rec: &mut Recorder, d: &mut Drainer<Out>, unparsable: &mut u64) -> anyhow::Result<()> {
    rec.attach_fallbacks()?;
    rec.drain_address_events(|ev| d.queue_address_event(ev));
    d.sort_address_events();
    let mut err = None;
    let stats = rec.drain_records(|r| {
        if err.is_none() {
            err = d.record(r).err();
        }
    });
    *unparsable += stats.unparsable as u64;
    d.apply_all_address_events();
    if let Some(e) = err {
        return Err(e).context("writing the trace");
    }
    d.writer.flush_chunk().context("writing the trace")
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = Config::try_from(args)?;
    record(&cfg)
}

pub fn record(cfg: &Config) -> anyhow::Result<ExitCode> {
    let invoked = Instant::now();
    // The command is forked first and held before exec, so that it can be
    // tracked from its first instruction.
    // The command is forked before the map exists, so it cannot inherit
    // it: it takes it from us with pidfd_getfd(2), at a descriptor number
    // chosen now and passed in its environment.
    let debox_fd = match &cfg.options.syscalls {
        Some(s) if s.inband => {
            let fd = free_fd(500).context("no free descriptor for the in-band map")?;
            std::env::set_var("HOLDUP_DEBOX", format!("{}:{fd}", std::process::id()));
            Some(fd)
        }
        _ => None,
    };
    let mut launched: Option<Launched> = if cfg.command.is_empty() {
        None
    } else {
        Some(launch::spawn_held(&cfg.command)?)
    };
    let mut rec = Recorder::start(cfg.options.clone()).context("starting the recorder")?;
    if let Some(fd) = debox_fd {
        use std::os::fd::AsRawFd;
        if unsafe { libc::dup2(rec.debox_fd().as_raw_fd(), fd) } < 0 {
            return Err(std::io::Error::last_os_error()).context("passing the in-band map");
        }
    }
    if let Some(l) = &launched {
        rec.track(l.pid as u32)?;
    }
    let start_ns = holdup_bpf::monotonic_ns();
    rec.set_start(start_ns);
    let mut features = 0;
    if cfg.options.segments {
        features |= features::SEGMENTS;
    }
    if cfg.options.block_io {
        features |= features::BLOCK_IO;
    }
    let file = holdup_trace::create_private(&cfg.output)
        .with_context(|| format!("cannot create {}", cfg.output.display()))?;
    let writer = Writer::new(
        BufWriter::with_capacity(1 << 20, file),
        &header(cfg, start_ns),
        features,
    )
    .context("writing the trace")?;
    let mut d = Drainer::new(writer);
    if let Some(sc) = &cfg.options.syscalls {
        d.writer
            .write(&Record::SyscallConfig(SyscallConfig {
                keep_ns: sc.keep_ns,
                sample_every: sc.sample_every,
            }))
            .context("writing the trace")?;
    }
    let existing: Vec<u32> = match &cfg.target {
        Target::Pids(p) => p.clone(),
        Target::All => std::fs::read_dir("/proc")?
            .flatten()
            .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
            .filter(|&p| p != std::process::id())
            .collect(),
    };
    for &pid in &existing {
        d.load_existing(pid);
        let _ = d.name_existing(pid, start_ns);
    }
    if let Some(l) = &launched {
        // Until it execs, the command is a copy of this process.
        d.load_existing(l.pid as u32);
    }
    catch_signals();
    drain_ahead_of_the_target();
    if let Some(l) = &mut launched {
        if let Err(e) = l.release() {
            drop(d);
            let _ = std::fs::remove_file(&cfg.output);
            return Err(e);
        }
    }

    let began = Instant::now();
    let startup = began - invoked;
    let cpu_at_start = own_cpu();
    let mut unparsable = 0u64;
    let mut exit: Option<ExitStatus> = None;
    let tick = Duration::from_millis(50);
    loop {
        // Wake up when the command exits (or a signal arrives), or to drain.
        match &launched {
            Some(l) => exit = l.wait_for(tick),
            None => launch::sleep_until_readable(None, tick),
        }
        drain(&mut rec, &mut d, &mut unparsable)?;
        if exit.is_some() {
            break;
        }
        let signals = SIGNALS.load(Ordering::SeqCst);
        // With a command, Ctrl-C reaches it too: keep recording until it
        // exits, unless interrupted twice.
        if (launched.is_none() && signals > 0) || signals > 1 {
            break;
        }
        if cfg.duration.is_some_and(|dur| began.elapsed() >= dur) {
            break;
        }
    }

    let ended = Instant::now();
    // Threads still off-CPU (and samples still waiting for a user stack).
    rec.flush_open()?;
    drain(&mut rec, &mut d, &mut unparsable)?;
    let end_ns = holdup_bpf::monotonic_ns();
    let lost = rec.lost();
    let fallback = rec.fallback_attached();
    if cfg.options.syscalls.is_some() {
        for (k, t) in rec.syscall_totals() {
            d.writer
                .write(&Record::SyscallTotals(holdup_trace::SyscallTotals {
                    pid: k.pid,
                    nr: k.nr,
                    count: t.count,
                    total_ns: t.total_ns,
                    blocked: t.blocked,
                    min_flt: t.min_flt,
                    maj_flt: t.maj_flt,
                    hist: t.hist.to_vec(),
                }))?;
        }
    }
    drop(rec);

    for (what, n) in [
        (
            "samples",
            lost.by_kind[holdup_bpf::records::REC_SAMPLE as usize],
        ),
        (
            "wait segments",
            lost.by_kind[holdup_bpf::records::REC_SEGMENT as usize],
        ),
        ("task events", lost.by_kind[3..=6].iter().sum::<u64>()),
        ("block requests", lost.by_kind[7] + lost.by_kind[8]),
        (
            "system calls",
            lost.by_kind[holdup_bpf::records::REC_SYSCALL as usize]
                + lost.by_kind[holdup_bpf::records::REC_SYSCALL_STACK as usize],
        ),
        ("unparsable records", unparsable),
    ] {
        if n > 0 {
            d.writer.write(&Record::Lost(Lost {
                what: what.into(),
                count: n,
            }))?;
        }
    }
    let cpu_recording = own_cpu() - cpu_at_start;
    let recorded_for = ended - began;
    let sym_began = Instant::now();
    let sym = finish::symbolize(&mut d)?;
    let sym_took = sym_began.elapsed();
    for (irq, name) in finish::irq_names() {
        d.writer.write(&Record::IrqName { irq, name })?;
    }
    d.writer.write(&Record::Finish(Finish {
        time: end_ns,
        exit_code: exit.map(ExitStatus::as_shell_code),
    }))?;
    let counts = d.counts;
    if cfg.verbose {
        eprintln!(
            "holdup: drainer used {:.3} s of CPU over {:.3} s of recording ({:.2}% of one core); symbolization {:.3} s",
            cpu_recording.as_secs_f64(),
            recorded_for.as_secs_f64(),
            100.0 * cpu_recording.as_secs_f64() / recorded_for.as_secs_f64().max(1e-9),
            (own_cpu() - cpu_at_start - cpu_recording).as_secs_f64()
        );
        for (kind, n, bytes) in d.writer.stats() {
            eprintln!(
                "holdup: {n:>9} {kind:<16} {bytes:>11} bytes ({:.1} bytes each)",
                bytes as f64 / n.max(1) as f64
            );
        }
    }
    let out = d.writer.finish()?;
    let size = out
        .into_inner()
        .map_err(|e| e.into_error())?
        .metadata()?
        .len();
    if cfg.verbose {
        eprintln!(
            "holdup: start-up {:.1} ms (until the target ran); finishing {:.1} ms after it ended, symbolization {:.1} ms of it ({} addresses, {} from the symbol cache); sys_exit fallback {}",
            startup.as_secs_f64() * 1e3,
            ended.elapsed().as_secs_f64() * 1e3,
            sym_took.as_secs_f64() * 1e3,
            sym.frames,
            sym.cached,
            if fallback { "attached" } else { "not needed" },
        );
    }

    let lost_total = lost.total() + unparsable;
    eprintln!(
        "[ holdup record: {} samples, {} blocked samples (weight {}), {} wait events, {} lost events; wrote {} ({:.3} MB) ]",
        counts.cpu_samples,
        counts.blocked_samples,
        counts.blocked_weight,
        counts.segments,
        lost_total,
        cfg.output.display(),
        size as f64 / 1e6
    );
    if cfg.options.syscalls.is_some() {
        eprintln!(
            "[ holdup record: {} system call invocations kept, {} lost ]",
            counts.syscalls,
            lost.by_kind[holdup_bpf::records::REC_SYSCALL as usize]
        );
    }
    if !sym.failed_files.is_empty() {
        eprintln!(
            "holdup: warning: could not symbolize {} (changed or unreadable); reports show file+offset for them",
            sym.failed_files.join(", ")
        );
    }
    Ok(match exit {
        Some(ExitStatus::Signal(sig)) => {
            eprintln!(
                "holdup: {} was killed by {} (the trace is complete up to that point)",
                cfg.command[0],
                launch::signal_name(sig)
            );
            ExitCode::from((128 + sig) as u8)
        }
        Some(ExitStatus::Code(c)) => ExitCode::from(c as u8),
        None => ExitCode::SUCCESS,
    })
}
