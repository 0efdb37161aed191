//! `holdup latency`: log2 latency histograms of system calls, kernel and
//! user functions and block requests, aggregated in the kernel (OSprof);
//! `report` draws them with their peaks, `diff` compares two recordings,
//! `explain` follows a peak to its causes (DARC). The recorder is
//! `holdup_record::latency`.

mod report;

use anyhow::bail;
use holdup_record::latency::{self, darc, spec};
use holdup_record::recording;
use holdup_symbolize::callgraph::Follow;
use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const DEFAULT_FILE: &str = "holdup-latency.data";

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    pub sub: Option<Sub>,
    #[command(flatten)]
    pub record: RecordArgs,
}

#[derive(clap::Subcommand, Debug)]
pub enum Sub {
    /// Histograms with their peaks, as text or JSON (holdup.latency/1).
    Report(ReportArgs),
    /// What changed between two recordings, operation by operation.
    Diff(DiffArgs),
    /// Where the time of a peak went: on a CPU, or waiting for I/O, a lock,
    /// a CPU (preempted) or something else (first level of DARC).
    Explain(ExplainArgs),
}

#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    /// The operation, as the report names it (e.g. syscall:read, func:lookup).
    pub op: String,
    /// The peak (1 = fastest); all peaks if not given.
    #[arg(long)]
    pub peak: Option<usize>,
    /// The process, when several ran the operation (default: the one that
    /// spent most time in it).
    #[arg(long)]
    pub pid: Option<u32>,
    #[arg(short, long, default_value = DEFAULT_FILE)]
    pub input: PathBuf,
    /// One JSON object, schema holdup.latency/1 with "paths".
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct RecordArgs {
    /// Time every system call (the default when nothing else is chosen).
    #[arg(long)]
    pub syscalls: bool,
    /// Time a kernel function (fentry/fexit); repeatable.
    #[arg(long = "kfunc", value_name = "FUNCTION")]
    pub kfuncs: Vec<String>,
    /// Time a user function (uprobe): SYMBOL in the command's (or -p
    /// process's) executable, or BINARY:SYMBOL; FILE:LINE names the
    /// function whose code holds that line; repeatable.
    #[arg(long = "func", value_name = "[BINARY:]SYMBOL|FILE:LINE")]
    pub funcs: Vec<String>,
    /// Also time the functions each --func function calls, this many
    /// levels down, inside its calls only: `explain` then follows a peak
    /// into the callees that make it (DARC).
    #[arg(long, value_name = "DEPTH", default_value_t = 0)]
    pub callees: usize,
    /// With --callees: also the callees that the samples of this
    /// recording (`holdup record`) show below each --func function, such
    /// as calls through a pointer, which the binary's code does not name.
    #[arg(long, value_name = "TRACE", requires = "callees")]
    pub callees_from: Option<PathBuf>,
    /// With --callees: also follow calls into shared libraries (through
    /// the PLT), e.g. into pthread_mutex_lock. Library functions are often
    /// called everywhere (clock_gettime, malloc), and every call of a timed
    /// function costs a uprobe trap, inside the root's calls or not.
    #[arg(long, requires = "callees")]
    pub callees_libs: bool,
    /// With --callees: go down this call path below the --func root first
    /// (callees, comma-separated, as a previous `explain` found them), then
    /// --callees levels further; the path's functions are timed, their
    /// other callees are not (DARC's resume from a previous point).
    #[arg(
        long,
        value_name = "CALLEE,...",
        value_delimiter = ',',
        requires = "callees"
    )]
    pub resume: Vec<String>,
    /// End the recording once each peak of every --func function has had
    /// N calls (and the function 100): DARC's decision point. The
    /// probes are then removed and a command runs on untraced, so a long
    /// program pays for the analysis only until then.
    #[arg(long, value_name = "N")]
    pub decision_ops: Option<u64>,
    /// Time block-device requests from issue to completion.
    #[arg(long)]
    pub block: bool,
    /// Time lock waits: each futex wait of the traced threads, from
    /// switch-out to switch-in (the `lock` operation).
    #[arg(long)]
    pub lock: bool,
    #[command(flatten)]
    pub target: super::target::TargetArgs,
    /// Time-lapse resolution kept in the file (e.g. 1s, 250ms).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// File to write.
    #[arg(short, long, default_value = DEFAULT_FILE)]
    pub output: PathBuf,
    /// The command to run: after `--`, or from the first word that is not
    /// an option.
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    #[arg(short, long, default_value = DEFAULT_FILE)]
    pub input: PathBuf,
    /// One JSON object, schema holdup.latency/1.
    #[arg(long)]
    pub json: bool,
    /// Also one histogram per step of this length (a multiple of the
    /// recorded interval, e.g. 1s).
    #[arg(long, value_parser = parse_duration)]
    pub time_lapse: Option<Duration>,
    /// Only operations whose name contains this (e.g. syscall:read).
    #[arg(long)]
    pub op: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    /// The recording before.
    pub a: PathBuf,
    /// The recording after.
    pub b: PathBuf,
    /// One JSON object, schema holdup.latency-diff/1.
    #[arg(long)]
    pub json: bool,
}

/// `1s`, `250ms`, `500us`, `2` (seconds).
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (like 1s or 250ms)"))?;
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        _ => return Err(format!("unknown unit '{unit}' (s, ms, us or min)")),
    };
    let secs = v * scale;
    if !(secs > 0.0 && secs.is_finite() && secs < 1e9) {
        return Err(format!("'{s}' must be positive"));
    }
    Ok(Duration::from_secs_f64(secs))
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    match a.sub {
        Some(Sub::Report(r)) => report::report(r),
        Some(Sub::Diff(d)) => report::diff(d),
        Some(Sub::Explain(e)) => report::explain(e),
        None => record(a.record),
    }
}

/// The engine's settings from the flags, and the operations of each
/// `--func` that several functions answer to.
fn config(a: RecordArgs) -> anyhow::Result<(latency::Config, Vec<Vec<String>>)> {
    let (target, duration) = a
        .target
        .resolve(!a.command.is_empty(), ("time", "latency"))?;
    if a.interval < Duration::from_millis(10) {
        bail!("--interval must be at least 10ms");
    }
    holdup_record::embed_symbols::find_debug_files_for_specs();
    let (funcs, overloads) = spec::user_funcs(&a.funcs, &a.command, &a.target.pid, a.callees)?;
    if a.callees > 0 && funcs.is_empty() {
        bail!("--callees needs a user function to start from (--func)");
    }
    if a.decision_ops.is_some() && funcs.is_empty() {
        bail!("--decision-ops needs a user function whose peaks to decide on (--func)");
    }
    if a.decision_ops == Some(0) {
        bail!("--decision-ops must be at least 1");
    }
    if !a.resume.is_empty() && funcs.len() != 1 {
        bail!("--resume follows a path below one root: give exactly one --func");
    }
    let callees = if a.callees > 0 {
        let sampled = match &a.callees_from {
            Some(path) => {
                let trace = super::input::load_trace(path)?;
                darc::sampled_edges(&trace, &funcs, a.resume.len() + a.callees)
            }
            None => Vec::new(),
        };
        Some(latency::Callees {
            depth: a.callees,
            follow: if a.callees_libs {
                Follow::Libraries
            } else {
                Follow::SameFile
            },
            sampled,
            resume: a.resume,
        })
    } else {
        None
    };
    let cfg = latency::Config {
        output: a.output,
        command: a.command,
        target,
        duration,
        interval: a.interval,
        syscalls: a.syscalls,
        block: a.block,
        lock: a.lock,
        kfuncs: a.kfuncs,
        funcs,
        callees,
        decision_ops: a.decision_ops,
    };
    Ok((cfg, overloads))
}

fn record(a: RecordArgs) -> anyhow::Result<ExitCode> {
    let (cfg, overloads) = config(a)?;
    let out = latency::record(&cfg)?;
    let data = &out.data;
    let ops: HashSet<(&str, u32)> = data
        .histograms
        .iter()
        .map(|h| (h.op.as_str(), h.pid))
        .collect();
    let calls: u64 = data.histograms.iter().flat_map(|h| &h.count).sum();
    eprintln!(
        "[ holdup latency: {} operations, {} calls, {} lost events; wrote {} ]",
        ops.len(),
        calls,
        data.lost_events,
        cfg.output.display()
    );
    let called = |op: &String| data.histograms.iter().any(|h| &h.op == op);
    let overload_called = |op: &String| {
        overloads
            .iter()
            .any(|o| o.contains(op) && o.iter().any(called))
    };
    if let Some(never) = data
        .requested
        .iter()
        .find(|r| !called(r) && !overload_called(r))
    {
        bail!(
            "{never} was never called during the recording (histograms of the rest are in {})",
            cfg.output.display()
        );
    }
    let mut exit = out.stop.status();
    if out.decided {
        if !cfg.command.is_empty() {
            eprintln!(
                "[ holdup latency: each peak had {} calls; probes removed, the command runs on ]",
                cfg.decision_ops.unwrap_or(0)
            );
            exit = out.recording.wait_untraced();
        }
    } else if let Some(n) = cfg.decision_ops {
        eprintln!("holdup: warning: --decision-ops {n}: the recording ended before each peak had {n} calls");
    }
    Ok(ExitCode::from(recording::exit_code(exit)))
}
