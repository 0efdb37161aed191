//! `holdup causal run -a` / `-p PID`: causal profiling of processes that
//! run without our runtime, and of the kernel, with SCOZ's core-level
//! virtual speedups.
//!
//! Nothing is loaded into the programs. The recorder samples them; this
//! process turns each sample into its targets (`targets`), counts it
//! (`tally`), runs COZ's experiments, and, when a sample of the core it ran
//! on is in the experiment's target, credits that core and raises the
//! global delay that every other core's handler thread then spins off
//! (`handlers`, and `cores.bpf.c` for idle cores). Progress is counted
//! with uprobes.

use super::handlers::Handlers;
use super::interpreters::Interpreters;
use super::probes::{self, Probe};
use super::tally::{self, Tally};
use super::targets::{Hit, Resolver};
use super::visits::Watch;
use super::{create_output, start_recorder, Config, Outcome};
use crate::launch;
use crate::recording::{alive, Flow, Recording, Until};
use anyhow::{bail, Context};
use holdup_bpf::cores::{CoreDelays, Cores};
use holdup_bpf::progress::Counted;
use holdup_bpf::records::{RawRecord, RawSample, SF_BLOCKED_TAIL};
use holdup_bpf::Recorder;
use holdup_coz::experiment::{self, Rng, Window, COOL_OFF_NS};
use holdup_coz::points::{points_of, Crowding};
use holdup_coz::profile::{self, PointCounts};
use holdup_coz::target::{Subclass, Target};
use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How often samples are drained and the experiment looked at.
const TICK_NS: u64 = 2_000_000;

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
    tally: Tally,
    /// The --line / --subclass / --process target, by (a suffix of) its
    /// name, and its id once a sample was in it.
    fixed: Option<String>,
    fixed_id: Option<u32>,
    speedup: Option<u64>,
    period_ns: u64,
    length_ns: u64,
    min_length_ns: u64,
    experiments: u64,
    out: File,
    verbose: bool,
    python: Interpreters,
    /// How much the profiled threads wait for a CPU when runnable.
    crowd: Crowding,
}

impl Run {
    fn new(cfg: &Config, cores: Cores, cpus: Vec<usize>, out: File) -> Run {
        let mut resolver = Resolver::new(cfg.scope.clone(), cfg.granularity, true);
        let io = resolver.names.id(Target::Subclass(Subclass::Io));
        let sched = resolver.names.id(Target::Subclass(Subclass::Sched));
        let rng = Rng::from_seed(holdup_bpf::monotonic_ns() ^ std::process::id() as u64);
        Run {
            resolver,
            hit: Hit::default(),
            cores,
            cpus,
            state: State::WaitTarget,
            tally: Tally::new(rng, io, sched),
            fixed: fixed_target(cfg),
            fixed_id: None,
            speedup: cfg.speedup.map(u64::from),
            period_ns: cfg.period_ns,
            length_ns: cfg.experiment_ms * 1_000_000,
            min_length_ns: cfg.experiment_ms * 1_000_000,
            experiments: 0,
            out,
            verbose: cfg.verbose,
            python: Interpreters::default(),
            crowd: Crowding::default(),
        }
    }

    /// One sample of any class: its targets, points and credit.
    fn sample(&mut self, s: &RawSample<'_>) {
        if s.rec.flags & SF_BLOCKED_TAIL != 0 {
            return;
        }
        self.crowd.see(&s.rec);
        let pts = points_of(&s.rec, 0, &self.crowd);
        if pts.line + pts.io + pts.sched == 0 {
            return;
        }
        let now = holdup_bpf::monotonic_ns();
        let mut hit = std::mem::take(&mut self.hit);
        self.resolver.resolve(s, now, &mut hit);
        let on_cpu = s.is_on_cpu();
        if !on_cpu {
            // A process is its threads' on-CPU time.
            hit.process = None;
        }
        let running = match &self.state {
            State::Running(r) => Some(tally::Running {
                target: r.target,
                delay_ns: r.delay_ns,
            }),
            _ => None,
        };
        let cpu = s.rec.cpu as usize;
        if let Some((w, credit)) = self.tally.sample(&hit, pts, cpu, on_cpu, running) {
            if let State::Running(r) = &mut self.state {
                r.selected += w;
            }
            if credit.delay_ns > 0 && credit.on_cpu {
                self.cores.credit(credit.cpu, credit.delay_ns);
            } else if credit.delay_ns > 0 {
                self.cores.credit_wait(credit.cpu, credit.delay_ns);
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
        self.tally.choice.next()
    }

    fn start(&mut self, target: u32, probes: &[Probe]) {
        let speedup_pct = self
            .speedup
            .unwrap_or_else(|| experiment::draw_speedup(&mut self.tally.choice.rng));
        let counts: Vec<(usize, usize)> = probes.iter().map(Probe::counts).collect();
        // Running cores start even; idle ones keep what post_idle settles.
        self.cores.settle_running(&self.cpus);
        self.cores
            .set_io_target(target == self.tally.io && speedup_pct > 0);
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
            if let Some(visits) = p.visits() {
                w.observe(now, visits, global);
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
            target: self.resolver.names.target(r.target),
            speedup_pct: r.speedup_pct,
            elapsed_ns: end_ns - r.start_ns,
            delay_ns: self.cores.global() - r.global,
            selected_samples: r.selected,
            program_samples: None,
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

    /// The state machine's step at `now`.
    fn step(&mut self, now: u64, probes: &[Probe]) -> std::io::Result<()> {
        self.observe(probes);
        let due = match &self.state {
            State::WaitTarget => true,
            State::Running(r) => now >= r.until_ns,
            State::CoolOff(until) => now >= *until,
        };
        if due {
            match self.state {
                State::WaitTarget => {
                    if let Some(t) = self.next_target() {
                        self.start(t, probes);
                    }
                }
                State::Running(_) => self.end(probes)?,
                State::CoolOff(_) => self.state = State::WaitTarget,
            }
        }
        Ok(())
    }

    /// Sample points per target, for the report's sample counts.
    fn write_samples(&mut self, elapsed_ns: u64) -> std::io::Result<()> {
        let mut text = profile::runtime(elapsed_ns);
        let mut points: Vec<(&str, u64)> = self
            .tally
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

    fn drain(&mut self, rec: &mut Recorder) {
        rec.drain_records(|raw| match raw {
            RawRecord::Sample(s) => self.sample(s),
            RawRecord::Exec(e) => self.resolver.forget(e.pid),
            RawRecord::PyCode(c) => self.resolver.code(c),
            RawRecord::Fork(f) => self.python.fork(f),
            _ => {}
        });
        self.python.update(rec);
    }
}

/// `-p`'s list: running processes' ids.
pub fn parse_pids(list: &str) -> anyhow::Result<Vec<u32>> {
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

/// The online CPUs that core-level delays can hold.
fn delay_cpus() -> anyhow::Result<Vec<usize>> {
    Ok(holdup_bpf::perf::online_cpus()
        .context("cannot list the online CPUs")?
        .into_iter()
        .map(|c| c as usize)
        .filter(|&c| c < holdup_bpf::cores::MAX_CORES)
        .collect())
}

pub fn run(cfg: &Config, pids: &[u32], duration: Option<Duration>) -> anyhow::Result<Outcome> {
    let program = match (cfg.command.first(), pids.first()) {
        (Some(c), _) => launch::resolve_program(c),
        (None, Some(pid)) => std::fs::read_link(format!("/proc/{pid}/exe")).ok(),
        (None, None) => None,
    };
    let counted = if pids.is_empty() {
        Counted::All
    } else {
        Counted::Tracked
    };
    let probes = probes::open(cfg, program.as_deref(), counted)?;
    for &pid in pids {
        probes::track(&probes, pid)?;
    }
    let mut watch = Watch::new(&probes, program.clone());
    if probes.is_empty() {
        bail!("-a and -p need a progress point counted without recompiling: --progress SYMBOL|FILE:LINE or --latency BEGIN,END");
    }
    let out = create_output(&cfg.output, cfg.append)?;
    let cpus = delay_cpus()?;
    let delays = CoreDelays::start().context("loading the core-delay programs")?;
    let traced = if pids.is_empty() {
        holdup_bpf::Target::All
    } else {
        holdup_bpf::Target::Pids(pids.to_vec())
    };
    let mut rec = start_recorder(traced, cfg.period_ns, true, true)?;
    let handlers = Handlers::start(delays.cores, &cpus)?;

    let mut run = Run::new(cfg, delays.cores, cpus, out);
    if pids.is_empty() {
        run.python.every_existing();
    }
    for &pid in pids {
        run.python.existing(pid);
    }
    run.python.update(&mut rec);
    if run
        .fixed
        .as_deref()
        .is_some_and(|t| matches!(Target::parse(t), Ok(Target::Kernel(_))))
        && !run.resolver.has_kernel()
    {
        bail!("kernel targets need /proc/kallsyms with addresses (run as root)");
    }
    let pid = pids.first().copied().unwrap_or(0);
    let startup = profile::startup(profile::unix_ns(), pid, cfg.period_ns);
    run.out.write_all(startup.as_bytes())?;

    let until = Until {
        duration,
        pids: pids.to_vec(),
    };
    let mut recording = Recording::launch(&cfg.command, until)?;
    if let Some(pid) = recording.pid() {
        rec.track(pid)?;
        probes::track(&probes, pid)?;
    }
    recording.start()?;
    watch.started(recording.pid().or(pids.first().copied()), recording.pid());
    let t0 = holdup_bpf::monotonic_ns();
    let stop = recording.run(Duration::from_nanos(TICK_NS), &[], || {
        run.drain(&mut rec);
        run.step(holdup_bpf::monotonic_ns(), &probes)?;
        watch.check(&probes)?;
        handlers.wake_owing();
        Ok(Flow::Continue)
    })?;
    run.drain(&mut rec);
    // The last experiment is cut short; its numbers still hold (COZ
    // writes it too).
    run.end(&probes)?;
    let spun = handlers.spun.load(Ordering::Relaxed);
    drop(handlers);
    run.write_samples(holdup_bpf::monotonic_ns() - t0)?;
    let elapsed = holdup_bpf::monotonic_ns() - t0;
    let runtime = profile::runtime_end(elapsed, probes.len(), run.experiments);
    run.out.write_all(runtime.as_bytes())?;
    let lost = rec.lost().total();
    if lost > 0 {
        eprintln!("holdup causal: {lost} samples lost (the ring buffer was full)");
    }
    if run.verbose {
        say_delays(&run, spun);
    }
    run.python.finish();
    say_without_lines(&run.resolver, program.as_deref());
    drop(rec);
    if let (Some(spec), None) = (&run.fixed, run.fixed_id) {
        bail!("no sample of the profiled processes was in {spec} (a line is FILE:LINE or BINARY:FILE:LINE, a function BINARY:FUNCTION, a kernel function kernel:NAME, a process process:COMM)");
    }
    // Stopped by the duration: the command runs on, untraced, to its end.
    let status = stop.status().or_else(|| recording.wait_untraced());
    Ok(Outcome {
        output: run.out,
        status,
    })
}

/// --verbose: where the delay went.
fn say_delays(run: &Run, spun: u64) {
    let skipped: u64 = run
        .cpus
        .iter()
        .filter_map(|&c| run.cores.core(c))
        .map(|c| c.skipped.load(Ordering::Relaxed))
        .sum();
    eprintln!(
        "holdup causal: {} sample points; delays: {} ms inserted, {} ms spun by the handlers, {} ms skipped by idle cores",
        run.tally.samples,
        run.cores.global() / 1_000_000,
        spun / 1_000_000,
        skipped / 1_000_000
    );
}

/// The profiled program with neither lines nor symbols. Other programs (with -a,
/// every one on the system) are not the user's to rebuild.
fn say_without_lines(resolver: &Resolver, program: Option<&Path>) {
    let wanted = |p: &String| program.is_some_and(|w| w == Path::new(p.as_str()));
    for path in resolver.without_lines.iter().filter(|p| wanted(p)) {
        eprintln!("holdup causal: {path} has no line table and no symbol table: none of its code can be a target");
    }
}

/// The one target of --line / --subclass / --process, by (a suffix of)
/// its name.
fn fixed_target(cfg: &Config) -> Option<String> {
    if let Some(p) = &cfg.process {
        return Some(Target::Process(p.clone()).to_string());
    }
    match cfg.subclass {
        Some(s) => Some(Target::Subclass(s).to_string()),
        None => cfg.line.clone(),
    }
}
