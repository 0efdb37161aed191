//! `holdup causal`: causal profiling (COZ's virtual speedups, with BCOZ's
//! blocked samples and SCOZ's core-level delays).
//!
//! `run` turns the flags into a [`causal::Config`] for the engine in
//! `holdup_record::causal`, and says what the profile it wrote holds.
//! `report` ranks the profile's targets.

use anyhow::{bail, Context};
use holdup_analysis::causal::{analyze, CozProfile};
use holdup_coz::target::{Subclass, Target};
use holdup_record::causal::{self, Mode};
use holdup_record::launch::{self, ExitStatus};
use holdup_record::recording;
use holdup_symbolize::lines::Granularity;
use std::fs::File;
use std::io::{BufReader, Seek as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Run a command and write a causal profile of it.
    Run(Box<RunArgs>),
    /// Rank the targets of a causal profile, with their speedup curves.
    Report(ReportArgs),
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubclassArg {
    Io,
    Sched,
}

impl From<SubclassArg> for Subclass {
    fn from(s: SubclassArg) -> Self {
        match s {
            SubclassArg::Io => Self::Io,
            SubclassArg::Sched => Self::Sched,
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GranularityArg {
    Line,
    Function,
}

impl From<GranularityArg> for Granularity {
    fn from(g: GranularityArg) -> Self {
        match g {
            GranularityArg::Line => Self::Line,
            GranularityArg::Function => Self::Function,
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Profile to write (COZ's format).
    #[arg(short, long, default_value = "profile.coz")]
    pub output: PathBuf,
    /// Source files (or objects) whose lines or functions may be targets,
    /// as a glob (`*`, `**`, `?`) on their path or its last components.
    /// Default: the main executable and the libraries it loaded that are not
    /// the system's runtime (libc, libstdc++, the loader, libm…); of a
    /// Python program (CPython 3.10 to 3.13), its own source files and
    /// installed packages, not the standard library.
    #[arg(long, value_name = "GLOB")]
    pub scope: Option<String>,
    /// What a code target is: a source line (where a line table exists;
    /// elsewhere its function, `BINARY:FUNCTION`) or always a whole function.
    #[arg(long, value_enum, default_value_t = GranularityArg::Line)]
    pub granularity: GranularityArg,
    /// Use program completion as the progress point: run the command
    /// repeatedly, one experiment per run.
    #[arg(long)]
    pub end_to_end: bool,
    /// Runs with --end-to-end.
    #[arg(long, default_value_t = 10, requires = "end_to_end", value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Only experiment on this line (FILE:LINE, FILE may be a path suffix)
    /// or function (BINARY:FUNCTION).
    #[arg(long, value_name = "FILE:LINE", conflicts_with = "subclass")]
    pub line: Option<String>,
    /// Only use this speedup, in percent.
    #[arg(long, value_name = "PCT", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub speedup: Option<u32>,
    /// Only experiment on a whole subclass of blocked samples: `io` (a faster
    /// disk) or `sched` (more cores).
    #[arg(long, value_enum)]
    pub subclass: Option<SubclassArg>,
    /// With --system, -a or -p: only experiment on one whole process of the program,
    /// by name (its comm): all its threads' work virtually faster, while
    /// the other processes are delayed (target `process:NAME`).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["line", "subclass"])]
    pub process: Option<String>,
    /// Add to the profile instead of replacing it (COZ's behaviour).
    #[arg(long)]
    pub append: bool,
    /// Sampling frequency in Hz (on-CPU and blocked samples).
    #[arg(short = 'F', long = "freq", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=10_000))]
    pub freq: u64,
    /// Shortest experiment, in milliseconds.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub experiment_ms: u64,
    /// Print every experiment as it ends.
    #[arg(short, long)]
    pub verbose: bool,
    /// A progress point without recompiling: count the visits of a function
    /// or a source line (`[BINARY:]SYMBOL` or `[BINARY:]FILE:LINE`; the
    /// command's executable by default) with a uprobe (a trap a visit), or
    /// the program's system calls (`syscall:NAME`) or a tracepoint's hits
    /// (`tracepoint:CAT:NAME`), counted in BPF without a trap, or a USDT
    /// probe's (`usdt:BINARY:PROVIDER:NAME`, a trap on its nop; its
    /// semaphore is raised). Repeatable.
    #[arg(
        long,
        value_name = "SYMBOL|FILE:LINE|syscall:NAME|usdt:BINARY:PROVIDER:NAME"
    )]
    pub progress: Vec<String>,
    /// A latency progress point without recompiling: a transaction begins
    /// at one place and ends at the other (each as for --progress).
    #[arg(long, value_name = "BEGIN,END")]
    pub latency: Vec<String>,
    /// Profile every process the command starts, with one experiment and
    /// delay domain for all (the runtime is preloaded in each; line targets
    /// are named `BINARY:FILE:LINE`).
    #[arg(long, conflicts_with = "end_to_end")]
    pub system: bool,
    /// Profile every process and the kernel, with core-level virtual
    /// speedups (SCOZ): nothing is loaded into the programs; targets are
    /// their lines (`BINARY:FILE:LINE`), kernel functions
    /// (`kernel:FUNC`) and whole processes (`process:NAME`); progress is
    /// counted with --progress / --latency. Until the COMMAND ends, if
    /// one is given, else until --duration or Ctrl-C.
    #[arg(short = 'a', long, conflicts_with_all = ["pid", "system", "end_to_end"])]
    pub all_cpus: bool,
    /// Like -a, for these running processes (and the children they start)
    /// only: PID[,PID...].
    #[arg(short = 'p', long, value_name = "PID[,PID]", conflicts_with_all = ["system", "end_to_end"])]
    pub pid: Option<String>,
    /// With -a or -p: stop after this many seconds.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub duration: Option<u64>,
    /// The command to profile: after `--`, or from the first word that is
    /// not an option (an unknown option is an error, as for `record`).
    #[arg(trailing_var_arg = true, value_name = "COMMAND", required_unless_present_any = ["all_cpus", "pid"], conflicts_with = "pid")]
    pub command: Vec<String>,
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Profile to read.
    #[arg(short, long, default_value = "profile.coz")]
    pub input: PathBuf,
    /// One JSON object, schema holdup.causal/1.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Run(a) => {
            holdup_record::embed_symbols::find_debug_files_for_specs();
            causal_run(*a)
        }
        Command::Report(a) => report(a),
    }
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    Ok(if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .context("cannot read the current directory")?
            .join(path)
    })
}

/// The engine's settings from the flags.
fn config(a: &RunArgs) -> anyhow::Result<causal::Config> {
    let mode = if a.all_cpus || a.pid.is_some() {
        Mode::Attach {
            pids: match &a.pid {
                Some(list) => causal::parse_pids(list)?,
                None => Vec::new(),
            },
            duration: a.duration.map(std::time::Duration::from_secs),
        }
    } else if a.system {
        Mode::System
    } else {
        Mode::Thread {
            end_to_end: a.end_to_end,
            runs: a.runs,
        }
    };
    Ok(causal::Config {
        output: absolute(&a.output)?,
        append: a.append,
        command: a.command.clone(),
        mode,
        scope: a.scope.clone(),
        granularity: a.granularity.into(),
        line: a.line.clone(),
        subclass: a.subclass.map(Subclass::from),
        process: a.process.clone(),
        speedup: a.speedup,
        period_ns: 1_000_000_000 / a.freq,
        experiment_ms: a.experiment_ms,
        verbose: a.verbose,
        progress: a.progress.clone(),
        latency: a.latency.clone(),
    })
}

fn causal_run(a: RunArgs) -> anyhow::Result<ExitCode> {
    let cfg = config(&a)?;
    let outcome = causal::run(&cfg)?;
    // -a/-p name no process to check: the samples went to every one.
    let process = match cfg.mode {
        Mode::Attach { .. } => None,
        _ => cfg.process.as_deref(),
    };
    report_written(&cfg.output, &outcome.output, outcome.status, process)
}

/// What the run left (the output as written; `path` names it): one line
/// on the profile written, or why there is none. `process` is the
/// --process name, if any.
fn report_written(
    path: &Path,
    output: &File,
    status: Option<ExitStatus>,
    process: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let mut file = output
        .try_clone()
        .with_context(|| format!("cannot read {}", path.display()))?;
    file.rewind()
        .with_context(|| format!("cannot read {}", path.display()))?;
    let profile = parse_profile(path, file)?;
    let n = profile.experiments.len();
    let name = path.display();
    match status {
        Some(ExitStatus::Signal(sig)) => eprintln!(
            "holdup causal: the program was killed by {}; {name} keeps the {n} experiments done so far",
            launch::signal_name(sig)
        ),
        Some(ExitStatus::Code(c)) if c != 0 => eprintln!(
            "holdup causal: the program exited with status {c}; {name} has {n} experiments"
        ),
        _ => {}
    }
    let code = recording::exit_code(status);
    if code != 0 {
        return Ok(ExitCode::from(code));
    }
    if profile.runs == 0 {
        bail!("the profiling runtime did not start in the program (is it statically linked?)");
    }
    if profile.progress_points_reached == Some(0) && n == 0 {
        bail!(
            "no progress point was reached: mark one with COZ_PROGRESS (include holdup.h or coz.h), or use --end-to-end"
        );
    }
    if n == 0 {
        bail!("the program ended before any experiment finished: make it run longer, or use --end-to-end");
    }
    // A misspelt --process would otherwise read as "no speedup to gain".
    if let Some(p) = process {
        let target = Target::Process(p.to_string()).to_string();
        let on_it = profile.experiments.iter().filter(|e| e.selected == target);
        if on_it.clone().all(|e| e.selected_samples == 0) {
            bail!(
                "--process {p}: no process of that name ran on a CPU during the {} experiments (the name is its comm, as `ps -o comm` shows)",
                on_it.count()
            );
        }
    }
    eprintln!("holdup causal: {n} experiments written to {name} (holdup causal report -i {name})");
    Ok(ExitCode::SUCCESS)
}

/// Parse a profile; lines left out are said.
fn parse_profile(path: &Path, file: File) -> anyhow::Result<CozProfile> {
    let profile = CozProfile::parse(BufReader::new(file))
        .with_context(|| format!("cannot read {}", path.display()))?;
    if profile.skipped_lines > 0 {
        eprintln!(
            "holdup causal: {}: {} lines longer than {} KiB, or not text, were left out",
            path.display(),
            profile.skipped_lines,
            holdup_analysis::causal::MAX_LINE >> 10
        );
    }
    Ok(profile)
}

fn report(a: ReportArgs) -> anyhow::Result<ExitCode> {
    let file = std::fs::File::open(&a.input)
        .with_context(|| format!("cannot open {}", a.input.display()))?;
    let profile = parse_profile(&a.input, file)?;
    let causal = analyze(&profile);
    let stdout = std::io::stdout();
    let out = stdout.lock();
    if a.json {
        holdup_render::causal::write_json(&causal, out)?;
    } else {
        if causal.experiments == 0 {
            bail!("{} has no experiments", a.input.display());
        }
        holdup_render::causal::write_text(&causal, out)?;
    }
    Ok(ExitCode::SUCCESS)
}
