//! COZ's profile: one record per line, `kind` then tab-separated
//! `key=value` fields; and the writer of holdup's records, used by the
//! runtime and by `holdup causal run -a/-p` alike.

use crate::experiment::Window;
use crate::target::Target;
use std::fmt::{Display, Write as _};

/// Record kinds.
pub mod kind {
    pub const STARTUP: &str = "startup";
    pub const EXPERIMENT: &str = "experiment";
    pub const THROUGHPUT_POINT: &str = "throughput-point";
    /// COZ's older name of a throughput point.
    pub const PROGRESS_POINT: &str = "progress-point";
    pub const LATENCY_POINT: &str = "latency-point";
    pub const SAMPLES: &str = "samples";
    pub const RUNTIME: &str = "runtime";
}

/// Field keys.
pub mod key {
    pub const TIME: &str = "time";
    pub const TOOL: &str = "tool";
    pub const PID: &str = "pid";
    pub const PERIOD: &str = "period";
    pub const SELECTED: &str = "selected";
    pub const SPEEDUP: &str = "speedup";
    /// Elapsed time minus the delay inserted: the virtual duration.
    pub const DURATION: &str = "duration";
    pub const SELECTED_SAMPLES: &str = "selected-samples";
    /// Sample points of the whole program in the experiment, counted as
    /// `selected-samples` counts a code target's (holdup's own field).
    pub const PROGRAM_SAMPLES: &str = "program-samples";
    pub const ELAPSED: &str = "elapsed";
    pub const DELAY: &str = "delay";
    pub const KIND: &str = "kind";
    pub const NAME: &str = "name";
    pub const DELTA: &str = "delta";
    /// Visits between the first and the last visit seen in the
    /// experiment, and the virtual time between them.
    pub const WINDOW_DELTA: &str = "window-delta";
    pub const WINDOW_DURATION: &str = "window-duration";
    pub const ARRIVALS: &str = "arrivals";
    pub const DEPARTURES: &str = "departures";
    pub const DIFFERENCE: &str = "difference";
    pub const LOCATION: &str = "location";
    pub const COUNT: &str = "count";
    pub const PROGRESS_POINTS: &str = "progress-points";
    pub const EXPERIMENTS: &str = "experiments";
}

/// One record being written.
pub struct Line(String);

impl Line {
    pub fn new(kind: &str) -> Line {
        Line(kind.to_string())
    }

    /// Add `key=value`; separators in the value become spaces.
    pub fn field(mut self, key: &str, value: impl Display) -> Line {
        let start = self.0.len();
        let _ = write!(self.0, "\t{key}={value}");
        let value_at = start + 2 + key.len();
        if self.0[value_at..].contains(['\t', '\n']) {
            let clean = self.0[value_at..].replace(['\t', '\n'], " ");
            self.0.truncate(value_at);
            self.0.push_str(&clean);
        }
        self
    }

    /// The record with its line end.
    pub fn end(mut self) -> String {
        self.0.push('\n');
        self.0
    }
}

/// `startup`: a run began (`time` in Unix ns).
pub fn startup(unix_ns: u64, pid: u32, period_ns: u64) -> String {
    Line::new(kind::STARTUP)
        .field(key::TIME, unix_ns)
        .field(key::TOOL, "holdup")
        .field(key::PID, pid)
        .field(key::PERIOD, period_ns)
        .end()
}

/// The time now, in Unix ns, for [`startup`].
pub fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// `runtime` with the time since the run began only: sample counts follow.
pub fn runtime(elapsed_ns: u64) -> String {
    Line::new(kind::RUNTIME).field(key::TIME, elapsed_ns).end()
}

/// The last `runtime` record of a run: it finished cleanly.
pub fn runtime_end(elapsed_ns: u64, progress_points: usize, experiments: u64) -> String {
    Line::new(kind::RUNTIME)
        .field(key::TIME, elapsed_ns)
        .field(key::PROGRESS_POINTS, progress_points)
        .field(key::EXPERIMENTS, experiments)
        .end()
}

/// `samples`: the sample points of a target so far; `pid` where several
/// processes each count their own (readers add those up).
pub fn samples(location: &str, count: u64, pid: Option<u32>) -> String {
    let line = Line::new(kind::SAMPLES)
        .field(key::LOCATION, location)
        .field(key::COUNT, count);
    match pid {
        Some(pid) => line.field(key::PID, pid),
        None => line,
    }
    .end()
}

/// A progress point's counts at an experiment's start and end: (visits,
/// 0) for a throughput point, (arrivals, departures) for a latency point.
pub struct PointCounts<'a> {
    pub name: &'a str,
    pub latency: bool,
    pub before: (usize, usize),
    pub after: (usize, usize),
    /// The throughput point's first and last visits seen.
    pub window: Option<&'a Window>,
}

/// One experiment as its records say it.
pub struct Experiment<'a> {
    pub target: &'a Target,
    pub speedup_pct: u64,
    /// Wall time, and the global delay inserted meanwhile.
    pub elapsed_ns: u64,
    pub delay_ns: u64,
    /// Sample points of the target.
    pub selected_samples: u64,
    /// Sample points of the whole program, where they are known.
    pub program_samples: Option<u64>,
}

impl Experiment<'_> {
    /// Its `experiment` record and one record per progress point, and the
    /// fewest visits of any point (for COZ's adaptive length).
    pub fn records<'p>(
        &self,
        points: impl IntoIterator<Item = PointCounts<'p>>,
    ) -> (String, usize) {
        let mut text = Line::new(kind::EXPERIMENT)
            .field(key::SELECTED, self.target)
            .field(
                key::SPEEDUP,
                format_args!("{:.2}", self.speedup_pct as f64 / 100.0),
            )
            .field(key::DURATION, self.elapsed_ns.saturating_sub(self.delay_ns))
            .field(key::SELECTED_SAMPLES, self.selected_samples)
            .field(key::ELAPSED, self.elapsed_ns)
            .field(key::DELAY, self.delay_ns)
            .field(key::KIND, self.target.kind());
        if let Some(n) = self.program_samples {
            text = text.field(key::PROGRAM_SAMPLES, n);
        }
        let mut text = text.end();
        let mut min_delta = usize::MAX;
        for p in points {
            let (a, b) = (
                p.after.0.saturating_sub(p.before.0),
                p.after.1.saturating_sub(p.before.1),
            );
            let line = if p.latency {
                min_delta = min_delta.min(a).min(b);
                Line::new(kind::LATENCY_POINT)
                    .field(key::NAME, p.name)
                    .field(key::ARRIVALS, a)
                    .field(key::DEPARTURES, b)
                    .field(key::DIFFERENCE, p.after.0.saturating_sub(p.after.1))
            } else {
                min_delta = min_delta.min(a);
                let line = Line::new(kind::THROUGHPUT_POINT)
                    .field(key::NAME, p.name)
                    .field(key::DELTA, a);
                match p.window.and_then(Window::span) {
                    Some((d, span)) => line
                        .field(key::WINDOW_DELTA, d)
                        .field(key::WINDOW_DURATION, span),
                    None => line,
                }
            };
            text.push_str(&line.end());
        }
        (text, min_delta)
    }
}

/// The kind and the `key=value` fields of a record line.
pub fn parse_line(line: &str) -> Option<(&str, impl Iterator<Item = (&str, &str)>)> {
    let mut parts = line.split('\t');
    let kind = parts.next().filter(|k| !k.is_empty())?;
    Some((kind, parts.filter_map(|p| p.split_once('='))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_experiment_is_written_with_its_kind_and_its_points() {
        let mut window = Window::new(10);
        window.observe(1_000, 12, 0);
        window.observe(5_000, 20, 1_000);
        let target = Target::Kernel("ext4_sync_file".into());
        let exp = Experiment {
            target: &target,
            speedup_pct: 25,
            elapsed_ns: 9_000,
            delay_ns: 2_000,
            selected_samples: 4,
            program_samples: Some(9),
        };
        let (text, min_delta) = exp.records([
            PointCounts {
                name: "round",
                latency: false,
                before: (10, 0),
                after: (21, 0),
                window: Some(&window),
            },
            PointCounts {
                name: "request",
                latency: true,
                before: (5, 3),
                after: (9, 8),
                window: None,
            },
        ]);
        assert_eq!(
            text,
            "experiment\tselected=kernel:ext4_sync_file\tspeedup=0.25\tduration=7000\tselected-samples=4\telapsed=9000\tdelay=2000\tkind=kernel\tprogram-samples=9\n\
             throughput-point\tname=round\tdelta=11\twindow-delta=8\twindow-duration=3000\n\
             latency-point\tname=request\tarrivals=4\tdepartures=5\tdifference=1\n"
        );
        assert_eq!(min_delta, 4);
        assert_eq!(exp.records([]).1, usize::MAX);
    }

    #[test]
    fn a_line_reads_back_as_written() {
        let text = Line::new(kind::EXPERIMENT)
            .field(key::SELECTED, "a b.c:3\twith\ttabs")
            .field(key::SPEEDUP, format_args!("{:.2}", 0.5))
            .field(key::DURATION, 42u64)
            .end();
        assert_eq!(
            text,
            "experiment\tselected=a b.c:3 with tabs\tspeedup=0.50\tduration=42\n"
        );
        let (k, fields) = parse_line(text.trim_end()).unwrap();
        assert_eq!(k, kind::EXPERIMENT);
        let fields: Vec<_> = fields.collect();
        assert_eq!(
            fields,
            [
                ("selected", "a b.c:3 with tabs"),
                ("speedup", "0.50"),
                ("duration", "42")
            ]
        );
        assert!(parse_line("").is_none());
    }
}
