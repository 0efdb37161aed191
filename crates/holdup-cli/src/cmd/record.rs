//! `holdup record`: run the recorder and write the trace as it goes.

use anyhow::bail;
use holdup_bpf::{RecorderOptions, SyscallOptions};
use holdup_record::flight::{FlightConfig, FuncTrigger};
use holdup_record::latency::spec;
use holdup_record::launch::{self, ExitStatus};
use holdup_record::session::{self, Config, Summary};
use holdup_record::{cgroup, recording};
use holdup_trace::flight::SyscallTrigger;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Sampling frequency in Hz; on-CPU and blocked samples share its period.
    #[arg(short = 'F', long = "freq", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub freq: u64,
    /// Trace file to write.
    #[arg(short, long, default_value = "holdup.data")]
    pub output: PathBuf,
    #[command(flatten)]
    pub target: super::target::TargetArgs,
    /// Record only tasks in this cgroup (v2) and the cgroups below it:
    /// a directory under the cgroup v2 mount, or a path as
    /// /proc/PID/cgroup shows it. Alone, it records every process there;
    /// with a command, -p or -a, those of them in the cgroup. The
    /// recording ends when the cgroup is removed.
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<PathBuf>,
    /// Take blocked-sample stacks at most this many times a second (all
    /// CPUs together). Above it, short blocked intervals have their stacks
    /// taken at random, each kept one weighted by the inverse of its odds,
    /// so that shares stay unbiased; long ones always. The exact blocked
    /// time is still counted, and the trace says the ratio. Without it
    /// every blocked sample has its stacks.
    #[arg(long, value_name = "PER_SECOND", value_parser = clap::value_parser!(u32).range(1..))]
    pub stack_budget: Option<u32>,
    /// Flight recorder: keep only the last SECONDS of the recording, in
    /// memory, and write the trace when SIGUSR1 arrives, when
    /// --trigger-latency is met, or at the end. The processes, stacks and
    /// symbols of the whole recording stay in the trace.
    #[arg(long, value_name = "SECONDS")]
    pub flight: Option<f64>,
    /// With --flight: the most MiB of events kept in memory (the oldest go
    /// first, counted).
    #[arg(long, default_value_t = 256, requires = "flight", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub flight_mb: u32,
    /// With --flight: write the trace once a system call or a function
    /// takes at least MS milliseconds. SYSCALL:MS (e.g. read:40; any:MS for
    /// every call) turns on --syscalls; BINARY:FUNCTION:MS (e.g.
    /// ./server:handle_request:40), or func:FUNCTION:MS for a function of
    /// the command, times the function as `latency --func` does (a uprobe
    /// and a uretprobe).
    #[arg(
        long,
        value_name = "SYSCALL:MS|BINARY:FUNCTION:MS",
        requires = "flight"
    )]
    pub trigger_latency: Option<String>,
    /// Do not follow processes forked by the target.
    #[arg(long)]
    pub no_inherit: bool,
    /// Do not record wait segments (lowest overhead; no wait-for graph).
    #[arg(long)]
    pub no_segments: bool,
    /// Do not record block-device requests.
    #[arg(long)]
    pub no_block_io: bool,
    /// Do not take the waker's stacks at the wakeups of blocked samples
    /// (no `woken at:` stacks; less work at every wakeup).
    #[arg(long)]
    pub no_waker_stacks: bool,
    /// Bytes of user stack copied per sample for unwinding through code
    /// without frame pointers.
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(0..=4096))]
    pub stack_bytes: u32,
    /// Ring buffer size in MiB (a power of two): kernel memory, taken at
    /// start. Records wait in it up to a second (never until it is half
    /// full), so that converting them takes less CPU from the command.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=2048))]
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
    /// Follow the goroutines of Go programs (Go 1.21-1.26, x86-64): a
    /// goroutine's time parked in the Go scheduler (a sync.Mutex, a
    /// channel, a select, network I/O, a sleep) becomes blocked samples of
    /// its own, with its stack and the goroutine that readied it. Uprobes on
    /// the scheduler cost about a microsecond per park, wake and run: a
    /// program that parks a hundred thousand times a second slows by a
    /// third or more, hence not by default.
    #[arg(long)]
    pub goroutines: bool,
    /// Print what the trace holds, by record kind, at the end.
    #[arg(short, long)]
    pub verbose: bool,
    /// When the trace is written, push its profile to this Pyroscope or
    /// Parca server (http://HOST:PORT or https://…); a failure is a warning.
    #[arg(long, value_name = "URL")]
    pub push: Option<String>,
    #[command(flatten)]
    pub push_to: crate::upload::PushArgs,
    /// The command to run and record: after `--`, or from the first word
    /// that is not an option (an unknown option is an error, as in perf).
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

impl TryFrom<Args> for Config {
    type Error = anyhow::Error;

    fn try_from(a: Args) -> anyhow::Result<Config> {
        let cgroup = a.cgroup.as_deref().map(cgroup::resolve).transpose()?;
        let (target, duration) =
            if cgroup.is_some() && a.command.is_empty() && a.target.pid.is_empty() {
                // The cgroup alone: every process in it.
                (holdup_bpf::Target::All, a.target.duration()?)
            } else {
                a.target
                    .resolve(!a.command.is_empty(), ("record", "record"))?
            };
        if !a.ring_mb.is_power_of_two() {
            bail!("--ring-mb must be a power of two");
        }
        let period_ns = 1_000_000_000 / a.freq;
        let trigger = a
            .trigger_latency
            .as_deref()
            .map(|spec| latency_trigger(spec, &a.command, &a.target.pid))
            .transpose()?;
        let (trigger, func_trigger) = match trigger {
            Some(Trigger::Syscall(t)) => (Some(t), None),
            Some(Trigger::Func(t)) => (None, Some(t)),
            None => (None, None),
        };
        let flight = match a.flight {
            Some(s) if !(s > 0.0 && s.is_finite()) => {
                bail!("--flight must be a positive number of seconds")
            }
            Some(s) => Some(FlightConfig {
                keep: std::time::Duration::from_secs_f64(s),
                max_bytes: (a.flight_mb as usize) << 20,
                trigger,
                func_trigger,
            }),
            None => None,
        };
        // A latency trigger watches the kept system calls: every one at
        // least as slow as it is kept.
        let trigger_ns = flight.as_ref().and_then(|f| f.trigger).map(|t| t.min_ns);
        let syscalls = (a.syscalls || trigger_ns.is_some()).then(|| SyscallOptions {
            keep_ns: a
                .syscall_keep_us
                .saturating_mul(1000)
                .min(trigger_ns.unwrap_or(u64::MAX)),
            sample_every: a.syscall_sample,
            inband: a.inband,
        });
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
                syscalls,
                own_preemption_is_delay: false,
                cgroup: cgroup.as_ref().map(|c| c.filter),
                stack_budget: a.stack_budget.unwrap_or(0),
                goroutines: a.goroutines,
                waker_stacks: !a.no_waker_stacks,
            },
            target,
            cgroup,
            flight,
        })
    }
}

/// What `--trigger-latency` watches.
enum Trigger {
    Syscall(SyscallTrigger),
    Func(FuncTrigger),
}

/// `--trigger-latency SYSCALL:MS`, `BINARY:FUNCTION:MS` or
/// `func:FUNCTION:MS`: a name with a colon in it is a function, as
/// `latency --func` names them (the binary is the command's or the `-p`
/// process's by default); one without is a system call.
fn latency_trigger(spec: &str, command: &[String], pids: &[u32]) -> anyhow::Result<Trigger> {
    let bad = || {
        anyhow::anyhow!(
            "--trigger-latency wants SYSCALL:MS (e.g. read:40) or BINARY:FUNCTION:MS (e.g. ./server:handle_request:40), not '{spec}'"
        )
    };
    let (name, ms) = spec.rsplit_once(':').ok_or_else(bad)?;
    let ms: f64 = ms.parse().map_err(|_| bad())?;
    if !(ms > 0.0 && ms.is_finite()) || name.is_empty() {
        return Err(bad());
    }
    let min_ns = (ms * 1e6) as u64;
    let func = name
        .strip_prefix("func:")
        .or(name.contains(':').then_some(name));
    if let Some(func) = func {
        let funcs = spec::operation_funcs(func, command, pids, "--trigger-latency")?;
        return Ok(Trigger::Func(FuncTrigger {
            spec: func.to_string(),
            funcs,
            min_ns,
        }));
    }
    syscall_trigger(name, min_ns).map(Trigger::Syscall)
}

/// A system call's trigger: `name` is its name or `any`.
fn syscall_trigger(name: &str, min_ns: u64) -> anyhow::Result<SyscallTrigger> {
    let nr =
        match name {
            "any" => None,
            _ => Some(holdup_analysis::syscalls::number(name).ok_or_else(|| {
                anyhow::anyhow!("--trigger-latency: no system call named '{name}' (a function is BINARY:FUNCTION or func:FUNCTION)")
            })?),
        };
    Ok(SyscallTrigger { nr, min_ns })
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // The URL, credentials and certificates are checked before anything
    // runs.
    let push = match &args.push {
        Some(url) => Some((
            crate::upload::Endpoint::new(url, &args.push_to.connect)
                .map_err(|e| crate::upload::redacted(e, None))?,
            args.push_to.clone(),
        )),
        None => None,
    };
    let cfg = Config::try_from(args)?;
    let summary = session::record(&cfg)?;
    if cfg.verbose {
        print_details(&summary);
    }
    let code = print_summary(&cfg, &summary);
    if let Some((to, args)) = push {
        crate::upload::after_record(&cfg.output, &to, &args);
    }
    Ok(code)
}

/// `-v`: where the time went and what the trace holds.
fn print_details(s: &Summary) {
    let t = &s.timings;
    eprintln!(
        "holdup: drainer used {:.3} s of CPU over {:.3} s of recording ({:.2}% of one core); finishing used {:.3} s (last drain, detaching, symbolization)",
        t.drain_cpu.as_secs_f64(),
        t.recorded.as_secs_f64(),
        100.0 * t.drain_cpu.as_secs_f64() / t.recorded.as_secs_f64().max(1e-9),
        t.finish_cpu.as_secs_f64()
    );
    for (kind, n, bytes) in &s.writer_stats {
        eprintln!(
            "holdup: {n:>9} {kind:<16} {bytes:>11} bytes ({:.1} bytes each)",
            *bytes as f64 / (*n).max(1) as f64
        );
    }
    eprintln!(
        "holdup: start-up {:.1} ms (until the target ran); finishing {:.1} ms after it ended, symbolization {:.1} ms of it ({} addresses, {} from the symbol cache); sys_exit fallback {}; {} user stacks of threads without rseq taken by task work",
        t.startup.as_secs_f64() * 1e3,
        t.finishing.as_secs_f64() * 1e3,
        t.symbolization.as_secs_f64() * 1e3,
        s.addresses,
        s.cached_addresses,
        if s.fallback {
            "attached"
        } else if s.stack_budget.is_some() {
            "never attached with a stack budget"
        } else {
            "not needed"
        },
        s.task_work_stacks,
    );
    let l = &s.load_cost;
    let (largest, most) = l.largest.clone().unwrap_or_default();
    eprintln!(
        "holdup: BPF programs: {} loaded, {} instructions verified, {} in the largest ({}); load {:.1} ms",
        l.programs,
        l.verified_insns,
        most,
        largest,
        l.took.as_secs_f64() * 1e3,
    );
    let k = &s.kstacks;
    eprintln!(
        "holdup: kernel stacks of blocked samples: {} walked, {} reused from the thread's last two walks, {} from other threads' walks ({} reuses checked by a walk, {} of them wrong)",
        k.walked, k.reused, k.shared, k.checked, k.differed
    );
    let u = &s.unwinds;
    eprintln!(
        "holdup: user stacks: {} unwound, {} of them replayed from an earlier unwind at the same registers; {} frames from CFI, {} from the frame-pointer chain; {} bytes of stack copy each",
        u.stacks,
        u.remembered,
        u.cfi_frames,
        u.fp_frames,
        u.copy_bytes / u.stacks.max(1)
    );
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The closing status line, warnings, and the exit code to pass through.
fn print_summary(cfg: &Config, s: &Summary) -> ExitCode {
    use holdup_bpf::records::{LOST_RING_FULL, REC_SYSCALL};
    let counts = &s.counts;
    // Names of generated code, when a process had a perf map or jitdump.
    let jit = if s.jit.files > 0 || s.jit.malformed > 0 {
        format!(
            ", {} name{} of generated code from {} JIT map{} ({} malformed or cut lines skipped)",
            s.jit.entries,
            plural(s.jit.entries),
            s.jit.files,
            plural(s.jit.files),
            s.jit.malformed
        )
    } else {
        String::new()
    };
    let named = s.lost_named();
    let (lost, dropped) = holdup_trace::split_lost(named.iter().map(|(w, n)| (w.as_str(), *n)));
    eprintln!(
        "[ holdup record: {} samples, {} blocked samples (weight {}), {} wait events, {} lost events{jit}; wrote {} ({:.3} MB) ]",
        counts.cpu_samples,
        counts.blocked_samples,
        counts.blocked_weight,
        counts.segments,
        lost,
        cfg.output.display(),
        s.size as f64 / 1e6
    );
    if cfg.options.syscalls.is_some() {
        eprintln!(
            "[ holdup record: {} system call invocations kept, {} lost ]",
            counts.syscalls,
            s.lost.get(LOST_RING_FULL, REC_SYSCALL)
        );
    }
    if let Some(b) = &s.stack_budget {
        eprintln!(
            "[ holdup record: stack budget: stacks taken for {} of {} blocked intervals (1 in {:.2}), weights scaled by the inverse of their odds; {} waker stacks ]",
            b.stacks,
            b.intervals,
            b.ratio(),
            b.waker_stacks
        );
    }
    if s.user_stacks_given_up > 0 {
        eprintln!(
            "holdup: {}",
            holdup_record::session::user_stacks_given_up_note(s.user_stacks_given_up)
        );
    }
    if !dropped.is_empty() {
        eprintln!(
            "holdup: warning: the recorder dropped {}; counts are lower bounds",
            holdup_trace::dropped_text(&dropped)
        );
    }
    let listed = |files: &[(String, String)]| {
        let each: Vec<String> = files
            .iter()
            .map(|(p, why)| format!("{p} ({why})"))
            .collect();
        each.join(", ")
    };
    if !s.refused_files.is_empty() {
        eprintln!(
            "holdup: warning: did not read {} file(s) of the traced processes, whose stacks were walked by frame pointers only: {}",
            s.refused_files.len(),
            listed(&s.refused_files)
        );
    }
    if !s.failed_files.is_empty() {
        eprintln!(
            "holdup: warning: could not symbolize {} file(s); reports show file+offset for their frames: {}",
            s.failed_files.len(),
            listed(&s.failed_files)
        );
    }
    for note in &s.notes {
        eprintln!("holdup: warning: {note}");
    }
    if s.kstacks.differed > 0 {
        eprintln!(
            "holdup: warning: {} of {} checks found a reused kernel stack wrong; those threads' stacks were walked from then on, but their blocked samples since the check before may show the wrong kernel stack",
            s.kstacks.differed,
            s.kstacks.checked
        );
    }
    if let Some(ExitStatus::Signal(sig)) = s.exit {
        eprintln!(
            "holdup: {} was killed by {} (the trace is complete up to that point)",
            cfg.command[0],
            launch::signal_name(sig)
        );
    }
    ExitCode::from(recording::exit_code(s.exit))
}
