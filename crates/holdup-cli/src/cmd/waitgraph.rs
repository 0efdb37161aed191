//! `holdup waitgraph`: the wait-for graph, its knots, and the waits that
//! limit throughput (wPerf). Reads the trace twice, streaming, so memory
//! does not grow with its length.

use anyhow::Context;
use holdup_analysis::waitgraph::{
    self, Decoded, Error, Options, Source, Threshold, TraceFile, WaitGraph,
};
use holdup_render::waitgraph::{self as render, DotOptions, TextOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace to read.
    #[arg(short, long, default_value = "holdup.data")]
    pub input: PathBuf,
    /// JSON, schema holdup.waitgraph/1.
    #[arg(long, conflicts_with_all = ["dot", "svg"])]
    pub json: bool,
    /// GraphViz DOT on stdout (knots in red, thin edges dashed).
    #[arg(long, conflicts_with = "svg")]
    pub dot: bool,
    /// Render the graph to this SVG file (needs GraphViz `dot`).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Stop refining a knot once its lightest edge weighs this much: a share
    /// of the recording (`20%`, the default) or a duration (`150ms`, `2s`).
    #[arg(long, default_value = "20%", value_parser = parse_threshold)]
    pub threshold: Threshold,
    /// Keep threads with the same name and similar stacks apart.
    #[arg(long)]
    pub no_merge_similar: bool,
    /// Keep short-lived threads apart (no virtual thread per creator).
    #[arg(long)]
    pub no_merge_short: bool,
    /// Stacks shown per edge in the text output.
    #[arg(long, default_value_t = 3)]
    pub stacks: usize,
    /// Leave out what the waited-for side of each edge did (that needs the
    /// whole trace in memory; without it, memory does not grow with the
    /// trace's length).
    #[arg(long)]
    pub no_holders: bool,
    /// Print the analysis speed and peak memory on stderr.
    #[arg(long, hide = true)]
    pub timing: bool,
    /// Benchmark: decode the whole trace into memory first, then time the
    /// analysis alone, and unless --no-holders each step of what the
    /// waited-for side did (`bench/waitgraph.sh`), in CPU time.
    #[arg(long, hide = true)]
    pub bench_in_memory: bool,
}

/// CPU time of this thread so far: what one step costs, whatever else
/// the machine runs.
fn thread_cpu_s() -> f64 {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn cpu_clock(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a pointer to a timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The least CPU time of `runs` runs of `f` (a busy machine only ever adds
/// to it), with the last run's result.
fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (T, f64) {
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..runs.max(1) {
        let t = thread_cpu_s();
        let r = f();
        best = best.min(thread_cpu_s() - t);
        // Dropped outside the timing, as the command never drops it.
        last = Some(r);
    }
    (last.expect("one run at least"), best)
}

/// Time the analysis alone, on records decoded beforehand; with holders,
/// then each step of what the waited-for side did, on its own: loading the
/// trace, following the waits, the JSON output.
fn bench_in_memory(path: &Path, opts: &Options, holders: bool) -> anyhow::Result<()> {
    const RUNS: usize = 3;
    let mut reader = holdup_trace::Reader::open(path)?;
    let mut records = Vec::new();
    reader.for_each(|r| records.push(r))?;
    let analyze = || {
        let mut src = waitgraph::InMemory {
            header: reader.header.clone(),
            features: reader.features,
            records: &records,
        };
        waitgraph::analyze(&mut src, opts)
    };
    let (g, s) = best_of(RUNS, analyze);
    let g = g?;
    let events = g.events();
    let rate = |s: f64| events as f64 / s.max(1e-9) / 1e6;
    eprintln!(
        "holdup: analysis alone (records in memory): {events} sched events in {s:.3} s: {:.2} M events/s",
        rate(s)
    );
    if !holders {
        return Ok(());
    }
    let (trace, load_s) = best_of(RUNS, || holdup_trace::Trace::load(path));
    let trace = trace.map_err(|e| anyhow::anyhow!("{e}"))?;
    let (held, held_s) = best_of(RUNS, || {
        let mut g = g.clone();
        waitgraph::add_holders(&trace, &mut g);
        g
    });
    let (_, json_s) = best_of(RUNS, || {
        let mut out = Vec::new();
        render::write_json(&mut out, &held).map(|()| out)
    });
    eprintln!(
        "holdup: CPU time of each step alone: trace load {load_s:.3} s ({:.2} M events/s), holders {held_s:.3} s ({:.2} M events/s), JSON output {json_s:.3} s ({:.2} M events/s)",
        rate(load_s),
        rate(held_s),
        rate(json_s)
    );
    Ok(())
}

fn parse_threshold(s: &str) -> Result<Threshold, String> {
    let s = s.trim();
    let bad =
        || format!("'{s}' is not a threshold: use a percentage (20%) or a duration (150ms, 2s)");
    let num = |t: &str| {
        t.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    if let Some(p) = s.strip_suffix('%') {
        return num(p)
            .map(|v| Threshold::Fraction(v / 100.0))
            .ok_or_else(bad);
    }
    for (suffix, scale) in [
        ("ns", 1.0),
        ("us", 1e3),
        ("µs", 1e3),
        ("ms", 1e6),
        ("s", 1e9),
    ] {
        if let Some(v) = s.strip_suffix(suffix) {
            return num(v)
                .map(|v| Threshold::Ns((v * scale) as u64))
                .ok_or_else(bad);
        }
    }
    num(s)
        .map(|v| Threshold::Fraction(v / 100.0))
        .ok_or_else(bad)
}

/// CPU time of the whole process so far (all threads, user + system): a
/// loaded machine stretches wall time, not this.
fn process_cpu_s() -> f64 {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time by step, for `--timing`: each step's, and events per CPU
/// second of each and of the whole.
#[derive(Default)]
struct CpuSteps {
    last: f64,
    steps: Vec<(&'static str, f64)>,
}

impl CpuSteps {
    fn start() -> Self {
        CpuSteps {
            last: process_cpu_s(),
            steps: Vec::new(),
        }
    }

    fn done(&mut self, step: &'static str) {
        let now = process_cpu_s();
        self.steps.push((step, now - self.last));
        self.last = now;
    }

    fn say(&self, events: u64) {
        let rate = |s: f64| events as f64 / s.max(1e-9) / 1e6;
        let total: f64 = self.steps.iter().map(|s| s.1).sum();
        let steps: Vec<String> = self
            .steps
            .iter()
            .map(|(name, s)| format!("{name} {s:.3} s ({:.2} M/s)", rate(*s)))
            .collect();
        eprintln!(
            "holdup: CPU time: {}; in all {total:.3} s: {:.2} M events per CPU second",
            steps.join(", "),
            rate(total)
        );
    }
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The graph of the records `src` hands over.
fn graph(src: &mut dyn Source, a: &Args) -> anyhow::Result<WaitGraph> {
    let opts = options(src, a);
    waitgraph::analyze(src, &opts).map_err(|e| match e {
        Error::Trace(_) | Error::Io { .. } => anyhow::anyhow!("{e}"),
        e => anyhow::anyhow!("{}: {e}", a.input.display()),
    })
}

fn options(src: &dyn Source, a: &Args) -> Options {
    Options {
        threshold: a.threshold,
        merge_similar: !a.no_merge_similar,
        merge_short: !a.no_merge_short,
        device_names: holdup_trace::devices::block_devices_of(src.header()),
        ..Default::default()
    }
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let path: &Path = &a.input;
    // The messages already name the file and the cause: one sentence, no
    // cause chain repeating it.
    let opened = |e: Error| anyhow::anyhow!("{e}");
    if a.bench_in_memory {
        let src = TraceFile::open(path).map_err(opened)?;
        bench_in_memory(path, &options(&src, &a), !a.no_holders)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut cpu = CpuSteps::start();
    let t = Instant::now();
    let mut g;
    if a.no_holders {
        // Streamed: memory does not grow with the trace.
        let mut src = TraceFile::open(path).map_err(opened)?;
        g = graph(&mut src, &a)?;
        cpu.done("graph");
        if let (true, Some(busy)) = (a.timing, src.analysis_time()) {
            let b = busy.as_secs_f64();
            eprintln!(
                "holdup: analysis proper (both passes, without reading and decoding the file): {b:.3} s, {:.2} M events/s",
                g.events() as f64 / b / 1e6
            );
        }
    } else {
        // What the waited-for side did needs the trace whole: the file is
        // decoded once, by the graph's first pass, into the trace.
        let mut src = Decoded::open(path).map_err(opened)?;
        g = graph(&mut src, &a)?;
        cpu.done("read and graph");
        let trace = src.into_trace().map_err(opened)?;
        cpu.done("trace");
        waitgraph::add_holders(&trace, &mut g);
        cpu.done("holders");
    }
    if a.timing {
        let s = t.elapsed().as_secs_f64();
        eprintln!(
            "holdup: analysed {} sched events ({} wait segments) in {:.3} s: {:.2} M events/s, {:.2} M segments/s; peak RSS {:.1} MiB",
            g.events(),
            g.stats.segments,
            s,
            g.events() as f64 / s / 1e6,
            g.stats.segments as f64 / s / 1e6,
            peak_rss_mib()
        );
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let dot_opts = || DotOptions {
        title: format!("holdup waitgraph {}", path.display()),
        ..Default::default()
    };
    if a.json {
        render::write_json(&mut out, &g)?;
        writeln!(out)?;
    } else if a.dot {
        out.write_all(render::to_dot(&g, &dot_opts()).as_bytes())?;
    } else if let Some(svg) = &a.svg {
        let picture = render::to_svg(&render::to_dot(&g, &dot_opts()))
            .with_context(|| format!("cannot render {}", svg.display()))?;
        crate::output::write(svg, picture.as_bytes())?;
    } else {
        let o = TextOptions {
            source: path.display().to_string(),
            stacks: a.stacks,
            ..Default::default()
        };
        render::render(&mut out, &g, &o)?;
    }
    if a.dot || a.svg.is_some() {
        for n in &g.notes {
            eprintln!("holdup: note: {n}");
        }
    }
    out.flush()?;
    if a.timing {
        cpu.done("output");
        cpu.say(g.events());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_parse() {
        assert_eq!(parse_threshold("20%"), Ok(Threshold::Fraction(0.2)));
        assert_eq!(parse_threshold("5"), Ok(Threshold::Fraction(0.05)));
        assert_eq!(parse_threshold("150ms"), Ok(Threshold::Ns(150_000_000)));
        assert_eq!(parse_threshold("2s"), Ok(Threshold::Ns(2_000_000_000)));
        assert_eq!(parse_threshold("10us"), Ok(Threshold::Ns(10_000)));
        assert!(parse_threshold("abc").is_err());
        assert!(parse_threshold("-3%").is_err());
    }
}
