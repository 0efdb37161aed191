//! Runs with the runtime preloaded into the command: thread-level (the
//! runtime reads the recorder's ring and writes the profile from inside
//! the command) and `--system` (every process's runtime gets its samples
//! from here and sends its profile records back).

use super::interpreters::Interpreters;
use super::probes::{self, Probe};
use super::system::Forwarder;
use super::visits::Watch;
use super::{create_output, inheritable, preload, start_recorder, Config, Mode, Outcome};
use super::{Traced, RING_BYTES};
use crate::launch::{self, ExitStatus};
use crate::recording::{Flow, Recording, Until};
use anyhow::{bail, Context};
use holdup_bpf::progress::Counted;
use holdup_bpf::Recorder;
use holdup_coz::env as e;
use holdup_coz::target::Target;
use holdup_symbolize::lines::Granularity;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};

/// What the command inherits: the settings the runtime reads, and the
/// uprobe counters they name (kept open until the run ends).
struct Handed {
    env: Vec<(&'static str, String)>,
    probes: Vec<Probe>,
    watch: Watch,
}

fn settings(cfg: &Config, lib: &str) -> anyhow::Result<Handed> {
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(p) if !p.is_empty() => format!("{lib}:{p}"),
        _ => lib.to_string(),
    };
    let mut env = vec![
        ("LD_PRELOAD", preload),
        (e::PARENT, std::process::id().to_string()),
        (e::PERIOD_NS, cfg.period_ns.to_string()),
        (e::EXPERIMENT_MS, cfg.experiment_ms.to_string()),
    ];
    if let Some(s) = &cfg.scope {
        env.push((e::SCOPE, s.clone()));
    }
    if cfg.granularity == Granularity::Function {
        env.push((e::GRANULARITY, "function".into()));
    }
    if let Some(l) = &cfg.line {
        if !matches!(
            Target::parse(l),
            Ok(Target::Line { .. } | Target::Function { .. })
        ) {
            bail!("--line takes FILE:LINE (like work.c:42) or BINARY:FUNCTION (like app:compress)");
        }
        env.push((e::LINE, l.clone()));
    }
    if let Some(s) = cfg.speedup {
        env.push((e::SPEEDUP, s.to_string()));
    }
    if let Some(s) = cfg.subclass {
        env.push((e::SUBCLASS, s.as_str().into()));
    }
    if let Some(p) = &cfg.process {
        if p.is_empty() || p.len() > 15 || p.contains('/') {
            bail!(
                "--process takes a process name (its comm: at most 15 characters), like postgres"
            );
        }
        env.push((e::PROCESS, p.clone()));
    }
    if matches!(
        cfg.mode,
        Mode::Thread {
            end_to_end: true,
            ..
        }
    ) {
        env.push((e::END_TO_END, "1".into()));
    }
    if cfg.verbose {
        env.push((e::VERBOSE, "1".into()));
    }
    let program = cfg.command.first().and_then(|c| launch::resolve_program(c));
    let probes = probes::open(cfg, program.as_deref(), Counted::Tracked)?;
    if !probes.is_empty() {
        env.push((e::PROBES, probes::list(&probes)));
    }
    let watch = Watch::new(&probes, program);
    Ok(Handed { env, probes, watch })
}

/// How often a thread-level run looks at its progress points.
const WATCH_TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// How often it looks for an interpreter the command mapped: its first
/// Python frames are walked from then on.
const MAPS_TICK: std::time::Duration = std::time::Duration::from_millis(10);

/// Ctrl-C reaches the command (same process group); we wait for it. Set
/// after the command is forked, which would inherit ignored signals.
fn leave_signals_to_the_command() {
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
}

pub fn run(cfg: &Config) -> anyhow::Result<Outcome> {
    let lib = preload::runtime_library()?;
    let mut handed = settings(cfg, &lib)?;
    let output = create_output(&cfg.output, cfg.append)?;
    let system = cfg.mode == Mode::System;
    let mut rec = start_recorder(Traced::Pids(Vec::new()), cfg.period_ns, system, false)?;
    for (k, v) in &handed.env {
        std::env::set_var(k, v);
    }
    if system {
        return system_run(cfg, &mut rec, output, &mut handed);
    }
    // The runtime reads the ring and writes the profile from inside the
    // command: give it fds that survive exec (libbpf's and ours are
    // close-on-exec).
    let ring = inheritable(rec.ring_fd())?;
    let profile = inheritable(output.as_fd())?;
    std::env::set_var(e::RING_FD, ring.as_raw_fd().to_string());
    std::env::set_var(e::RING_BYTES, RING_BYTES.to_string());
    std::env::set_var(e::OUTPUT_FD, profile.as_raw_fd().to_string());
    let runs = match cfg.mode {
        Mode::Thread {
            end_to_end: true,
            runs,
        } => runs,
        _ => 1,
    };
    let status = thread_runs(&mut rec, &cfg.command, runs, &mut handed)?;
    drop((ring, profile));
    drop(rec);
    Ok(Outcome {
        output,
        status: Some(status),
    })
}

/// The recording loop of thread-level runs: the command `runs` times,
/// until one fails.
fn thread_runs(
    rec: &mut Recorder,
    command: &[String],
    runs: u32,
    handed: &mut Handed,
) -> anyhow::Result<ExitStatus> {
    let mut last = ExitStatus::Code(0);
    let mut python = Interpreters::default();
    for _ in 0..runs {
        let mut child = launch::spawn_held(command)?;
        leave_signals_to_the_command();
        let pid = child.pid as u32;
        rec.track(pid)?;
        probes::track(&handed.probes, pid)?;
        child.release()?;
        handed.watch.started(Some(pid), Some(pid));
        let mut check_at = std::time::Instant::now() + WATCH_TICK;
        last = loop {
            if let Some(status) = child.wait_for(MAPS_TICK) {
                break status;
            }
            python.update(rec);
            if std::time::Instant::now() < check_at {
                continue;
            }
            check_at += WATCH_TICK;
            if let Err(e) = handed.watch.check(&handed.probes) {
                child.wait(true);
                return Err(e);
            }
        };
        if last != ExitStatus::Code(0) {
            break;
        }
    }
    python.finish();
    Ok(last)
}

/// `--system`: the runtimes get their samples from here and send their
/// profile records back; the command ends the run (processes it left
/// behind are not waited for).
fn system_run(
    cfg: &Config,
    rec: &mut Recorder,
    output: File,
    points: &mut Handed,
) -> anyhow::Result<Outcome> {
    let (mut fwd, handed) = Forwarder::new(rec.ring_fd(), RING_BYTES as u64, output)?;
    for (k, v) in &handed.env {
        std::env::set_var(k, v);
    }
    let status = system_loop(rec, &cfg.command, &mut fwd, handed, points)?;
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
    Ok(Outcome { output, status })
}

/// The recording loop of `--system`: forward samples and records until
/// the command ends (or a second Ctrl-C).
fn system_loop(
    rec: &mut Recorder,
    command: &[String],
    fwd: &mut Forwarder,
    handed: super::system::Handed,
    points: &mut Handed,
) -> anyhow::Result<Option<ExitStatus>> {
    let mut recording = Recording::launch(command, Until::default())?;
    // Only the program holds them now.
    drop(handed);
    if let Some(pid) = recording.pid() {
        rec.track(pid)?;
        probes::track(&points.probes, pid)?;
    }
    recording.start()?;
    points.watch.started(recording.pid(), recording.pid());
    // A copy of the channel, for the loop to wait on while it pumps.
    let channel = fwd
        .channel()
        .try_clone_to_owned()
        .context("cannot wait on the channel")?;
    let ring = rec
        .ring_fd()
        .try_clone_to_owned()
        .context("cannot wait on the ring")?;
    let tick = std::time::Duration::from_millis(1);
    let wake = [ring.as_fd(), channel.as_fd()];
    let mut python = Interpreters::default();
    let stop = recording.run(tick, &wake, || {
        fwd.pump(&mut |f| python.fork(f));
        python.update(rec);
        points.watch.check(&points.probes)?;
        Ok(Flow::Continue)
    })?;
    python.finish();
    Ok(stop.status())
}
