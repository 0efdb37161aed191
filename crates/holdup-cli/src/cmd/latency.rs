//! `holdup latency`: log2 latency histograms of system calls, kernel and
//! user functions and block requests, aggregated in the kernel (OSprof);
//! `report` draws them with their peaks, `diff` compares two recordings.

use anyhow::{bail, Context};
use holdup_analysis::latency as analysis;
use holdup_analysis::syscalls::name as syscall_name;
use holdup_bpf::latency::{
    FNode, HistRow, LatencyOptions, LatencyProbe, UfuncRole, UserFunc, KIND_BLOCK, KIND_KFUNC,
    KIND_LOCK, KIND_SYSCALL, KIND_UFUNC, MAX_FNODES,
};
use holdup_bpf::monotonic_ns;
use holdup_bpf::Target;
use holdup_record::launch::{self, ExitStatus, Launched};
use holdup_record::session::{catch_signals, SIGNALS};
use holdup_symbolize::callgraph::{Follow, Func};
use holdup_trace::latency::{
    read_latency, write_latency, CallPath, CalleeTime, IntervalHistogram, LatencyData, WaitSite,
    LEGACY_CAUSES, OFF_CPU_CAUSES,
};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

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
    pub target: super::record::TargetArgs,
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
        Some(Sub::Report(r)) => report(r),
        Some(Sub::Diff(d)) => diff(d),
        Some(Sub::Explain(e)) => explain(e),
        None => record(a.record),
    }
}

fn load(path: &Path) -> anyhow::Result<LatencyData> {
    let data = read_latency(path)?;
    if data.lost_events > 0 {
        let why = if data.dropped.is_empty() {
            "a kernel map was full".to_string()
        } else {
            let d: Vec<(&str, u64)> = data.dropped.iter().map(|(w, n)| (w.as_str(), *n)).collect();
            holdup_trace::dropped_text(&d)
        };
        eprintln!(
            "holdup: warning: {}: {} events were not counted ({why}); counts are lower bounds",
            path.display(),
            data.lost_events
        );
    }
    Ok(data)
}

fn report(r: ReportArgs) -> anyhow::Result<ExitCode> {
    let data = load(&r.input)?;
    let lapse = match r.time_lapse {
        None => None,
        Some(d) => {
            let interval = Duration::from_nanos(data.interval_ns.max(1));
            if d < interval {
                bail!(
                    "--time-lapse must be at least the recorded interval ({} ms)",
                    interval.as_millis()
                );
            }
            Some((d.as_nanos() / interval.as_nanos()) as u64)
        }
    };
    let mut ops = analysis::operations(&data, lapse);
    if let Some(f) = &r.op {
        ops.retain(|o| o.op.contains(f.as_str()));
        if ops.is_empty() {
            bail!("no operation matching '{f}' in {}", r.input.display());
        }
    }
    let mut out = std::io::stdout().lock();
    if r.json {
        serde_json::to_writer(&mut out, &holdup_render::latency::to_json(&data, &ops))?;
        writeln!(out)?;
    } else {
        out.write_all(holdup_render::latency::render(&data, &ops).as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn diff(d: DiffArgs) -> anyhow::Result<ExitCode> {
    let (a, b) = (load(&d.a)?, load(&d.b)?);
    let diffs = analysis::diff(&a, &b);
    let mut out = std::io::stdout().lock();
    if d.json {
        serde_json::to_writer(&mut out, &holdup_render::latency::diff_to_json(&diffs))?;
        writeln!(out)?;
    } else {
        let name = |p: &Path| p.display().to_string();
        out.write_all(
            holdup_render::latency::render_diff(&name(&d.a), &name(&d.b), &diffs).as_bytes(),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn explain(e: ExplainArgs) -> anyhow::Result<ExitCode> {
    let data = load(&e.input)?;
    let ops = analysis::operations(&data, None);
    let Some(op) = ops
        .iter()
        .find(|o| o.op == e.op && e.pid.is_none_or(|p| p == o.pid))
    else {
        bail!(
            "no operation {}{} in {} (holdup latency report lists them)",
            e.op,
            e.pid.map_or(String::new(), |p| format!(" of pid {p}")),
            e.input.display()
        );
    };
    let Some(mut peaks) = analysis::explain(op, &data) else {
        bail!(
            "{} was recorded without off-CPU causes (by an older holdup); record it again",
            e.input.display()
        );
    };
    if let Some(n) = e.peak {
        if n == 0 || n > peaks.len() {
            bail!(
                "{} has {} peak(s); --peak {n} does not exist",
                op.op,
                peaks.len()
            );
        }
        peaks = vec![peaks.swap_remove(n - 1)];
    }
    let mut out = std::io::stdout().lock();
    if e.json {
        let v = holdup_render::latency::explain_to_json(&data, op, &peaks);
        serde_json::to_writer(&mut out, &v)?;
        writeln!(out)?;
    } else {
        out.write_all(holdup_render::latency::render_explain(op, &peaks).as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Say which timed functions the kernel single-steps the first
/// instruction of: that step comes after the entry probe's time stamp, so
/// it counts in each of their calls (about 19 µs on a test VM, more in a
/// process's first calls).
fn note_single_stepped(funcs: &[UserFunc]) {
    // Each binary is read once: --callees can time dozens of its functions.
    let mut by_binary: BTreeMap<&Path, Vec<&str>> = BTreeMap::new();
    for f in funcs {
        by_binary.entry(&f.binary).or_default().push(&f.symbol);
    }
    let mut stepped = Vec::new();
    for (binary, symbols) in by_binary {
        let flags = holdup_coz::probe::single_stepped(binary, &symbols).unwrap_or_default();
        stepped.extend(
            symbols
                .iter()
                .zip(flags)
                .filter(|(_, s)| *s)
                .map(|(f, _)| *f),
        );
    }
    if !stepped.is_empty() {
        eprintln!(
            "holdup latency: note: the kernel single-steps the first instruction of {} (it emulates only pushes, nops, calls and jumps): each call's time includes that trap (~20 µs on some virtual machines)",
            stepped.join(", ")
        );
    }
}

/// `--func` arguments as (binary, symbol), and the operations of each
/// `--func` that several functions answer to (its overloads: one of them
/// called is enough).
fn user_funcs(a: &RecordArgs) -> anyhow::Result<(Vec<UserFunc>, Vec<Vec<String>>)> {
    let default_binary = || -> anyhow::Result<PathBuf> {
        if let Some(argv0) = a.command.first() {
            return holdup_record::launch::resolve_program(argv0)
                .with_context(|| format!("cannot find program '{argv0}'"));
        }
        if let Some(pid) = a.target.pid.first() {
            return std::fs::read_link(format!("/proc/{pid}/exe"))
                .with_context(|| format!("cannot read the executable of pid {pid}"));
        }
        bail!("--func SYMBOL needs a command or -p PID to find it in; with -a give BINARY:SYMBOL")
    };
    let role = if a.callees > 0 {
        UfuncRole::Root
    } else {
        UfuncRole::Operation
    };
    let (mut funcs, mut overloads) = (Vec::new(), Vec::new());
    for f in &a.funcs {
        let (binary, symbols) = func_spec(f, &default_binary)?;
        if symbols.len() > 1 {
            let readable: Vec<String> = symbols
                .iter()
                .map(|s| holdup_coz::names::readable(s))
                .collect();
            eprintln!(
                "holdup latency: --func {f}: {} functions answer to it (overloads or instantiations), each timed: {}",
                symbols.len(),
                readable.join("; ")
            );
            overloads.push(symbols.iter().map(|s| format!("func:{s}")).collect());
        }
        funcs.extend(symbols.into_iter().map(|symbol| UserFunc {
            binary: binary.clone(),
            symbol,
            role,
        }));
    }
    Ok((funcs, overloads))
}

/// One `--func`: `[BINARY:]FUNCTION`, or `[BINARY:]FILE:LINE` for the
/// function whose code holds that line; as (binary, symbols): a C++ or
/// Rust name without parameters may answer for several functions.
fn func_spec(
    f: &str,
    default_binary: &dyn Fn() -> anyhow::Result<PathBuf>,
) -> anyhow::Result<(PathBuf, Vec<String>)> {
    use holdup_coz::names::{is_file_line, split_binary};
    // BINARY:FILE:LINE, BINARY:FUNCTION; a FILE:LINE alone has one colon,
    // and the `::` of a C++ or Rust name splits nothing.
    let (binary, what) = match split_binary(f, |head| {
        !is_file_line(f) || is_file_line(&f[head.len() + 1..])
    }) {
        Some((bin, rest)) => (PathBuf::from(bin), rest),
        None => (default_binary()?, f),
    };
    if what.is_empty() {
        bail!("--func '{f}': no symbol given");
    }
    if !binary.is_file() {
        bail!("--func '{f}': no such file {}", binary.display());
    }
    let symbols = if is_file_line(what) {
        vec![holdup_coz::probe::function_at(&binary, what)
            .map_err(|e| anyhow::anyhow!("--func {e}"))?]
    } else {
        holdup_coz::probe::functions_named(&binary, what)
            .map_err(|e| anyhow::anyhow!("--func {e}"))?
    };
    Ok((binary, symbols))
}

/// How far, and along what, the ftree goes below each root.
struct Descent<'a> {
    /// Calls timed below the resume path.
    depth: usize,
    follow: Follow,
    /// Calls a recording's samples showed.
    sampled: &'a [(Func, Func)],
    /// Callees to go down through first, one per level, the others left
    /// out (DARC's resume from a previous point).
    resume: &'a [String],
}

/// DARC's ftree below each root in `funcs`: the call paths of its
/// binary's static call graph (and of the samples), along the resume path
/// and then `depth` calls further down (a function already on the path or
/// a root is not entered again). The callees are appended to `funcs` (once
/// each, whatever their number of paths). Returns the tree for the
/// recorder and its description for the file.
fn call_paths(
    funcs: &mut Vec<UserFunc>,
    descent: &Descent<'_>,
) -> anyhow::Result<(Vec<FNode>, Vec<CallPath>)> {
    let Descent {
        depth,
        follow,
        sampled,
        resume,
    } = *descent;
    let levels = resume.len() + depth;
    let roots: Vec<UserFunc> = funcs.clone();
    let (mut tree, mut paths) = (Vec::new(), Vec::new());
    for (root_idx, root) in roots.iter().enumerate() {
        let mut edges =
            holdup_symbolize::callgraph::callees(&root.binary, &root.symbol, levels, follow)
                .map_err(|e| anyhow::anyhow!("--callees: {e}"))?;
        for e in sampled {
            if !edges.contains(e) {
                edges.push(e.clone());
            }
        }
        let op = format!("func:{}", root.symbol);
        let mut add = |parent: Option<u32>, func: usize, name: &str| -> anyhow::Result<u32> {
            if tree.len() >= MAX_FNODES {
                bail!("--callees {depth}: more than {MAX_FNODES} call paths below {}; give a smaller depth", root.symbol);
            }
            let id = tree.len() as u32;
            tree.push(FNode {
                id,
                parent,
                func: func as u32,
            });
            paths.push(CallPath {
                op: op.clone(),
                id,
                parent,
                func: name.to_string(),
            });
            Ok(id)
        };
        let top = add(None, root_idx, &root.symbol)?;
        let start = Func {
            binary: root.binary.clone(),
            symbol: root.symbol.clone(),
        };
        let mut queue = std::collections::VecDeque::from([(top, vec![start])]);
        let mut resumed = 0;
        while let Some((parent, ancestors)) = queue.pop_front() {
            if ancestors.len() > levels {
                continue;
            }
            let caller = ancestors.last().unwrap();
            // On the resume path, its next callee only.
            let next = resume.get(ancestors.len() - 1);
            for (_, callee) in edges.iter().filter(|(c, _)| c == caller) {
                let is = |f: &UserFunc| f.binary == callee.binary && f.symbol == callee.symbol;
                if ancestors.contains(callee)
                    || roots.iter().any(is)
                    || next.is_some_and(|n| *n != callee.symbol)
                {
                    continue;
                }
                resumed = resumed.max(ancestors.len().min(resume.len()));
                let idx = funcs.iter().position(is).unwrap_or_else(|| {
                    funcs.push(UserFunc {
                        binary: callee.binary.clone(),
                        symbol: callee.symbol.clone(),
                        role: UfuncRole::Callee,
                    });
                    funcs.len() - 1
                });
                let id = add(Some(parent), idx, &callee.symbol)?;
                let mut path = ancestors.clone();
                path.push(callee.clone());
                queue.push_back((id, path));
            }
        }
        if resumed < resume.len() {
            let caller = if resumed == 0 {
                &root.symbol
            } else {
                &resume[resumed - 1]
            };
            bail!(
                "--resume: '{}' is not called by '{caller}' (in the code{})",
                resume[resumed],
                if sampled.is_empty() {
                    ""
                } else {
                    " or the samples"
                }
            );
        }
    }
    Ok((tree, paths))
}

/// The calls a recording's samples show below the roots in `funcs`,
/// `depth` levels down, as edges between functions that have a symbol in
/// their file (a uprobe needs one); the others are counted in a warning.
fn sampled_edges(
    trace: &Path,
    funcs: &[UserFunc],
    depth: usize,
) -> anyhow::Result<Vec<(Func, Func)>> {
    let trace = super::input::load_trace(trace)?;
    let same_file = |a: &Path, b: &Path| {
        a == b
            || a.canonicalize()
                .ok()
                .is_some_and(|a| b.canonicalize().ok() == Some(a))
    };
    let edges = holdup_analysis::latency::sampled_calls::sampled_callees(
        &trace,
        |path, name| {
            funcs
                .iter()
                .any(|f| f.symbol == name && same_file(&f.binary, Path::new(path)))
        },
        depth,
    );
    // One path per file, as the static call graph names it: the roots'
    // files as given, the others resolved (a library may be mapped by
    // another path of the same file).
    let as_func = |(path, symbol): (String, String)| {
        let path = PathBuf::from(path);
        let binary = match funcs.iter().find(|u| same_file(&u.binary, &path)) {
            Some(u) => u.binary.clone(),
            None => path.canonicalize().unwrap_or(path),
        };
        Func { binary, symbol }
    };
    let (mut kept, mut dropped) = (Vec::new(), 0);
    for (caller, callee) in edges {
        let (caller, callee) = (as_func(caller), as_func(callee));
        if holdup_symbolize::callgraph::defines_function(&callee.binary, &callee.symbol) {
            kept.push((caller, callee));
        } else {
            dropped += 1;
        }
    }
    if dropped > 0 {
        eprintln!(
            "holdup: warning: --callees-from: {dropped} sampled callees have no symbol in their file and are not timed"
        );
    }
    Ok(kept)
}

/// The wait sites of system calls, their stacks named by the kernel's
/// symbols: leaf first, from the first function below the scheduler.
fn wait_sites(rows: &[holdup_bpf::latency::SiteRow]) -> Vec<WaitSite> {
    const FRAMES: usize = 8;
    let Ok(ksyms) = holdup_symbolize::KernelSymbols::load() else {
        return Vec::new();
    };
    rows.iter()
        .filter_map(|r| {
            let frames: Vec<String> = r
                .stack
                .iter()
                .filter_map(|&ip| ksyms.find(ip).map(|(name, _)| name.to_string()))
                .skip_while(|n| holdup_analysis::symbols::is_scheduler_function(n))
                .take(FRAMES)
                .collect();
            Some(WaitSite {
                op: format!("syscall:{}", syscall_name(r.nr)),
                pid: r.tgid,
                slot: r.slot,
                cause: LEGACY_CAUSES[..OFF_CPU_CAUSES]
                    .get(r.cause as usize)?
                    .to_string(),
                frames,
                count: r.count,
                ns: r.ns,
            })
        })
        .filter(|w| !w.frames.is_empty())
        .collect()
}

/// The names of the kernel's cause columns that took any time (the
/// off-CPU ones always), keeping only those columns in `histograms` and
/// `callees`: most interrupts never run inside a traced call.
fn keep_used_causes(
    device_irqs: &[Option<String>],
    histograms: &mut [IntervalHistogram],
    callees: &mut [CalleeTime],
) -> Vec<String> {
    use holdup_bpf::latency::{
        CAUSES, CAUSE_IRQ_DEV, CAUSE_IRQ_OTHER, CAUSE_IRQ_TIMER, CAUSE_SOFTIRQ,
    };
    let name = |c: usize| -> String {
        match c {
            _ if c < OFF_CPU_CAUSES => LEGACY_CAUSES[c].to_string(),
            CAUSE_IRQ_TIMER => "irq:timer".into(),
            CAUSE_IRQ_OTHER => "irq:other".into(),
            _ if c >= CAUSE_SOFTIRQ => format!(
                "softirq:{}",
                holdup_trace::SOFTIRQ_NAMES
                    .get(c - CAUSE_SOFTIRQ)
                    .unwrap_or(&"?")
            ),
            _ => match device_irqs.get(c - CAUSE_IRQ_DEV) {
                Some(Some(n)) => format!("irq:{n}"),
                _ => "irq:unnamed".into(),
            },
        }
    };
    let used = |c: usize| {
        c < OFF_CPU_CAUSES
            || histograms
                .iter()
                .any(|h| h.cause_ns.get(c).is_some_and(|v| v.iter().any(|&n| n > 0)))
            || callees
                .iter()
                .any(|t| t.cause_ns.get(c).is_some_and(|&n| n > 0))
    };
    let keep: Vec<usize> = (0..CAUSES).filter(|&c| used(c)).collect();
    for h in histograms.iter_mut() {
        h.cause_ns = columns(&h.cause_ns, &keep);
    }
    for t in callees.iter_mut() {
        t.cause_ns = columns(&t.cause_ns, &keep);
    }
    keep.into_iter().map(name).collect()
}

/// The elements of `v` at `keep`.
fn columns<T: Clone>(v: &[T], keep: &[usize]) -> Vec<T> {
    keep.iter().filter_map(|&c| v.get(c).cloned()).collect()
}

/// `block:vda` for a device number as the BPF side packs it (major << 20 | minor).
fn block_name(dev: u32) -> String {
    let (major, minor) = (dev >> 20, dev & 0xfffff);
    std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent"))
        .ok()
        .and_then(|u| {
            u.lines()
                .find_map(|l| l.strip_prefix("DEVNAME=").map(str::to_string))
        })
        .unwrap_or_else(|| format!("{major}:{minor}"))
}

fn op_name(row: &HistRow, opts: &LatencyOptions) -> String {
    match row.kind {
        KIND_SYSCALL => format!("syscall:{}", syscall_name(row.id)),
        KIND_KFUNC => format!(
            "kfunc:{}",
            opts.kfuncs.get(row.id as usize).map_or("?", |s| s.as_str())
        ),
        KIND_UFUNC => format!(
            "func:{}",
            opts.ufuncs
                .get(row.id as usize)
                .map_or("?", |f| f.symbol.as_str())
        ),
        KIND_BLOCK => format!("block:{}", block_name(row.id)),
        KIND_LOCK => "lock".to_string(),
        k => format!("kind{k}:{}", row.id),
    }
}

/// DARC's decision point over the histograms recorded so far: each root
/// (a `--func` function, not a callee) was called in some process, and in
/// every process its peaks have `n` calls each.
fn roots_decided<'a>(rows: impl Iterator<Item = &'a HistRow>, ufuncs: &[UserFunc], n: u64) -> bool {
    let mut hists: HashMap<(u32, u32), analysis::Histogram> = HashMap::new();
    for r in rows.filter(|r| r.kind == KIND_UFUNC) {
        hists
            .entry((r.id, r.tgid))
            .or_default()
            .add(&r.count, &r.ns);
    }
    let called = |id: usize| hists.keys().any(|k| k.0 as usize == id);
    (0..ufuncs.len())
        .filter(|&i| ufuncs[i].role != UfuncRole::Callee)
        .all(called)
        && hists.values().all(|h| analysis::peaks_decided(h, n))
}

/// Wait for a command that runs on after the recording ended; Ctrl-C
/// reaches it too.
fn wait_untraced(l: &Launched) -> Option<ExitStatus> {
    loop {
        if let Some(st) = l.wait_for(Duration::from_millis(200)) {
            return Some(st);
        }
        if SIGNALS.load(Ordering::SeqCst) > 1 {
            return None;
        }
    }
}

fn record(a: RecordArgs) -> anyhow::Result<ExitCode> {
    holdup_record::symbols::find_debug_files_for_specs();
    let (target, duration) = a
        .target
        .resolve(!a.command.is_empty(), ("time", "latency"))?;
    if a.interval < Duration::from_millis(10) {
        bail!("--interval must be at least 10ms");
    }
    let (mut ufuncs, overloads) = user_funcs(&a)?;
    if a.callees > 0 && ufuncs.is_empty() {
        bail!("--callees needs a user function to start from (--func)");
    }
    if a.decision_ops.is_some() && ufuncs.is_empty() {
        bail!("--decision-ops needs a user function whose peaks to decide on (--func)");
    }
    if a.decision_ops == Some(0) {
        bail!("--decision-ops must be at least 1");
    }
    if !a.resume.is_empty() && ufuncs.len() != 1 {
        bail!("--resume follows a path below one root: give exactly one --func");
    }
    let (ftree, fnodes) = if a.callees > 0 {
        let sampled = match &a.callees_from {
            Some(path) => sampled_edges(path, &ufuncs, a.resume.len() + a.callees)?,
            None => Vec::new(),
        };
        let follow = if a.callees_libs {
            Follow::Libraries
        } else {
            Follow::SameFile
        };
        let descent = Descent {
            depth: a.callees,
            follow,
            sampled: &sampled,
            resume: &a.resume,
        };
        call_paths(&mut ufuncs, &descent)?
    } else {
        Default::default()
    };
    let syscalls = a.syscalls || (a.kfuncs.is_empty() && ufuncs.is_empty() && !a.block && !a.lock);
    let mut opts = LatencyOptions {
        target: target.clone(),
        follow_children: true,
        start_ns: 0,
        interval_ns: a.interval.as_nanos() as u64,
        syscalls,
        block: a.block,
        lock: a.lock,
        kfuncs: a.kfuncs.clone(),
        ufuncs,
        ftree,
    };
    note_single_stepped(&opts.ufuncs);
    let mut launched: Option<Launched> = if a.command.is_empty() {
        None
    } else {
        Some(launch::spawn_held(&a.command)?)
    };
    opts.start_ns = monotonic_ns();
    let start_unix_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let probe = LatencyProbe::start(&opts)?;
    if let Target::Pids(pids) = &target {
        for &pid in pids {
            probe.track(pid)?;
        }
    }
    if let Some(l) = &launched {
        probe.track(l.pid as u32)?;
    }
    catch_signals();
    if let Some(l) = &mut launched {
        l.release()?;
    }
    let began = Instant::now();
    let mut exit = None;
    // Finished intervals are moved out of the kernel map as the recording
    // goes, so that a long one does not fill it.
    let mut taken: HashMap<(u32, u16, u32, u32), HistRow> = HashMap::new();
    let take = |taken: &mut HashMap<_, HistRow>, rows: Vec<HistRow>| {
        for r in rows {
            match taken.entry((r.tgid, r.kind, r.id, r.interval)) {
                std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().merge(&r),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(r);
                }
            }
        }
    };
    let mut last_take = Instant::now();
    let mut last_decision = Instant::now();
    let mut decided = false;
    loop {
        if let Some(l) = &launched {
            if let Some(st) = l.wait(false) {
                exit = Some(st);
                break;
            }
        }
        let signals = SIGNALS.load(Ordering::SeqCst);
        // With a command, Ctrl-C reaches it too: wait for it to exit,
        // unless interrupted twice.
        if (launched.is_none() && signals > 0) || signals > 1 {
            break;
        }
        if duration.is_some_and(|d| began.elapsed() >= d) {
            break;
        }
        if last_take.elapsed() >= Duration::from_secs(1) {
            let current = (monotonic_ns() - opts.start_ns) / opts.interval_ns;
            take(
                &mut taken,
                probe.take_before(current.min(u32::MAX as u64) as u32)?,
            );
            last_take = Instant::now();
        }
        if let Some(n) = a.decision_ops {
            if last_decision.elapsed() >= Duration::from_millis(100) {
                let current = probe.read()?;
                let rows = taken.values().chain(&current);
                if roots_decided(rows, &opts.ufuncs, n) {
                    decided = true;
                    break;
                }
                last_decision = Instant::now();
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let duration_ns = monotonic_ns() - opts.start_ns;
    take(&mut taken, probe.read()?);
    let rows: Vec<HistRow> = taken.into_values().collect();
    let callee_rows = probe.callees()?;
    let site_rows = probe.wait_sites()?;
    let comms = probe.comms();
    let dropped: std::collections::BTreeMap<String, u64> = probe
        .lost()
        .into_iter()
        .filter(|&(_, n)| n > 0)
        .map(|(w, n)| (w.to_string(), n))
        .collect();
    let lost_events = dropped.values().sum();
    let device_irqs = probe.device_irqs();
    drop(probe);

    let comm_of = |pid: u32| {
        comms.get(&pid).cloned().unwrap_or_else(|| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|s| s.trim_end().to_string())
                .unwrap_or_else(|_| "?".into())
        })
    };
    let mut histograms: Vec<IntervalHistogram> = rows
        .iter()
        .map(|r| IntervalHistogram {
            op: op_name(r, &opts),
            pid: r.tgid,
            comm: comm_of(r.tgid),
            interval: r.interval,
            count: r.count.to_vec(),
            ns: r.ns.to_vec(),
            cause_ns: r.cause_ns.iter().map(|c| c.to_vec()).collect(),
        })
        .collect();
    histograms.sort_by(|x, y| (x.pid, &x.op, x.interval).cmp(&(y.pid, &y.op, y.interval)));
    let requested: Vec<String> = opts
        .kfuncs
        .iter()
        .map(|k| format!("kfunc:{k}"))
        .chain(
            opts.ufuncs
                .iter()
                .filter(|f| f.role != UfuncRole::Callee)
                .map(|f| format!("func:{}", f.symbol)),
        )
        .collect();
    let mut callees: Vec<CalleeTime> = callee_rows
        .iter()
        .filter_map(|c| {
            Some(CalleeTime {
                op: format!("func:{}", opts.ufuncs.get(c.root as usize)?.symbol),
                pid: c.tgid,
                fnode: c.fnode,
                slot: c.slot,
                calls: c.calls,
                ns: c.ns,
                cause_ns: c.cause_ns.to_vec(),
                largest: c.largest,
                own_largest: c.own_largest,
            })
        })
        .collect();
    let causes = keep_used_causes(&device_irqs, &mut histograms, &mut callees);
    let calls: u64 = histograms.iter().flat_map(|h| &h.count).sum();
    let wait_sites = wait_sites(&site_rows);
    let data = LatencyData {
        holdup_version: env!("CARGO_PKG_VERSION").to_string(),
        command: a.command.clone(),
        start_unix_ns,
        duration_ns,
        interval_ns: opts.interval_ns,
        lost_events,
        dropped,
        requested: requested.clone(),
        histograms,
        fnodes,
        wait_sites,
        callees,
        causes,
        decision_ops: if decided {
            a.decision_ops.unwrap_or(0)
        } else {
            0
        },
    };
    let file = holdup_trace::create_private(&a.output)
        .with_context(|| format!("cannot create {}", a.output.display()))?;
    write_latency(std::io::BufWriter::new(file), &data)
        .with_context(|| format!("writing {}", a.output.display()))?;
    let ops: std::collections::HashSet<(&str, u32)> = data
        .histograms
        .iter()
        .map(|h| (h.op.as_str(), h.pid))
        .collect();
    eprintln!(
        "[ holdup latency: {} operations, {} calls, {} lost events; wrote {} ]",
        ops.len(),
        calls,
        lost_events,
        a.output.display()
    );
    let called = |op: &String| data.histograms.iter().any(|h| &h.op == op);
    if let Some(never) = requested.iter().find(|r| {
        !called(r)
            && !overloads
                .iter()
                .any(|o: &Vec<String>| o.contains(r) && o.iter().any(called))
    }) {
        bail!(
            "{never} was never called during the recording (histograms of the rest are in {})",
            a.output.display()
        );
    }
    if decided {
        if let Some(l) = &launched {
            eprintln!(
                "[ holdup latency: each peak had {} calls; probes removed, the command runs on ]",
                a.decision_ops.unwrap_or(0)
            );
            exit = wait_untraced(l);
        }
    } else if let Some(n) = a.decision_ops {
        eprintln!("holdup: warning: --decision-ops {n}: the recording ended before each peak had {n} calls");
    }
    Ok(match exit {
        Some(ExitStatus::Signal(sig)) => ExitCode::from((128 + sig) as u8),
        Some(ExitStatus::Code(c)) => ExitCode::from(c as u8),
        None => ExitCode::SUCCESS,
    })
}
