//! `holdup causal`: causal profiling (COZ's virtual speedups, with BCOZ's
//! blocked samples).
//!
//! `run` loads the recorder for the command, hands its ring buffer to the
//! runtime library it preloads into the command (`libholdup_causal.so`), and
//! waits; the runtime runs the experiments and writes the profile.
//! `report` ranks the profile's targets.

mod attach;
mod handlers;
mod peers;
mod system;
mod targets;

use anyhow::{bail, Context};
use holdup_analysis::causal::{analyze, CozProfile};
use holdup_bpf::{Recorder, RecorderOptions, Target};
use holdup_coz::probe_list::{self, ProbePoint};
use holdup_record::launch::{self, ExitStatus};
use std::fs::File;
use std::io::{BufReader, Seek as _};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
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

impl From<SubclassArg> for holdup_coz::target::Subclass {
    fn from(s: SubclassArg) -> Self {
        match s {
            SubclassArg::Io => Self::Io,
            SubclassArg::Sched => Self::Sched,
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Profile to write (COZ's format).
    #[arg(short, long, default_value = "profile.coz")]
    pub output: PathBuf,
    /// Source files (or objects) whose lines may be targets, as a glob
    /// (`*`, `**`, `?`) on their path or its last components. Default: every
    /// line of the main executable.
    #[arg(long, value_name = "GLOB")]
    pub scope: Option<String>,
    /// Use program completion as the progress point: run the command
    /// repeatedly, one experiment per run.
    #[arg(long)]
    pub end_to_end: bool,
    /// Runs with --end-to-end.
    #[arg(long, default_value_t = 10, requires = "end_to_end", value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Only experiment on this line (FILE:LINE, FILE may be a path suffix).
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
    /// command's executable by default) with a uprobe. Repeatable.
    #[arg(long, value_name = "SYMBOL|FILE:LINE")]
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
        Command::Run(a) => causal_run(*a),
        Command::Report(a) => report(a),
    }
}

/// Where the runtime library is: `HOLDUP_CAUSAL_LIB`, else next to this
/// executable (cargo puts it there, or in `deps/` for test builds); checked
/// to be safe to preload.
fn runtime_library() -> anyhow::Result<String> {
    if let Some(p) = std::env::var_os("HOLDUP_CAUSAL_LIB") {
        let p = PathBuf::from(p);
        if !p.exists() {
            bail!(
                "HOLDUP_CAUSAL_LIB names {}, which does not exist",
                p.display()
            );
        }
        return preloadable(&p);
    }
    let exe = std::env::current_exe().context("cannot locate the holdup executable")?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    for cand in [
        dir.join("libholdup_causal.so"),
        dir.join("deps/libholdup_causal.so"),
        dir.join("../lib/holdup/libholdup_causal.so"),
    ] {
        if cand.exists() {
            return preloadable(&cand);
        }
    }
    bail!(
        "cannot find libholdup_causal.so next to {}: build it with `cargo build -p holdup-causal` or set HOLDUP_CAUSAL_LIB",
        exe.display()
    )
}

/// The runtime library as `LD_PRELOAD` will name it: its absolute path
/// without symbolic links (what is loaded is what was checked), free of the
/// spaces and colons that `LD_PRELOAD` splits on, of a regular file that
/// only root or the user running holdup can change (it is loaded into the
/// program, which may run as root).
fn preloadable(lib: &Path) -> anyhow::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let path = lib
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", lib.display()))?;
    let Some(text) = path.to_str() else {
        bail!("the runtime library's path {} is not UTF-8", path.display());
    };
    if text.contains([' ', ':']) {
        bail!(
            "the runtime library's path {text} has a space or a colon, which LD_PRELOAD cannot carry: put libholdup_causal.so elsewhere and name it with HOLDUP_CAUSAL_LIB"
        );
    }
    let meta = std::fs::metadata(&path).with_context(|| format!("cannot read {text}"))?;
    if !meta.is_file() {
        bail!("the runtime library {text} is not a regular file");
    }
    let me = unsafe { libc::geteuid() };
    if meta.uid() != 0 && meta.uid() != me {
        bail!(
            "the runtime library {text} belongs to uid {}: holdup preloads only a library of root's{} (install it, or set HOLDUP_CAUSAL_LIB)",
            meta.uid(),
            if me == 0 { String::new() } else { format!(" or uid {me}'s") }
        );
    }
    if meta.mode() & 0o022 != 0 {
        bail!(
            "the runtime library {text} can be changed by other users (mode {:o}): `chmod go-w` it, or install it where only its owner can write",
            meta.mode() & 0o7777
        );
    }
    Ok(text.to_string())
}

/// Open the profile for writing (see [`holdup_trace::open_private`]):
/// owner-only, never through a link, emptied unless `append`. Open for
/// reading too: the profile is read back from this file, not from its
/// path again.
pub(super) fn create_output(path: &Path, append: bool) -> anyhow::Result<File> {
    holdup_trace::open_private(path, append)
        .with_context(|| format!("cannot write {}", path.display()))
}

struct RunConfig {
    /// The uprobe counters of --progress and --latency, kept open.
    _probes: Vec<OwnedFd>,
    /// Its path, for messages.
    output: PathBuf,
    command: Vec<String>,
    runs: u32,
    period_ns: u64,
    env: Vec<(&'static str, String)>,
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

fn config(a: &RunArgs, lib: &str) -> anyhow::Result<RunConfig> {
    use holdup_coz::env as e;
    let output = absolute(&a.output)?;
    let period_ns = 1_000_000_000 / a.freq;
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(p) if !p.is_empty() => format!("{lib}:{p}"),
        _ => lib.to_string(),
    };
    let mut env = vec![
        ("LD_PRELOAD", preload),
        (e::PARENT, std::process::id().to_string()),
        (e::PERIOD_NS, period_ns.to_string()),
        (e::EXPERIMENT_MS, a.experiment_ms.to_string()),
    ];
    if let Some(s) = &a.scope {
        env.push((e::SCOPE, s.clone()));
    }
    if let Some(l) = &a.line {
        if l.rsplit_once(':')
            .and_then(|(_, n)| n.parse::<u32>().ok())
            .is_none()
        {
            bail!("--line takes FILE:LINE, like work.c:42");
        }
        env.push((e::LINE, l.clone()));
    }
    if let Some(s) = a.speedup {
        env.push((e::SPEEDUP, s.to_string()));
    }
    if let Some(s) = a.subclass {
        let s: holdup_coz::target::Subclass = s.into();
        env.push((e::SUBCLASS, s.as_str().into()));
    }
    if let Some(p) = &a.process {
        if p.is_empty() || p.len() > 15 || p.contains('/') {
            bail!(
                "--process takes a process name (its comm: at most 15 characters), like postgres"
            );
        }
        env.push((e::PROCESS, p.clone()));
    }
    if a.end_to_end {
        env.push((e::END_TO_END, "1".into()));
    }
    if a.verbose {
        env.push((e::VERBOSE, "1".into()));
    }
    let (probes, list) = probe_points(a)?;
    if !list.is_empty() {
        env.push((e::PROBES, list));
    }
    Ok(RunConfig {
        _probes: probes,
        output,
        command: a.command.clone(),
        runs: if a.end_to_end { a.runs } else { 1 },
        period_ns,
        env,
    })
}

/// Open counting uprobes for every --progress and --latency place, and
/// the list that tells the runtime which fds count what (the command
/// inherits them).
fn probe_points(a: &RunArgs) -> anyhow::Result<(Vec<OwnedFd>, String)> {
    let mut fds: Vec<OwnedFd> = Vec::new();
    let mut points = Vec::new();
    if a.progress.is_empty() && a.latency.is_empty() {
        return Ok((fds, String::new()));
    }
    let program = a
        .command
        .first()
        .and_then(|c| holdup_record::launch::resolve_program(c));
    let mut open = |spec: &str, option: &str| -> anyhow::Result<Vec<RawFd>> {
        let counters = open_counter(program.as_deref(), spec, option)?;
        let raw = counters.iter().map(AsRawFd::as_raw_fd).collect();
        fds.extend(counters);
        Ok(raw)
    };
    for spec in &a.progress {
        points.push(ProbePoint::Throughput {
            name: spec.clone(),
            fds: open(spec, "--progress")?,
        });
    }
    for pair in &a.latency {
        let Some((begin, end)) = pair.split_once(',') else {
            bail!("--latency takes BEGIN,END, like 'start_request,finish_request'");
        };
        points.push(ProbePoint::Latency {
            name: pair.clone(),
            begin: open(begin, "--latency")?,
            end: open(end, "--latency")?,
        });
    }
    Ok((fds, probe_list::encode(&points)))
}

/// The uprobe counters (one per CPU) of a --progress or --latency place,
/// `SYMBOL` or `FILE:LINE` of `program` unless the spec names its binary.
fn open_counter(program: Option<&Path>, spec: &str, option: &str) -> anyhow::Result<Vec<OwnedFd>> {
    let site = holdup_coz::probe::resolve(program, spec)
        .map_err(|e| anyhow::anyhow!("{option} {spec}: {e}"))?;
    if site.single_stepped {
        // Its time counts in the program's, which waters down predictions
        // when visits are microseconds apart.
        eprintln!(
            "holdup causal: note: {option} {spec}: the kernel single-steps the probed instruction (it emulates only pushes, nops, calls and jumps), ~20 µs a visit on some virtual machines; a function that starts with a push, or a line at a call, counts visits cheaply"
        );
    }
    holdup_bpf::perf::uprobe_counters(&site.binary, site.offset)
        .with_context(|| format!("{option} {spec}: cannot attach a uprobe"))
}

/// A copy of `fd` that a child inherits through exec, numbered from 10
/// (clear of the numbers shells and programs use themselves).
fn inheritable(fd: BorrowedFd<'_>) -> anyhow::Result<OwnedFd> {
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD, 10) };
    if n < 0 {
        return Err(std::io::Error::last_os_error()).context("cannot pass an fd to the command");
    }
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// Ring buffer handed to the runtime: it drains every few ms, so a few MiB
/// absorb seconds of samples.
const RING_BYTES: u32 = 8 << 20;

/// The recorder as every causal mode wants it: samples with enough of the
/// user stack to unwind, no wait segments or block I/O.
/// `core_delays`: the delays are our handler threads preempting the
/// programs (-a/-p), whose time is then not the programs'.
fn start_recorder(
    target: Target,
    period_ns: u64,
    follow_children: bool,
    core_delays: bool,
) -> anyhow::Result<Recorder> {
    Recorder::start(RecorderOptions {
        target,
        period_ns,
        follow_children,
        segments: false,
        block_io: false,
        stack_copy_bytes: 2048,
        ring_bytes: RING_BYTES,
        syscalls: None,
        own_preemption_is_delay: core_delays,
    })
    .context("starting the recorder")
}

fn causal_run(a: RunArgs) -> anyhow::Result<ExitCode> {
    if a.all_cpus || a.pid.is_some() {
        let output = absolute(&a.output)?;
        return attach::attach_run(&a, output);
    }
    let lib = runtime_library()?;
    let cfg = config(&a, &lib)?;
    let output = create_output(&cfg.output, a.append)?;

    let rec = start_recorder(Target::Pids(Vec::new()), cfg.period_ns, a.system, false)?;
    if a.system {
        return system_run(&cfg, &rec, output);
    }
    // The runtime reads the ring and writes the profile from inside the
    // command: give it fds that survive exec (libbpf's and ours are
    // close-on-exec).
    let ring = inheritable(rec.ring_fd())?;
    let profile = inheritable(output.as_fd())?;
    std::env::set_var(holdup_coz::env::RING_FD, ring.as_raw_fd().to_string());
    std::env::set_var(holdup_coz::env::RING_BYTES, RING_BYTES.to_string());
    std::env::set_var(holdup_coz::env::OUTPUT_FD, profile.as_raw_fd().to_string());
    for (k, v) in &cfg.env {
        std::env::set_var(k, v);
    }
    // Ctrl-C reaches the command (same process group); we wait for it.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }

    let mut last = ExitStatus::Code(0);
    for _ in 0..cfg.runs {
        let mut child = launch::spawn_held(&cfg.command)?;
        rec.track(child.pid as u32)?;
        child.release()?;
        last = child.wait(true).unwrap_or(ExitStatus::Code(0));
        if last != ExitStatus::Code(0) {
            break;
        }
    }
    drop((ring, profile));
    drop(rec);
    report_outcome(&cfg, &output, last)
}

/// `--system`: the runtimes get their samples from here and send their
/// profile records back; the command ends the run (processes it left
/// behind are not waited for).
fn system_run(cfg: &RunConfig, rec: &Recorder, output: File) -> anyhow::Result<ExitCode> {
    let (mut fwd, handed) = system::Forwarder::new(rec.ring_fd(), RING_BYTES as u64, output)?;
    for (k, v) in cfg.env.iter().chain(&handed.env) {
        std::env::set_var(k, v);
    }
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
    let mut child = launch::spawn_held(&cfg.command)?;
    // Only the program holds them now.
    drop(handed);
    rec.track(child.pid as u32)?;
    child.release()?;
    let status = loop {
        fwd.pump(1);
        if let Some(s) = child.wait(false) {
            break s;
        }
    };
    let (output, s) = fwd.finish();
    // Samples queued for a process that ended reached nobody either.
    let lost = s.dropped + s.withheld;
    if lost > 0 {
        eprintln!(
            "holdup causal: {lost} of {} samples reached no process (it had not started its runtime, had ended, or fell behind)",
            s.dropped + s.forwarded
        );
    }
    if s.refused > 0 {
        eprintln!(
            "holdup causal: {} announcements on the channel were refused (not a process's own socket)",
            s.refused
        );
    }
    if s.bad_frames > 0 {
        eprintln!(
            "holdup causal: {} groups of profile records from the processes were not whole lines and were left out",
            s.bad_frames
        );
    }
    if let Some(e) = s.write_error {
        return Err(e).with_context(|| format!("cannot write {}", cfg.output.display()));
    }
    report_outcome(cfg, &output, status)
}

/// What the run left: one line on the profile written, or why there is none.
fn report_outcome(cfg: &RunConfig, output: &File, status: ExitStatus) -> anyhow::Result<ExitCode> {
    let process = cfg.env.iter().find(|(k, _)| *k == holdup_coz::env::PROCESS);
    report_written(
        &cfg.output,
        output,
        status,
        process.map(|(_, p)| p.as_str()),
    )
}

/// The same for any run, from the output as written (`path` names it):
/// `process` is the --process name, if any.
fn report_written(
    path: &Path,
    output: &File,
    status: ExitStatus,
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
        ExitStatus::Signal(sig) => {
            eprintln!(
                "holdup causal: the program was killed by {}; {name} keeps the {n} experiments done so far",
                launch::signal_name(sig)
            );
            return Ok(ExitCode::from((128 + sig).clamp(0, 255) as u8));
        }
        ExitStatus::Code(c) if c != 0 => {
            eprintln!(
                "holdup causal: the program exited with status {c}; {name} has {n} experiments"
            );
            return Ok(ExitCode::from(c.clamp(0, 255) as u8));
        }
        _ => {}
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
        let target = holdup_coz::target::Target::Process(p.to_string()).to_string();
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("holdup-causal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn only_a_library_that_others_cannot_change_is_preloaded_and_by_its_real_path() {
        let dir = scratch("preload");
        let lib = dir.join("libholdup_causal.so");
        std::fs::write(&lib, b"\x7fELF").unwrap();
        chmod(&lib, 0o644);
        let real = lib.canonicalize().unwrap();
        assert_eq!(preloadable(&lib).unwrap(), real.to_str().unwrap());
        // Through a link or a roundabout path: the real one.
        let link = dir.join("link.so");
        std::os::unix::fs::symlink(&lib, &link).unwrap();
        assert_eq!(preloadable(&link).unwrap(), real.to_str().unwrap());
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let roundabout = dir.join("sub/../libholdup_causal.so");
        assert_eq!(preloadable(&roundabout).unwrap(), real.to_str().unwrap());
        // Writable by the group or by anyone.
        for mode in [0o664, 0o646, 0o666] {
            chmod(&lib, mode);
            let e = preloadable(&lib).unwrap_err().to_string();
            assert!(e.contains("can be changed by other users"), "{mode:o}: {e}");
        }
        chmod(&lib, 0o644);
        // A path LD_PRELOAD would split.
        for name in ["with space", "with:colon"] {
            let sub = dir.join(name);
            std::fs::create_dir_all(&sub).unwrap();
            let odd = sub.join("libholdup_causal.so");
            std::fs::copy(&lib, &odd).unwrap();
            let e = preloadable(&odd).unwrap_err().to_string();
            assert!(e.contains("a space or a colon"), "{e}");
        }
        // Another user's library, when root runs holdup.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&lib, Some(65534), None).unwrap();
            let e = preloadable(&lib).unwrap_err().to_string();
            assert!(e.contains("belongs to uid 65534"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_profile_is_private_and_never_written_through_a_link() {
        let dir = scratch("output");
        let out = dir.join("profile.coz");
        let f = create_output(&out, false).unwrap();
        assert_eq!(f.metadata().unwrap().mode() & 0o777, 0o600);
        drop(f);
        // An existing file of ours: emptied and made private, or kept with
        // --append.
        std::fs::write(&out, b"old\n").unwrap();
        chmod(&out, 0o644);
        let f = create_output(&out, true).unwrap();
        assert_eq!(f.metadata().unwrap().len(), 4);
        assert_eq!(f.metadata().unwrap().mode() & 0o777, 0o600);
        drop(f);
        assert_eq!(
            create_output(&out, false)
                .unwrap()
                .metadata()
                .unwrap()
                .len(),
            0
        );
        // A link put where the profile goes: refused, its target untouched.
        let target = dir.join("precious");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.join("link.coz");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for append in [false, true] {
            let e = format!("{:#}", create_output(&link, append).unwrap_err());
            assert!(e.contains("is a symbolic link"), "{e}");
        }
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        // Not a regular file.
        let e = format!("{:#}", create_output(&dir, false).unwrap_err());
        assert!(
            e.contains("not a regular file") || e.contains("cannot write"),
            "{e}"
        );
        // Another user's file, when root runs holdup: never written into;
        // appending to it is refused, a new profile replaces it.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&target, Some(65534), None).unwrap();
            let e = format!("{:#}", create_output(&target, true).unwrap_err());
            assert!(e.contains("belongs to uid 65534"), "{e}");
            assert_eq!(std::fs::read(&target).unwrap(), b"keep");
            let kept = dir.join("kept");
            std::fs::hard_link(&target, &kept).unwrap();
            let f = create_output(&target, false).unwrap();
            assert_eq!(f.metadata().unwrap().uid(), 0);
            assert_eq!(std::fs::read(&kept).unwrap(), b"keep");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
