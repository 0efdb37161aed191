//! The profiler thread: COZ's experiment loop (pick a target and a speedup,
//! run, measure the progress points, cool off) and the profile it writes.

use crate::clock::{now_ns, seeded_rng, sleep_ns, Rng};
use crate::lines::{self, Locations};
use crate::modules::{Modules, Role};
use crate::processor::{runtime_address, Experiment, Samples, SpeedupTarget};
use crate::progress::{self, Point, Snapshot};
use crate::python::PythonLocs;
use crate::sink::Sink;
use crate::state::State as Shared;
use holdup_coz::experiment::{self, Window, COOL_OFF_NS};
use holdup_coz::profile::{self, PointCounts};
use holdup_coz::scope::{object_in_scope, scope_match};
use holdup_coz::target::{Subclass, Target};
use std::sync::atomic::Ordering;

/// How often the profiler thread drains the ring.
const TICK_NS: u64 = 2_000_000;

/// The profiler thread: runs experiments and writes the profile.
pub struct Profiler {
    rt: &'static Shared,
    samples: &'static Samples,
    out: Option<Sink>,
    start_ns: u64,
    rng: Rng,
    length_ns: u64,
    experiments: u64,
    fixed_line: Option<u32>,
    /// `--line` names no location yet, in an interpreter whose Python
    /// frames become locations as samples bring them: looked up again at
    /// this time.
    fixed_retry_ns: Option<u64>,
    log_countdown: u64,
    log_interval: u64,
}

/// Saved progress counts at an experiment's start.
struct Saved {
    snaps: Vec<Snapshot>,
    start_ns: u64,
    global: u64,
    target: Target,
    speedup_pct: u64,
    windows: Vec<Window>,
}

impl Saved {
    fn observe(&mut self, now: u64, global: u64) {
        let Ok(points) = progress::POINTS.lock() else {
            return;
        };
        for (i, pt) in points.iter().enumerate() {
            if i >= self.windows.len() {
                let base = self.snaps.get(i).map_or(0, |s| s.a);
                self.windows.push(Window::new(base));
            }
            if let Point::Throughput { count, .. } = pt {
                self.windows[i].observe(now, count.load(), global);
            }
        }
    }
}

impl Profiler {
    pub fn new(rt: &'static Shared, samples: &'static Samples) -> Profiler {
        Profiler {
            rt,
            samples,
            out: None,
            start_ns: now_ns(),
            rng: seeded_rng(),
            length_ns: rt.cfg.experiment_ns,
            experiments: 0,
            fixed_line: None,
            fixed_retry_ns: None,
            log_countdown: 16,
            log_interval: 16,
        }
    }

    fn verbose(&self, msg: &str) {
        self.rt.log(msg);
    }

    fn write(&mut self, text: &str) {
        if let Some(out) = self.out.as_mut() {
            out.write(text);
        }
    }

    pub fn run(mut self) {
        let rt = self.rt;
        self.load_lines();
        if let Some(d) = rt.domain {
            // `--system`: follow (process our samples, offer targets) until
            // this process leads; a leader that ended left no experiment.
            while !d.lead(rt.pid as i32) {
                if rt.stopping.load(Ordering::Acquire) {
                    // The leader writes the experiments; every process
                    // adds the sample counts of its own lines.
                    self.samples.process_pending(rt);
                    self.out = Sink::open(rt.channel, rt.cfg.output_fd);
                    self.log_samples();
                    return;
                }
                sleep_ns(TICK_NS);
                self.samples.process_pending(rt);
                self.offer_pick();
            }
            rt.delays.set_active(false);
        }
        self.out = Sink::open(rt.channel, rt.cfg.output_fd);
        if self.out.is_none() {
            eprintln!("holdup causal: no profile was handed over to write; profiling is off");
            return;
        }
        self.write(&profile::startup(
            profile::unix_ns(),
            rt.pid,
            rt.cfg.period_ns,
        ));

        let mut state = State::WaitProgress;
        let mut saved: Option<Saved> = None;
        while !rt.stopping.load(Ordering::Acquire) {
            sleep_ns(TICK_NS);
            self.samples.process_pending(rt);
            if let Some(d) = rt.domain {
                self.offer_pick();
                progress::follow_domain(d);
            }
            let now = now_ns();
            if let Some(s) = saved.as_mut() {
                s.observe(now, rt.global());
            }
            state = match state {
                State::WaitProgress if progress::count() > 0 => State::WaitTarget,
                State::WaitTarget => match self.next_target() {
                    Some((here, target)) => {
                        saved = Some(self.start(here, target));
                        State::Running(now + self.length_ns)
                    }
                    None => State::WaitTarget,
                },
                State::Running(until) if now >= until && !rt.cfg.end_to_end => {
                    if let Some(s) = saved.take() {
                        self.end_experiment(s);
                    }
                    State::CoolOff(now_ns() + COOL_OFF_NS)
                }
                State::CoolOff(until) if now >= until => State::WaitTarget,
                s => s,
            };
        }
        self.samples.process_pending(rt);
        if let Some(s) = saved.take() {
            self.end_experiment(s);
        }
        if let (Some(spec), None, Some(_)) = (&rt.cfg.line, self.fixed_line, self.fixed_retry_ns) {
            eprintln!("holdup causal: {spec} is in no sample of the program's lines, functions or Python frames; no experiments ran");
        }
        self.log_samples();
        if let Ok(p) = self.samples.processor.lock() {
            self.verbose(&format!(
                "{} records, {} samples of the program, {:.1} µs per record",
                p.records,
                p.samples_seen,
                p.busy_ns as f64 / 1e3 / p.records.max(1) as f64
            ));
        }
        let refused = rt.refused.load(Ordering::Relaxed);
        if refused > 0 {
            eprintln!(
                "holdup causal: process {}: {refused} delay payments refused: the shared global delay was more than the program can have reached (a process of the program damaged it)",
                rt.pid
            );
        }
        let elapsed = now_ns() - self.start_ns;
        self.write(&profile::runtime_end(
            elapsed,
            progress::count(),
            self.experiments,
        ));
    }

    fn load_lines(&mut self) {
        let rt = self.rt;
        let t0 = now_ns();
        let mut modules = Modules::load(runtime_address());
        let mut locs = Locations::default();
        let mut tables = Vec::new();
        let scope = rt.cfg.scope.as_deref();
        for m in &mut modules.list {
            if m.role == Role::Runtime || m.path.is_empty() || m.path.starts_with("linux-vdso") {
                continue;
            }
            let is_main = m.role == Role::Main;
            if !object_in_scope(scope, &m.path, is_main) {
                continue;
            }
            let object_matches = scope.is_some_and(|g| scope_match(g, &m.path));
            let keep = |file: &str| match scope {
                None => true,
                Some(g) => object_matches || scope_match(g, file),
            };
            // This process's own objects: the loader's name may be a link
            // (libz.so.1), which the reader does not follow.
            let path = std::fs::canonicalize(&m.path).unwrap_or_else(|_| m.path.clone().into());
            let binary = m.path.rsplit('/').next().unwrap_or(&m.path);
            let table = holdup_symbolize::traced::read(&path)
                .map_err(lines::Error::from)
                .and_then(|data| {
                    lines::targets_from_elf(&data, binary, &mut locs, &keep, rt.cfg.granularity)
                });
            match table {
                Ok((t, _)) if !t.is_empty() => {
                    m.lines = Some(tables.len());
                    tables.push(t);
                }
                Ok(_) if is_main => {
                    eprintln!(
                        "holdup causal: {} has no line table and no symbol table: none of its code can be a target",
                        m.path
                    );
                }
                Ok(_) => {}
                Err(e) => eprintln!("holdup causal: {}: {e}", m.path),
            }
        }
        self.verbose(&format!(
            "{} tables of lines or functions, {} places, in {} ms",
            tables.len(),
            locs.len(),
            (now_ns() - t0) / 1_000_000
        ));
        let Ok(mut p) = self.samples.processor.lock() else {
            return;
        };
        if rt.domain.is_some() {
            p.binary = modules
                .list
                .iter()
                .find(|m| m.role == Role::Main)
                .and_then(|m| m.path.rsplit('/').next())
                .map(str::to_string);
        }
        let interpreter = modules.list.iter().any(|m| m.interpreter);
        p.modules = modules;
        p.forwarding = crate::forwarding_ranges();
        p.forwarding.sort_unstable();
        p.tables = tables;
        p.locs = locs;
        p.python = PythonLocs::new(rt.cfg.scope.clone(), rt.cfg.granularity);
        if let Some(spec) = &rt.cfg.line {
            self.fixed_line = fixed_location(&p, spec);
            self.fixed_retry_ns = (self.fixed_line.is_none() && interpreter).then_some(0);
            if self.fixed_line.is_none() && !interpreter {
                eprintln!("holdup causal: {spec} is not in the program's line or function tables; no experiments will run");
            }
        }
        p.allow_subclasses = rt.cfg.line.is_none() && rt.cfg.process.is_none();
        p.ready = true;
        if std::mem::take(&mut p.modules_stale) {
            p.reload_modules();
        }
    }

    /// The next experiment's target, here (None with `--system`: every
    /// process finds it in its own tables) and by name.
    fn next_target(&mut self) -> Option<(Option<SpeedupTarget>, Target)> {
        let rt = self.rt;
        if let Some(d) = rt.domain {
            let target = match (&rt.cfg.line, rt.cfg.subclass, &rt.cfg.process) {
                (Some(spec), _, _) => Target::parse(spec).ok()?,
                (None, Some(s), _) => Target::Subclass(s),
                (None, None, Some(process)) => Target::Process(process.clone()),
                // Written by some process of the program: a name that is
                // no target is passed over.
                (None, None, None) => Target::parse(&d.take_pick()?).ok()?,
            };
            return Some((None, target));
        }
        let target = if let Some(spec) = &rt.cfg.line {
            match self.fixed_retry_ns {
                Some(at) if self.fixed_line.is_none() && now_ns() >= at => {
                    self.fixed_retry_ns = Some(now_ns() + FIXED_RETRY_NS);
                    self.fixed_line = fixed_location(&*self.samples.processor.lock().ok()?, spec);
                }
                _ => {}
            }
            self.fixed_line.map(SpeedupTarget::Code)
        } else if let Some(s) = rt.cfg.subclass {
            Some(SpeedupTarget::Subclass(s))
        } else {
            let mut p = self.samples.processor.lock().ok()?;
            let t = match p.floor.next() {
                Some(t) => t,
                None => {
                    let drawn = p.pick.take()?;
                    p.floor.instead_of(drawn)
                }
            };
            p.floor.ran(t);
            Some(t)
        }?;
        let name = self.samples.processor.lock().ok()?.target(target);
        Some((Some(target), name))
    }

    /// `--system`: offer the domain the target this process's samples chose.
    fn offer_pick(&mut self) {
        let rt = self.rt;
        let Some(d) = rt.domain else { return };
        let Ok(mut p) = self.samples.processor.lock() else {
            return;
        };
        if let Some(t) = p.pick.take() {
            let w = std::mem::take(&mut p.pick_total);
            d.offer(&p.target(t).to_string(), w, self.rng.next_u64());
        }
    }

    fn start(&mut self, here: Option<SpeedupTarget>, target: Target) -> Saved {
        let rt = self.rt;
        let speedup_pct = match rt.cfg.speedup {
            Some(s) => s as u64,
            None => experiment::draw_speedup(&mut self.rng),
        };
        let delay_ns = rt.cfg.period_ns * speedup_pct / 100;
        let snaps: Vec<Snapshot> = progress::POINTS
            .lock()
            .map(|pts| pts.iter().map(Point::snapshot).collect())
            .unwrap_or_default();
        let global = rt.global();
        // Delays left unpaid by the last experiment must not leak into
        // this one; blocked threads settle theirs in post_block.
        for st in rt.threads.iter() {
            if !st.blocked.load(Ordering::Acquire) {
                st.reset(global);
            }
        }
        let start_ns = now_ns();
        if let Ok(mut p) = self.samples.processor.lock() {
            p.exp = here.map(|target| Experiment {
                target,
                start_ns,
                delay_ns,
                selected: 0,
                program: 0,
            });
            p.pick = None;
            p.pick_total = 0;
        }
        rt.delays.set_delay(delay_ns);
        if let Some(d) = rt.domain {
            // Every process (this one too) takes it up from the domain.
            d.begin(&target.to_string(), start_ns);
        }
        rt.delays.set_active(true);
        let windows = snaps.iter().map(|s| Window::new(s.a)).collect();
        Saved {
            snaps,
            start_ns,
            global,
            target,
            speedup_pct,
            windows,
        }
    }

    fn end_experiment(&mut self, mut s: Saved) {
        let rt = self.rt;
        self.samples.process_pending(rt);
        let end_ns = now_ns();
        let global = rt.global();
        s.observe(end_ns, global);
        let (selected, program) = match self.samples.processor.lock() {
            Ok(mut p) => {
                let (here, program) = p.exp.take().map_or((0, 0), |e| (e.selected, e.program));
                // A domain's processes add up their targets' points, not
                // their programs'.
                match rt.domain {
                    Some(d) => (d.selected.load(Ordering::Acquire), None),
                    None => (here, Some(program)),
                }
            }
            Err(_) => return,
        };
        rt.delays.set_active(false);
        let points = progress::POINTS.lock().unwrap_or_else(|e| e.into_inner());
        let counts = points.iter().enumerate().map(|(i, pt)| {
            let (before, after) = (s.snaps.get(i).copied().unwrap_or_default(), pt.snapshot());
            PointCounts {
                name: pt.name(),
                latency: matches!(pt, Point::Latency { .. }),
                before: (before.a, before.b),
                after: (after.a, after.b),
                window: s.windows.get(i),
            }
        });
        let (text, min_delta) = profile::Experiment {
            target: &s.target,
            speedup_pct: s.speedup_pct,
            elapsed_ns: end_ns - s.start_ns,
            delay_ns: global.saturating_sub(s.global),
            selected_samples: selected,
            program_samples: program,
        }
        .records(counts);
        drop(points);
        self.write(&text);
        self.experiments += 1;
        self.verbose(text.lines().next().unwrap_or(""));
        // Where the delay went: credited by the target's points, paid with
        // sleeps or draining, still owed by each thread (the rest was excused
        // by waits).
        let (paid, credited, runq, drained) = (
            rt.paid.swap(0, Ordering::Relaxed),
            rt.credited.swap(0, Ordering::Relaxed),
            rt.runq_after_sleeps.swap(0, Ordering::Relaxed),
            rt.drained.swap(0, Ordering::Relaxed),
        );
        if rt.cfg.verbose {
            let per_thread: Vec<(i64, u64)> = rt
                .threads
                .iter()
                .map(|t| {
                    (
                        global as i64 - t.local.load(Ordering::Acquire) as i64,
                        t.paid.swap(0, Ordering::Relaxed),
                    )
                })
                .collect();
            self.verbose(&format!(
                "delay credited {credited} ns, paid with sleeps {paid} ns, waited for a CPU after them {runq} ns, paid draining samples before wakeups {drained} ns, (owed, paid) per thread {per_thread:?} ns"
            ));
        }
        // COZ's adaptive length: longer until progress points are seen
        // often enough, shorter again when they are seen plenty.
        self.length_ns = experiment::next_length(self.length_ns, rt.cfg.experiment_ns, min_delta);
        self.log_countdown -= 1;
        if self.log_countdown == 0 {
            self.log_samples();
            self.log_interval = (self.log_interval * 2).min(256);
            self.log_countdown = self.log_interval;
        }
    }

    /// Cumulative sample counts, written now and then so that a profile cut
    /// short still has them; readers keep the last count of each location.
    fn log_samples(&mut self) {
        let mut text = profile::runtime(now_ns() - self.start_ns);
        let pid = Some(self.rt.pid);
        if let Ok(p) = self.samples.processor.lock() {
            let mut locs: Vec<(&u32, &u64)> = p.counts.iter().filter(|(_, &c)| c > 0).collect();
            locs.sort();
            for (&loc, &count) in locs {
                let name = p.target(SpeedupTarget::Code(loc)).to_string();
                text.push_str(&profile::samples(&name, count, pid));
            }
            for (sc, count) in [
                (Subclass::Io, p.io_points),
                (Subclass::Sched, p.sched_points),
            ] {
                if count > 0 {
                    let name = Target::Subclass(sc).to_string();
                    text.push_str(&profile::samples(&name, count, pid));
                }
            }
        }
        self.write(&text);
    }
}

/// How often `--line`'s location is looked up again in a Python program.
const FIXED_RETRY_NS: u64 = 100_000_000;

/// The location of `--line`'s `spec`, if there is one (yet).
fn fixed_location(p: &crate::processor::Processor, spec: &str) -> Option<u32> {
    match p.resolve(spec) {
        Some(SpeedupTarget::Code(l)) => Some(l),
        _ => None,
    }
}

#[derive(Clone, Copy, Debug)]
enum State {
    WaitProgress,
    WaitTarget,
    Running(u64),
    CoolOff(u64),
}
