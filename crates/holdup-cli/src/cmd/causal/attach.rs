//! `holdup causal run -a` / `-p PID`: causal profiling of processes that
//! run without our runtime, and of the kernel, with SCOZ's core-level
//! virtual speedups.
//!
//! Nothing is loaded into the programs. The recorder samples them; this
//! process turns each on-CPU sample into its targets (`targets`), runs
//! COZ's experiments, and, when a sample of the core it ran on is in the
//! experiment's target, credits that core and raises the global delay
//! that every other core's handler thread then spins off (`handlers`,
//! and `cores.bpf.c` for idle cores). Progress is counted with uprobes.

use super::handlers::Handlers;
use super::targets::{Hit, Resolver};
use super::{open_counter, RunArgs};
use anyhow::{bail, Context};
use holdup_bpf::cores::{CoreDelays, Cores};
use holdup_bpf::records::{RawRecord, RawSample, SF_BLOCKED_TAIL};
use holdup_bpf::Recorder;
use holdup_coz::experiment::{self, Rng, Window, COOL_OFF_NS};
use holdup_coz::points::points_of;
use holdup_coz::profile::{self, PointCounts};
use holdup_coz::target::{Subclass, Target};
use holdup_record::launch::{self, ExitStatus};
use holdup_record::session::{catch_signals, SIGNALS};
use std::collections::HashMap;
use std::io::Write as _;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

/// How often samples are drained and the experiment looked at.
const TICK_NS: u64 = 2_000_000;
/// How often the -p processes are checked for having exited.
const ALIVE_CHECK_NS: u64 = 100_000_000;
/// A new target is a whole process about once in this many experiments,
/// when more than one process runs (SCOZ's process targets).
const PROCESS_TARGET_ONE_IN: u64 = 8;
/// Whole processes are offered only while at least two of them each had
/// 1/PROCESS_SHARE of the on-CPU samples since the last experiment began.
/// With one (a single program under -a, beside daemons that barely run),
/// `process:NAME` is the whole program: its answer is known without an
/// experiment, and its delays (every core, all the time) are the dearest.
const PROCESS_SHARE: u64 = 16;

/// A progress point counted by uprobes in every process.
enum Probe {
    Throughput {
        name: String,
        fds: Vec<OwnedFd>,
    },
    Latency {
        name: String,
        begin: Vec<OwnedFd>,
        end: Vec<OwnedFd>,
    },
}

fn read_count(fds: &[OwnedFd]) -> usize {
    holdup_bpf::counter_total(fds.iter().map(AsRawFd::as_raw_fd))
}

impl Probe {
    fn name(&self) -> &str {
        match self {
            Probe::Throughput { name, .. } | Probe::Latency { name, .. } => name,
        }
    }

    /// (visits or arrivals, departures)
    fn counts(&self) -> (usize, usize) {
        match self {
            Probe::Throughput { fds, .. } => (read_count(fds), 0),
            Probe::Latency { begin, end, .. } => (read_count(begin), read_count(end)),
        }
    }
}

struct Running {
    target: u32,
    speedup_pct: u64,
    delay_ns: u64,
    start_ns: u64,
    global: u64,
    selected: u64,
    counts: Vec<(usize, usize)>,
    windows: Vec<Window>,
    until_ns: u64,
}

enum State {
    WaitTarget,
    Running(Box<Running>),
    CoolOff(u64),
}

/// Everything the drain loop updates.
struct Run {
    resolver: Resolver,
    hit: Hit,
    cores: Cores,
    cpus: Vec<usize>,
    state: State,
    rng: Rng,
    /// The weighted reservoir of new targets since the last experiment
    /// began (COZ's choice: the first in-scope frame of a random sample).
    pick: Option<u32>,
    pick_total: u64,
    pick_process: Option<u32>,
    pick_process_total: u64,
    /// On-CPU sample points per process since the last experiment began.
    process_points: HashMap<u32, u64>,
    /// Sample points per target (`samples` records).
    points: HashMap<u32, u64>,
    names_io: u32,
    names_sched: u32,
    fixed: Option<String>,
    fixed_id: Option<u32>,
    speedup: Option<u64>,
    period_ns: u64,
    length_ns: u64,
    min_length_ns: u64,
    experiments: u64,
    samples: u64,
    out: std::fs::File,
    verbose: bool,
}

impl Run {
    /// One sample of any class: its targets and their points (BCOZ: the
    /// off-CPU time of a line is the line's; io and runqueue waits are
    /// the subclasses'; a process is its threads' on-CPU time).
    fn sample(&mut self, s: &RawSample<'_>) {
        if s.rec.flags & SF_BLOCKED_TAIL != 0 {
            return;
        }
        let pts = points_of(&s.rec, 0);
        if pts.line + pts.io + pts.sched == 0 {
            return;
        }
        let now = holdup_bpf::monotonic_ns();
        let mut hit = std::mem::take(&mut self.hit);
        self.resolver.resolve(s, now, &mut hit);
        if !s.is_on_cpu() {
            hit.process = None;
        }
        let (io, sched) = (self.names_io, self.names_sched);
        self.samples += pts.line + pts.io + pts.sched;
        if let State::Running(r) = &mut self.state {
            let w = if r.target == io {
                pts.io
            } else if r.target == sched {
                pts.sched
            } else if hit.contains(r.target) {
                pts.line
            } else {
                0
            };
            if w > 0 {
                r.selected += w;
                let (cpu, delay) = (s.rec.cpu as usize, r.delay_ns * w);
                if delay > 0 && s.is_on_cpu() {
                    self.cores.credit(cpu, delay);
                } else if delay > 0 {
                    self.cores.credit_wait(cpu, delay);
                }
            }
        }
        // COZ offers the sample's first frame in scope. In the kernel that
        // is a helper (memset, a spinlock) more often than not; what one
        // would make faster is a function further down, so any function
        // of the kernel stack is offered, each as likely.
        let first = if hit.kernel.is_empty() {
            hit.lines.first().copied()
        } else {
            Some(hit.kernel[self.rng.below(hit.kernel.len() as u64) as usize])
        };
        // Sample counts: a line's are the samples where it is the first
        // frame in scope (COZ's); a kernel function's, its whole call tree's.
        let counted: &[u32] = if hit.kernel.is_empty() {
            &hit.lines[..hit.lines.len().min(1)]
        } else {
            &hit.kernel
        };
        for (&t, w) in counted
            .iter()
            .map(|t| (t, pts.line))
            .chain([(&io, pts.io), (&sched, pts.sched)])
        {
            if w > 0 {
                *self.points.entry(t).or_default() += w;
            }
        }
        for (t, w) in [
            (first, pts.line),
            (Some(io), pts.io),
            (Some(sched), pts.sched),
        ] {
            let Some(t) = t.filter(|_| w > 0) else {
                continue;
            };
            self.pick_total += w;
            if self.rng.below(self.pick_total) < w {
                self.pick = Some(t);
            }
        }
        if let Some(p) = hit.process {
            *self.process_points.entry(p).or_default() += pts.line;
            self.pick_process_total += pts.line;
            if self.rng.below(self.pick_process_total) < pts.line {
                self.pick_process = Some(p);
            }
        }
        self.hit = hit;
    }

    /// The next experiment's target, if there is one yet.
    fn next_target(&mut self) -> Option<u32> {
        if let Some(spec) = &self.fixed {
            if self.fixed_id.is_none() {
                self.fixed_id = self.resolver.names.find(spec);
            }
            return self.fixed_id;
        }
        let total: u64 = self.process_points.values().sum();
        let sharing = self
            .process_points
            .values()
            .filter(|&&n| n > 0 && n * PROCESS_SHARE >= total)
            .count();
        self.process_points.clear();
        let process = sharing > 1 && self.rng.below(PROCESS_TARGET_ONE_IN) == 0;
        let t = if process {
            self.pick_process.or(self.pick)
        } else {
            self.pick.or(self.pick_process)
        };
        self.pick = None;
        self.pick_total = 0;
        self.pick_process = None;
        self.pick_process_total = 0;
        t
    }

    fn start(&mut self, target: u32, probes: &[Probe]) {
        let speedup_pct = self
            .speedup
            .unwrap_or_else(|| experiment::draw_speedup(&mut self.rng));
        let counts: Vec<(usize, usize)> = probes.iter().map(Probe::counts).collect();
        // Running cores start even; idle ones keep what post_idle settles.
        self.cores.settle_running(&self.cpus);
        self.cores
            .set_io_target(target == self.names_io && speedup_pct > 0);
        let start_ns = holdup_bpf::monotonic_ns();
        self.state = State::Running(Box::new(Running {
            target,
            speedup_pct,
            delay_ns: self.period_ns * speedup_pct / 100,
            start_ns,
            global: self.cores.global(),
            selected: 0,
            windows: counts.iter().map(|c| Window::new(c.0)).collect(),
            counts,
            until_ns: start_ns + self.length_ns,
        }));
    }

    fn observe(&mut self, probes: &[Probe]) {
        let State::Running(r) = &mut self.state else {
            return;
        };
        let (now, global) = (holdup_bpf::monotonic_ns(), self.cores.global());
        for (w, p) in r.windows.iter_mut().zip(probes) {
            if let Probe::Throughput { fds, .. } = p {
                w.observe(now, read_count(fds), global);
            }
        }
    }

    fn end(&mut self, probes: &[Probe]) -> std::io::Result<()> {
        self.observe(probes);
        let State::Running(r) = std::mem::replace(&mut self.state, State::WaitTarget) else {
            return Ok(());
        };
        self.cores.set_io_target(false);
        let end_ns = holdup_bpf::monotonic_ns();
        let target = self.resolver.names.target(r.target);
        let counts = probes
            .iter()
            .zip(&r.counts)
            .zip(&r.windows)
            .map(|((p, &before), window)| PointCounts {
                name: p.name(),
                latency: matches!(p, Probe::Latency { .. }),
                before,
                after: p.counts(),
                window: Some(window),
            });
        let (text, min_delta) = profile::Experiment {
            target,
            speedup_pct: r.speedup_pct,
            elapsed_ns: end_ns - r.start_ns,
            delay_ns: self.cores.global() - r.global,
            selected_samples: r.selected,
        }
        .records(counts);
        self.out.write_all(text.as_bytes())?;
        if self.verbose {
            eprintln!("{}", text.lines().next().unwrap_or(""));
        }
        self.experiments += 1;
        self.length_ns = experiment::next_length(self.length_ns, self.min_length_ns, min_delta);
        self.state = State::CoolOff(end_ns + COOL_OFF_NS);
        Ok(())
    }

    /// Sample points per target, for the report's sample counts.
    fn write_samples(&mut self, elapsed_ns: u64) -> std::io::Result<()> {
        let mut text = profile::runtime(elapsed_ns);
        let mut points: Vec<(&str, u64)> = self
            .points
            .iter()
            .map(|(&id, &n)| (self.resolver.names.name(id), n))
            .collect();
        points.sort();
        for (name, count) in points {
            text.push_str(&profile::samples(name, count, None));
        }
        self.out.write_all(text.as_bytes())
    }
}

fn parse_pids(list: &str) -> anyhow::Result<Vec<u32>> {
    let mut pids = Vec::new();
    for p in list.split(',').filter(|p| !p.is_empty()) {
        let pid: u32 =
            p.trim().parse().ok().filter(|&n| n > 0).with_context(|| {
                format!("-p takes process ids, like 1234,1240: '{p}' is not one")
            })?;
        if !alive(pid) {
            bail!("no process with pid {pid}");
        }
        pids.push(pid);
    }
    if pids.is_empty() {
        bail!("-p takes process ids, like 1234,1240");
    }
    Ok(pids)
}

/// Running, not gone nor a zombie (whose parent has not waited for it).
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

/// The uprobe progress points, by default in `program`.
fn open_probes(a: &RunArgs, program: Option<&std::path::Path>) -> anyhow::Result<Vec<Probe>> {
    let mut probes = Vec::new();
    for spec in &a.progress {
        probes.push(Probe::Throughput {
            name: spec.clone(),
            fds: open_counter(program, spec, "--progress")?,
        });
    }
    for pair in &a.latency {
        let Some((b, e)) = pair.split_once(',') else {
            bail!("--latency takes BEGIN,END, like 'start_request,finish_request'");
        };
        probes.push(Probe::Latency {
            name: pair.clone(),
            begin: open_counter(program, b, "--latency")?,
            end: open_counter(program, e, "--latency")?,
        });
    }
    if probes.is_empty() {
        bail!("-a and -p need a progress point counted without recompiling: --progress SYMBOL|FILE:LINE or --latency BEGIN,END");
    }
    Ok(probes)
}

pub fn attach_run(a: &RunArgs, output: PathBuf) -> anyhow::Result<std::process::ExitCode> {
    let pids = match &a.pid {
        Some(list) => parse_pids(list)?,
        None => Vec::new(),
    };
    let program = match (a.command.first(), pids.first()) {
        (Some(c), _) => holdup_record::launch::resolve_program(c),
        (None, Some(pid)) => std::fs::read_link(format!("/proc/{pid}/exe")).ok(),
        (None, None) => None,
    };
    let probes = open_probes(a, program.as_deref())?;
    let out = super::create_output(&output, a.append)?;
    let cpus: Vec<usize> = holdup_bpf::perf::online_cpus()
        .context("cannot list the online CPUs")?
        .into_iter()
        .map(|c| c as usize)
        .filter(|&c| c < holdup_bpf::cores::MAX_CORES)
        .collect();
    let delays = CoreDelays::start().context("loading the core-delay programs")?;
    let period_ns = 1_000_000_000 / a.freq;
    let target = if a.all_cpus {
        holdup_bpf::Target::All
    } else {
        holdup_bpf::Target::Pids(pids.clone())
    };
    let mut rec = super::start_recorder(target, period_ns, true, true)?;
    let handlers = Handlers::start(delays.cores, &cpus)?;

    let mut resolver = Resolver::new(a.scope.clone(), true);
    let names_io = resolver.names.id(Target::Subclass(Subclass::Io));
    let names_sched = resolver.names.id(Target::Subclass(Subclass::Sched));
    let mut run = Run {
        resolver,
        names_io,
        names_sched,
        hit: Hit::default(),
        cores: delays.cores,
        cpus,
        state: State::WaitTarget,
        rng: Rng::from_seed(holdup_bpf::monotonic_ns() ^ std::process::id() as u64),
        pick: None,
        pick_total: 0,
        pick_process: None,
        pick_process_total: 0,
        process_points: HashMap::new(),
        points: HashMap::new(),
        fixed: fixed_target(a),
        fixed_id: None,
        speedup: a.speedup.map(u64::from),
        period_ns,
        length_ns: a.experiment_ms * 1_000_000,
        min_length_ns: a.experiment_ms * 1_000_000,
        experiments: 0,
        samples: 0,
        out,
        verbose: a.verbose,
    };
    if run
        .fixed
        .as_deref()
        .is_some_and(|t| matches!(Target::parse(t), Ok(Target::Kernel(_))))
        && !run.resolver.has_kernel()
    {
        bail!("kernel targets need /proc/kallsyms with addresses (run as root)");
    }
    let startup = profile::startup(
        profile::unix_ns(),
        pids.first().copied().unwrap_or(0),
        period_ns,
    );
    run.out.write_all(startup.as_bytes())?;

    let child = if a.command.is_empty() {
        None
    } else {
        let mut child = launch::spawn_held(&a.command)?;
        rec.track(child.pid as u32)?;
        child.release()?;
        Some(child)
    };
    catch_signals();
    let t0 = holdup_bpf::monotonic_ns();
    let deadline = a.duration.map(|s| t0 + s * 1_000_000_000);
    let mut next_alive_check = t0 + ALIVE_CHECK_NS;
    let mut exited = None;
    loop {
        std::thread::sleep(std::time::Duration::from_nanos(TICK_NS));
        drain(&mut rec, &mut run);
        let now = holdup_bpf::monotonic_ns();
        run.observe(&probes);
        let due = match &run.state {
            State::WaitTarget => true,
            State::Running(r) => now >= r.until_ns,
            State::CoolOff(until) => now >= *until,
        };
        if due {
            match run.state {
                State::WaitTarget => {
                    if let Some(t) = run.next_target() {
                        run.start(t, &probes);
                    }
                }
                State::Running(_) => run.end(&probes)?,
                State::CoolOff(_) => run.state = State::WaitTarget,
            }
        }
        handlers.wake_owing();
        if SIGNALS.load(Ordering::Acquire) > 0 || deadline.is_some_and(|d| now >= d) {
            break;
        }
        if let Some(c) = &child {
            if let Some(s) = c.wait(false) {
                exited = Some(s);
                break;
            }
        } else if !pids.is_empty() && now >= next_alive_check {
            next_alive_check = now + ALIVE_CHECK_NS;
            if !pids.iter().any(|&p| alive(p)) {
                break;
            }
        }
    }
    drain(&mut rec, &mut run);
    // The last experiment is cut short; its numbers still hold (COZ
    // writes it too).
    run.end(&probes)?;
    let spun = handlers.spun.load(Ordering::Relaxed);
    drop(handlers);
    run.write_samples(holdup_bpf::monotonic_ns() - t0)?;
    let runtime = profile::runtime_end(
        holdup_bpf::monotonic_ns() - t0,
        probes.len(),
        run.experiments,
    );
    run.out.write_all(runtime.as_bytes())?;
    let lost = rec.lost().total();
    if lost > 0 {
        eprintln!("holdup causal: {lost} samples lost (the ring buffer was full)");
    }
    if run.verbose {
        let skipped: u64 = run
            .cpus
            .iter()
            .filter_map(|&c| run.cores.core(c))
            .map(|c| c.skipped.load(Ordering::Relaxed))
            .sum();
        eprintln!(
            "holdup causal: {} sample points; delays: {} ms inserted, {} ms spun by the handlers, {} ms skipped by idle cores",
            run.samples,
            run.cores.global() / 1_000_000,
            spun / 1_000_000,
            skipped / 1_000_000
        );
    }
    // Other programs (with -a, every one on the system) are not the
    // user's to rebuild; the profiled one is.
    let wanted = |p: &String| {
        program
            .as_deref()
            .is_some_and(|w| w == std::path::Path::new(p))
    };
    for path in run.resolver.without_lines.iter().filter(|p| wanted(p)) {
        eprintln!("holdup causal: {path} has no line table in scope; build it with -g");
    }
    drop(rec);
    // Stopped by the duration or by Ctrl-C (which reached the command
    // too): the command runs on, untraced, to its end.
    if let (Some(spec), None) = (&run.fixed, run.fixed_id) {
        bail!("no sample of the profiled processes was in {spec} (a line is FILE:LINE or BINARY:FILE:LINE, a kernel function kernel:NAME, a process process:COMM)");
    }
    let status = match (&child, exited) {
        (_, Some(s)) => s,
        (Some(c), None) => c.wait(true).unwrap_or(ExitStatus::Code(0)),
        (None, None) => ExitStatus::Code(0),
    };
    super::report_written(&output, &run.out, status, None)
}

fn drain(rec: &mut Recorder, run: &mut Run) {
    rec.drain_records(|raw| match raw {
        RawRecord::Sample(s) => run.sample(s),
        RawRecord::Exec(e) => run.resolver.forget(e.pid),
        _ => {}
    });
}

/// The one target of --line / --process, by (a suffix of) its name.
fn fixed_target(a: &RunArgs) -> Option<String> {
    if let Some(p) = &a.process {
        return Some(Target::Process(p.clone()).to_string());
    }
    match a.subclass {
        Some(s) => Some(Target::Subclass(s.into()).to_string()),
        None => a.line.clone(),
    }
}
