//! Causal profiles: COZ's profile format in, speedup curves and a ranking out.
//!
//! A profile is a list of experiments. Each ran one target (a source line, or
//! `subclass:io` / `subclass:sched`) at one virtual speedup for a while and
//! counted progress-point visits. The period of a progress point in an
//! experiment is duration / visits, where duration excludes the delays the
//! experiment inserted; the program speedup at a line speedup is
//! (baseline period − period) / baseline period, as in COZ.
//!
//! Two choices differ from COZ's viewer, both to make the short experiments
//! holdup runs add up to stable curves:
//! - The baseline pools the 0% experiments of *all* targets: a 0% experiment
//!   inserts no delay, so it measures the unperturbed program whatever its
//!   target was. COZ's viewer only uses the target's own 0% runs.
//! - Each curve also gets a smoothed value per point (local linear regression
//!   over neighbouring speedups, anchored at 0% → 0), which ranks targets and
//!   answers "what would s% buy"; the raw COZ value is kept beside it.
//!
//! Reads both the tab-separated format (COZ 0.2.2, holdup) and the JSON-lines
//! format of later COZ versions; a line cut short by a crash is skipped, and
//! so is a line longer than [`MAX_LINE`] or not UTF-8 (counted): a profile
//! may come from anywhere, and no line makes the reader hold more than that.

mod interval;

use holdup_coz::profile::{key, kind, parse_line};
/// What kind of thing a target is (`kind` in `holdup.causal/1`).
pub use holdup_coz::target::Kind as TargetKind;
use holdup_coz::target::Target;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;

/// The longest line read. Records are far shorter: the longest field is
/// a target's path or a progress point's name.
pub const MAX_LINE: usize = 64 << 10;

/// Experiments a target needs, over all its speedups, before it is ranked.
/// With one experiment per speedup, a bootstrap redraws each point from a
/// single measurement: its interval is as narrow as the measurement is
/// lucky (a run's enclosing `DBImpl::Get`, 3 experiments, ranked first at
/// +73% "surely ≥ 49%"). The run's floor of experiments (see
/// `holdup_coz::selection`) gives every target that matters as many.
pub const MIN_EXPERIMENTS: u64 = holdup_coz::selection::FLOOR;

/// A function target encloses the program when its experiments took in at
/// least this share of the program's sample points (what it calls
/// included; `program-samples`), and its own samples are at most
/// [`ENCLOSING_SELF`] of that share: an outer frame of nearly all the work
/// (RocksDB's `BlockBasedTable::Get`, 88%, around the cache `Lookup` at
/// 40%), whose speedup is everything's and names no place to fix. A
/// function that does the work itself is not one.
pub const ENCLOSING_SHARE: f64 = 0.75;
pub const ENCLOSING_SELF: f64 = 0.25;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("cannot read the profile: {0}")]
    Io(#[from] std::io::Error),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Measure {
    /// `window`: (visits, duration in ns without inserted delay) between
    /// the first and the last visit seen in the experiment (holdup adds it;
    /// COZ's profiles lack it).
    Throughput {
        name: String,
        delta: u64,
        window: Option<(u64, u64)>,
    },
    Latency {
        name: String,
        arrivals: u64,
        departures: u64,
        difference: u64,
    },
}

impl Measure {
    pub fn name(&self) -> &str {
        match self {
            Measure::Throughput { name, .. } | Measure::Latency { name, .. } => name,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Experiment {
    pub selected: String,
    /// As the record says, or as the name tells in profiles that do not.
    pub kind: TargetKind,
    pub speedup: f64,
    /// Elapsed time minus inserted delay, ns.
    pub duration: u64,
    pub selected_samples: u64,
    /// The whole program's sample points meanwhile, where the profile says.
    pub program_samples: Option<u64>,
    pub measures: Vec<Measure>,
}

/// A parsed profile.
#[derive(Clone, Debug, Default)]
pub struct CozProfile {
    pub experiments: Vec<Experiment>,
    /// Last cumulative sample count per location.
    pub samples: BTreeMap<String, u64>,
    /// Runs in the file (`startup` records).
    pub runs: usize,
    /// Progress points the last finished run had reached, when it says so.
    pub progress_points_reached: Option<u64>,
    /// Runs that finished cleanly (they wrote a final `runtime` record
    /// with their counts).
    pub finished_runs: usize,
    /// Lines left out: longer than [`MAX_LINE`], or not UTF-8.
    pub skipped_lines: u64,
}

/// Read the next line of `reader` into `buf`, without its end; false at the
/// end of the input. A line longer than [`MAX_LINE`] is read past, not
/// kept: `buf` is then left empty and `*long` set.
fn next_line(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    long: &mut bool,
) -> std::io::Result<bool> {
    use std::io::Read as _;
    buf.clear();
    *long = false;
    let n = reader
        .by_ref()
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(false);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if buf.len() > MAX_LINE {
        buf.clear();
        *long = true;
        // The rest of the line, a buffer at a time.
        loop {
            let chunk = reader.fill_buf()?;
            if chunk.is_empty() {
                break;
            }
            match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    reader.consume(i + 1);
                    break;
                }
                None => {
                    let all = chunk.len();
                    reader.consume(all);
                }
            }
        }
    }
    Ok(true)
}

fn fields(line: &str) -> Option<(String, HashMap<String, String>)> {
    if line.starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let obj = v.as_object()?;
        let kind = obj.get("type")?.as_str()?.replace('_', "-");
        let map = obj
            .iter()
            .filter(|(k, _)| k.as_str() != "type")
            .map(|(k, v)| {
                let s = match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.replace('_', "-"), s)
            })
            .collect();
        return Some((kind, map));
    }
    let (kind, fields) = parse_line(line)?;
    let map = fields
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Some((kind.to_string(), map))
}

impl CozProfile {
    /// Parse a profile; records this version does not know are skipped.
    pub fn parse(mut reader: impl BufRead) -> Result<CozProfile, Error> {
        let mut p = CozProfile::default();
        let mut current: Option<Experiment> = None;
        let mut samples_of: std::collections::HashMap<(String, String), u64> =
            std::collections::HashMap::new();
        let (mut buf, mut long) = (Vec::new(), false);
        while next_line(&mut reader, &mut buf, &mut long)? {
            let Ok(line) = std::str::from_utf8(&buf) else {
                p.skipped_lines += 1;
                continue;
            };
            if long {
                p.skipped_lines += 1;
                continue;
            }
            let Some((kind, f)) = fields(line.trim_end()) else {
                continue;
            };
            let num = |k: &str| f.get(k).and_then(|v| v.parse::<f64>().ok());
            let int = |k: &str| num(k).map(|v| v.max(0.0) as u64);
            match kind.as_str() {
                kind::STARTUP => {
                    p.runs += 1;
                    p.experiments.extend(current.take());
                }
                kind::EXPERIMENT => {
                    p.experiments.extend(current.take());
                    let (Some(sel), Some(speedup), Some(duration)) =
                        (f.get(key::SELECTED), num(key::SPEEDUP), int(key::DURATION))
                    else {
                        continue;
                    };
                    current = Some(Experiment {
                        kind: TargetKind::of_record(f.get(key::KIND).map(String::as_str), sel),
                        selected: sel.clone(),
                        speedup: (speedup * 100.0).round() / 100.0,
                        duration,
                        selected_samples: int(key::SELECTED_SAMPLES).unwrap_or(0),
                        program_samples: int(key::PROGRAM_SAMPLES),
                        measures: Vec::new(),
                    });
                }
                kind::THROUGHPUT_POINT | kind::PROGRESS_POINT => {
                    if let (Some(e), Some(name), Some(delta)) =
                        (current.as_mut(), f.get(key::NAME), int(key::DELTA))
                    {
                        let window = int(key::WINDOW_DELTA).zip(int(key::WINDOW_DURATION));
                        e.measures.push(Measure::Throughput {
                            name: name.clone(),
                            delta,
                            window,
                        });
                    }
                }
                kind::LATENCY_POINT => {
                    if let (Some(e), Some(name)) = (current.as_mut(), f.get(key::NAME)) {
                        e.measures.push(Measure::Latency {
                            name: name.clone(),
                            arrivals: int(key::ARRIVALS).unwrap_or(0),
                            departures: int(key::DEPARTURES).unwrap_or(0),
                            difference: int(key::DIFFERENCE).unwrap_or(0),
                        });
                    }
                }
                kind::SAMPLES => {
                    if let (Some(loc), Some(count)) = (f.get(key::LOCATION), int(key::COUNT)) {
                        // A later count of the same process replaces an
                        // earlier one; processes (--system) add up.
                        let pid = f.get(key::PID).cloned().unwrap_or_default();
                        samples_of.insert((loc.clone(), pid), count);
                    }
                }
                kind::RUNTIME => {
                    p.experiments.extend(current.take());
                    if let Some(n) = int(key::PROGRESS_POINTS) {
                        p.progress_points_reached = Some(n);
                        p.finished_runs += 1;
                    }
                }
                _ => {}
            }
        }
        p.experiments.extend(current);
        for ((loc, _), count) in samples_of {
            *p.samples.entry(loc).or_insert(0) += count;
        }
        Ok(p)
    }

    /// Names of the progress points measured, in order of first appearance.
    pub fn progress_points(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for e in &self.experiments {
            for m in &e.measures {
                if !names.iter().any(|n| n == m.name()) {
                    names.push(m.name().to_string());
                }
            }
        }
        names
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct CurvePoint {
    /// Virtual speedup of the target, 0–1.
    pub speedup: f64,
    /// COZ's program speedup measured at this speedup.
    pub program_speedup: f64,
    /// Smoothed over neighbouring speedups (what rankings and predictions use).
    pub fitted: f64,
    pub experiments: u64,
    /// 95% confidence interval of `fitted` [low, high], from a bootstrap
    /// over the experiments (None: too few experiments to tell).
    pub interval: Option<[f64; 2]>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TargetCurve {
    /// `file.c:42` (the shortest unambiguous name), `subclass:io`,
    /// `subclass:sched`, `process:NAME`.
    pub target: String,
    /// As recorded: the full path for lines.
    pub location: String,
    pub kind: TargetKind,
    /// Weighted sample points of the target over the run.
    pub samples: u64,
    pub experiments: u64,
    pub curve: Vec<CurvePoint>,
    pub max_program_speedup: f64,
    /// At least three different non-zero speedups were measured, in at
    /// least [`MIN_EXPERIMENTS`] experiments: enough to draw a curve and to
    /// rank it.
    pub enough_data: bool,
    /// How far single experiments stray from the curve: the interquartile
    /// range of their program speedups minus the fitted value at their line
    /// speedup (in program-speedup units; None below four experiments).
    pub spread: Option<f64>,
    /// The interval of the curve's point whose low end is highest: the
    /// most the target surely buys (what the ranking uses).
    pub best_interval: Option<[f64; 2]>,
    /// Every point's interval holds 0: whatever its curve shows, it is
    /// noise (COZ's curves of lines that do not matter wander).
    pub no_measurable_effect: bool,
    /// The share of the program's sample points its experiments took in,
    /// what it calls included (None: the profile does not say).
    pub program_share: Option<f64>,
    /// A function around nearly all the program's work, mostly in what it
    /// calls (see [`ENCLOSING_SHARE`]): ranked after the places.
    pub encloses_program: bool,
}

impl TargetCurve {
    /// The smoothed program speedup at line speedup `s` (0–1), interpolated.
    pub fn predict(&self, s: f64) -> Option<f64> {
        interpolate(&self.curve, s)
    }
}

/// The fitted value of `curve` at line speedup `s`, interpolated.
fn interpolate(c: &[CurvePoint], s: f64) -> Option<f64> {
    let first = c.first()?;
    if s <= first.speedup {
        return Some(first.fitted);
    }
    for w in c.windows(2) {
        if s <= w[1].speedup {
            let t = (s - w[0].speedup) / (w[1].speedup - w[0].speedup);
            return Some(w[0].fitted + t * (w[1].fitted - w[0].fitted));
        }
    }
    c.last().map(|p| p.fitted)
}

#[derive(Clone, Debug, Serialize)]
pub struct CausalProfile {
    pub progress_points: Vec<String>,
    /// The progress point the curves are for.
    pub progress_point: Option<String>,
    /// Baseline period (ns per visit) of that point, or latency (ns).
    pub baseline_ns: f64,
    pub baseline_experiments: u64,
    pub experiments: usize,
    pub targets: Vec<TargetCurve>,
}

/// Per target and speedup (in %), the measurements of some experiments,
/// and the baseline they share.
struct Tallies<'a> {
    baseline: Acc,
    by_target: BTreeMap<&'a str, BTreeMap<u32, Acc>>,
    latency: bool,
}

impl<'a> Tallies<'a> {
    /// The measurements of progress point `primary` in `experiments`.
    fn of(experiments: impl Iterator<Item = &'a Experiment>, primary: &str) -> Tallies<'a> {
        let mut t = Tallies {
            baseline: Acc::default(),
            by_target: BTreeMap::new(),
            latency: false,
        };
        for e in experiments {
            let Some(m) = e.measures.iter().find(|m| m.name() == primary) else {
                continue;
            };
            t.latency = matches!(m, Measure::Latency { .. });
            let pct = (e.speedup * 100.0).round() as u32;
            if pct == 0 {
                t.baseline.add(e, m);
            }
            t.by_target
                .entry(e.selected.as_str())
                .or_default()
                .entry(pct)
                .or_default()
                .add(e, m);
        }
        t
    }

    /// The curve of one target's measurements against baseline `base`.
    fn curve(&self, accs: &BTreeMap<u32, Acc>, base: f64) -> Vec<CurvePoint> {
        let mut curve: Vec<CurvePoint> = Vec::new();
        for (&pct, acc) in accs {
            let Some(v) = acc.value(self.latency) else {
                continue;
            };
            let program_speedup = if pct == 0 { 0.0 } else { (base - v) / base };
            curve.push(CurvePoint {
                speedup: pct as f64 / 100.0,
                program_speedup,
                fitted: 0.0,
                experiments: acc.n,
                interval: None,
            });
        }
        if !curve.iter().any(|p| p.speedup == 0.0) {
            curve.insert(
                0,
                CurvePoint {
                    speedup: 0.0,
                    program_speedup: 0.0,
                    fitted: 0.0,
                    experiments: 0,
                    interval: None,
                },
            );
        }
        fit(&mut curve);
        curve
    }
}

#[derive(Default, Clone, Copy)]
struct Acc {
    delta: f64,
    /// Time over which `delta` visits were counted.
    span: f64,
    duration: f64,
    arrivals: f64,
    difference_weighted: f64,
    n: u64,
}

impl Acc {
    fn add(&mut self, e: &Experiment, m: &Measure) {
        self.n += 1;
        self.duration += e.duration as f64;
        match m {
            // Whole visits between the first and last one seen, when known.
            Measure::Throughput {
                window: Some((d, t)),
                ..
            } => {
                self.delta += *d as f64;
                self.span += *t as f64;
            }
            Measure::Throughput { delta, .. } => {
                self.delta += *delta as f64;
                self.span += e.duration as f64;
            }
            Measure::Latency {
                arrivals,
                difference,
                ..
            } => {
                self.arrivals += *arrivals as f64;
                self.difference_weighted += *difference as f64 * e.duration as f64;
            }
        }
    }

    /// Period per visit (throughput) or mean latency by Little's law.
    fn value(&self, latency: bool) -> Option<f64> {
        if latency {
            if self.arrivals <= 0.0 || self.duration <= 0.0 {
                return None;
            }
            let difference = self.difference_weighted / self.duration;
            Some(difference / (self.arrivals / self.duration))
        } else if self.delta > 0.0 {
            Some(self.span / self.delta)
        } else {
            None
        }
    }
}

/// Curves for every target of `profile`, best first.
pub fn analyze(profile: &CozProfile) -> CausalProfile {
    let points = profile.progress_points();
    // The point visited most carries the most information.
    let mut visits: HashMap<&str, u64> = HashMap::new();
    for e in &profile.experiments {
        for m in &e.measures {
            let v = match m {
                Measure::Throughput { delta, .. } => *delta,
                Measure::Latency { arrivals, .. } => *arrivals,
            };
            let n = visits.entry(m.name()).or_insert(0);
            *n = n.saturating_add(v);
        }
    }
    let primary = points
        .iter()
        .max_by_key(|p| visits.get(p.as_str()).copied().unwrap_or(0))
        .cloned();
    let mut out = CausalProfile {
        progress_points: points.clone(),
        progress_point: primary.clone(),
        baseline_ns: 0.0,
        baseline_experiments: 0,
        experiments: profile.experiments.len(),
        targets: Vec::new(),
    };
    let Some(primary) = primary else { return out };

    let tallies = Tallies::of(profile.experiments.iter(), &primary);
    let latency = tallies.latency;
    let mut kinds: HashMap<&str, TargetKind> = HashMap::new();
    // target → (speedup in %, the experiment's own measurement)
    let mut singles: BTreeMap<&str, Vec<(u32, Acc)>> = BTreeMap::new();
    for e in &profile.experiments {
        let Some(m) = e.measures.iter().find(|m| m.name() == primary) else {
            continue;
        };
        let pct = (e.speedup * 100.0).round() as u32;
        kinds.insert(e.selected.as_str(), e.kind);
        let mut one = Acc::default();
        one.add(e, m);
        singles
            .entry(e.selected.as_str())
            .or_default()
            .push((pct, one));
    }
    let Some(base) = tallies.baseline.value(latency) else {
        return out;
    };
    out.baseline_ns = base;
    out.baseline_experiments = tallies.baseline.n;

    let names: Vec<&str> = tallies.by_target.keys().copied().collect();
    for (target, accs) in &tallies.by_target {
        let curve = tallies.curve(accs, base);
        let residuals: Vec<f64> = singles
            .get(target)
            .map(|v| v.as_slice())
            .unwrap_or_default()
            .iter()
            .filter_map(|(pct, one)| {
                let y = if *pct == 0 {
                    0.0
                } else {
                    (base - one.value(latency)?) / base
                };
                let fitted = curve
                    .iter()
                    .find(|p| (p.speedup * 100.0).round() as u32 == *pct)?
                    .fitted;
                Some(y - fitted)
            })
            .collect();
        let kind = kinds.get(target).copied().unwrap_or(TargetKind::Line);
        let nonzero = curve
            .iter()
            .filter(|p| p.speedup > 0.0 && p.experiments > 0)
            .count();
        let experiments = accs.values().map(|a| a.n).sum();
        out.targets.push(TargetCurve {
            target: short_name(target, &names),
            location: target.to_string(),
            kind,
            samples: profile.samples.get(*target).copied().unwrap_or(0),
            experiments,
            max_program_speedup: curve.iter().map(|p| p.fitted).fold(0.0, f64::max),
            curve,
            enough_data: nonzero >= 3 && experiments >= MIN_EXPERIMENTS,
            spread: interquartile_range(residuals),
            best_interval: None,
            no_measurable_effect: false,
            program_share: None,
            encloses_program: false,
        });
    }
    add_program_shares(profile, &mut out.targets);
    interval::add_intervals(&profile.experiments, &primary, &mut out.targets);
    // Targets with an effect first, by what they surely buy (the low end
    // of their best interval), not by their noisiest point.
    let surely = |t: &TargetCurve| t.best_interval.map_or(f64::NEG_INFINITY, |[low, _]| low);
    out.targets.sort_by(|a, b| {
        b.enough_data
            .cmp(&a.enough_data)
            .then(a.no_measurable_effect.cmp(&b.no_measurable_effect))
            .then(a.encloses_program.cmp(&b.encloses_program))
            .then(surely(b).total_cmp(&surely(a)))
            .then(b.max_program_speedup.total_cmp(&a.max_program_speedup))
            .then(b.samples.cmp(&a.samples))
    });
    out
}

/// Each target's share of the program's sample points over its
/// experiments, and whether a function encloses the program: its own
/// samples' share of all samples is small beside that share.
fn add_program_shares(profile: &CozProfile, targets: &mut [TargetCurve]) {
    let mut took: HashMap<&str, (u64, u64)> = HashMap::new();
    for e in &profile.experiments {
        if let Some(program) = e.program_samples.filter(|&n| n > 0) {
            let t = took.entry(e.selected.as_str()).or_default();
            t.0 += e.selected_samples;
            t.1 += program;
        }
    }
    let all: u64 = profile.samples.values().sum();
    for t in targets {
        let Some(&(selected, program)) = took.get(t.location.as_str()) else {
            continue;
        };
        let share = selected as f64 / program as f64;
        let own = t.samples as f64 / all.max(1) as f64;
        t.program_share = Some(share);
        // Without sample counts (a run cut short) its own share is unknown.
        t.encloses_program = t.kind == TargetKind::Function
            && all > 0
            && share >= ENCLOSING_SHARE
            && own <= ENCLOSING_SELF * share;
    }
}

/// Q3 − Q1 (linear interpolation between order statistics), from four values.
fn interquartile_range(mut v: Vec<f64>) -> Option<f64> {
    if v.len() < 4 {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let q = |f: f64| {
        let x = f * (v.len() - 1) as f64;
        let (i, t) = (x.floor() as usize, x.fract());
        v[i] + t * (v[(i + 1).min(v.len() - 1)] - v[i])
    };
    Some(q(0.75) - q(0.25))
}

/// Local linear regression (tricube kernel) of program speedup on line
/// speedup, weighted by experiment count, with 0% → 0 as an anchor.
fn fit(curve: &mut [CurvePoint]) {
    let anchor_w = curve
        .iter()
        .map(|p| p.experiments)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    // Like COZ's viewer, values beyond -100%/+100% are taken for broken
    // measurements (an experiment that saw almost no progress), not data.
    let pts: Vec<(f64, f64, f64)> = curve
        .iter()
        .filter(|p| p.program_speedup.abs() <= 1.0)
        .map(|p| {
            if p.speedup == 0.0 {
                (0.0, 0.0, anchor_w)
            } else {
                (p.speedup, p.program_speedup, p.experiments as f64)
            }
        })
        .filter(|p| p.2 > 0.0)
        .collect();
    for p in curve.iter_mut() {
        p.fitted = local_linear(&pts, p.speedup);
    }
}

fn local_linear(pts: &[(f64, f64, f64)], x0: f64) -> f64 {
    let mut h = 0.25;
    loop {
        let (mut sw, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
        let mut n = 0;
        for &(x, y, w) in pts {
            let d = ((x - x0) / h).abs();
            if d >= 1.0 {
                continue;
            }
            let k = w * (1.0 - d * d * d).powi(3);
            let dx = x - x0;
            sw += k;
            sx += k * dx;
            sy += k * y;
            sxx += k * dx * dx;
            sxy += k * dx * y;
            n += 1;
        }
        if sw > 0.0 {
            let det = sw * sxx - sx * sx;
            if n >= 2 && det.abs() > 1e-12 * sw * sw {
                return (sxx * sy - sx * sxy) / det;
            }
            if h >= 1.0 {
                return sy / sw;
            }
        } else if h >= 2.0 {
            return 0.0;
        }
        h *= 1.5;
    }
}

/// `path:line` shortened to `file:line` unless another target has the same
/// file name; `BINARY:path:line` keeps its binary. Other targets are their
/// names.
fn short_name(name: &str, all: &[&str]) -> String {
    let Ok(Target::Line { binary, file, line }) = Target::parse(name) else {
        return name.to_string();
    };
    let base = |f: &str| f.rsplit('/').next().unwrap_or(f).to_string();
    // Files of other line targets with the same file name.
    let clash = all.iter().any(|o| match Target::parse(o) {
        Ok(Target::Line { file: other, .. }) => other != file && base(&other) == base(&file),
        _ => false,
    });
    let file = if clash { file } else { base(&file) };
    Target::Line { binary, file, line }.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROFILE: &str = "startup\ttime=1\n\
experiment\tselected=/src/a.c:10\tspeedup=0.00\tduration=1000\tselected-samples=3\n\
throughput-point\tname=round\tdelta=10\n\
experiment\tselected=/src/b.c:20\tspeedup=0.00\tduration=1000\tselected-samples=3\n\
throughput-point\tname=round\tdelta=10\n\
experiment\tselected=/src/a.c:10\tspeedup=0.50\tduration=1000\tselected-samples=3\n\
throughput-point\tname=round\tdelta=20\n\
experiment\tselected=/src/a.c:10\tspeedup=0.25\tduration=1000\tselected-samples=3\n\
throughput-point\tname=round\tdelta=15\n\
experiment\tselected=/src/a.c:10\tspeedup=1.00\tduration=1000\tselected-samples=3\n\
throughput-point\tname=round\tdelta=20\n\
experiment\tselected=/src/b.c:20\tspeedup=0.50\tduration=1000\tselected-samples=3\n\
throughput-point\tname=round\tdelta=10\n\
runtime\ttime=5\n\
samples\tlocation=/src/a.c:10\tcount=70\n\
samples\tlocation=/src/a.c:10\tcount=90\n\
runtime\ttime=6\tprogress-points=1\texperiments=6\n\
experiment\tselected=/src/b.c:20\tspee";

    #[test]
    fn parses_coz_format_and_cut_lines() {
        let p = CozProfile::parse(PROFILE.as_bytes()).unwrap();
        assert_eq!(p.experiments.len(), 6);
        assert_eq!(p.samples["/src/a.c:10"], 90);
        assert_eq!(p.progress_points_reached, Some(1));
        assert_eq!(p.progress_points(), vec!["round".to_string()]);
    }

    /// A forged line of 64 MiB (and one not UTF-8) amid the records: read
    /// past in bounded memory, counted, the records around them kept.
    #[test]
    fn overlong_and_binary_lines_are_skipped_and_counted() {
        use std::io::Read as _;
        let (head, tail) = PROFILE.split_at(PROFILE.find("experiment").unwrap());
        let huge = std::io::repeat(b'x').take(64 << 20);
        let input = head
            .as_bytes()
            .chain(&b"experiment\tselected="[..])
            .chain(huge)
            .chain(&b"\n\xff\xfe\tbinary\n"[..])
            .chain(tail.as_bytes());
        let p = CozProfile::parse(std::io::BufReader::new(input)).unwrap();
        assert_eq!(p.skipped_lines, 2);
        assert_eq!(p.experiments.len(), 6);
        assert_eq!(p.samples["/src/a.c:10"], 90);
        // A line of exactly the bound is read; one byte more is not.
        let at_bound = format!("startup\ttool=x\tpad={}\n", "p".repeat(MAX_LINE - 19));
        assert_eq!(at_bound.len(), MAX_LINE + 1);
        let p = CozProfile::parse(at_bound.as_bytes()).unwrap();
        assert_eq!((p.runs, p.skipped_lines), (1, 0));
        let over = format!("startup\ttool=x\tpad={}\n", "p".repeat(MAX_LINE - 18));
        let p = CozProfile::parse(over.as_bytes()).unwrap();
        assert_eq!((p.runs, p.skipped_lines), (0, 1));
    }

    #[test]
    fn parses_json_lines() {
        let text = "{\"type\":\"startup\",\"time\":1}\n\
{\"type\":\"experiment\",\"selected\":\"x.c:1\",\"speedup\":0.0,\"duration\":100,\"selected_samples\":1}\n\
{\"type\":\"throughput_point\",\"name\":\"p\",\"delta\":4}\n";
        let p = CozProfile::parse(text.as_bytes()).unwrap();
        assert_eq!(p.experiments.len(), 1);
        assert_eq!(
            p.experiments[0].measures[0],
            Measure::Throughput {
                name: "p".into(),
                delta: 4,
                window: None
            }
        );
    }

    #[test]
    fn curves_rank_the_line_that_matters_first() {
        let p = CozProfile::parse(PROFILE.as_bytes()).unwrap();
        let c = analyze(&p);
        assert_eq!(c.progress_point.as_deref(), Some("round"));
        assert_eq!(c.baseline_ns, 100.0);
        let a = &c.targets[0];
        assert_eq!(a.target, "a.c:10");
        assert_eq!(a.samples, 90);
        // Period 50 ns instead of 100 at 50%: the program is 50% faster.
        let half = a.curve.iter().find(|p| p.speedup == 0.5).unwrap();
        assert!((half.program_speedup - 0.5).abs() < 1e-9);
        // Three speedups, but four experiments: a curve, not yet a ranking.
        assert!(!a.enough_data);
        assert!(a.spread.is_some_and(|s| s >= 0.0), "{a:?}");
        assert!(a.predict(0.5).unwrap() > 0.3);
        let b = &c.targets[1];
        assert_eq!(b.target, "b.c:20");
        assert!(b.max_program_speedup.abs() < 1e-9);
    }

    /// This version writes each target's kind; earlier ones wrote `line`
    /// for processes and kernel functions, COZ writes none.
    #[test]
    fn kinds_come_from_the_record_or_else_the_name() {
        let text = "startup\ttime=1\n\
experiment\tselected=kernel:vfs_read\tspeedup=0.00\tduration=10\tkind=kernel\n\
throughput-point\tname=p\tdelta=1\n\
experiment\tselected=process:reader\tspeedup=0.00\tduration=10\tkind=line\n\
throughput-point\tname=p\tdelta=1\n\
experiment\tselected=subclass:io\tspeedup=0.00\tduration=10\n\
throughput-point\tname=p\tdelta=1\n\
experiment\tselected=srv:/src/a.c:3\tspeedup=0.00\tduration=10\tkind=line\n\
throughput-point\tname=p\tdelta=1\n";
        let p = CozProfile::parse(text.as_bytes()).unwrap();
        let kinds: Vec<TargetKind> = p.experiments.iter().map(|e| e.kind).collect();
        use TargetKind::*;
        assert_eq!(kinds, [Kernel, Process, Subclass, Line]);
        let c = analyze(&p);
        let of = |name: &str| c.targets.iter().find(|t| t.target == name).unwrap().kind;
        assert_eq!(
            [of("kernel:vfs_read"), of("process:reader"), of("srv:a.c:3")],
            [Kernel, Process, Line]
        );
    }

    #[test]
    fn short_names_keep_ambiguous_paths() {
        assert_eq!(
            short_name("/x/a.c:1", &["/x/a.c:1", "/y/a.c:2"]),
            "/x/a.c:1"
        );
        assert_eq!(short_name("/x/a.c:1", &["/x/a.c:1", "/x/a.c:2"]), "a.c:1");
        assert_eq!(short_name("subclass:io", &[]), "subclass:io");
        assert_eq!(
            short_name("reader:/x/a.c:1", &["reader:/x/a.c:1", "writer:/x/b.c:2"]),
            "reader:a.c:1"
        );
    }

    /// Experiments on function targets (name, kind, program speedup at
    /// 100%, share of the program's samples its experiments take in, its
    /// own samples), with or without `program-samples`.
    fn nested_profile(with_program: bool) -> CozProfile {
        let targets = [
            ("db:outer", "function", 0.8, 0.9, 10),
            ("db:inner", "function", 0.4, 0.4, 100),
            ("db:work", "function", 0.9, 0.9, 690),
            ("/src/a.c:5", "line", 0.85, 0.9, 200),
        ];
        let mut text = String::from("startup\ttime=1\n");
        for _ in 0..4 {
            for (name, kind, effect, share, _) in targets {
                for pct in [0u32, 25, 50, 75, 100] {
                    let s = pct as f64 / 100.0;
                    let visits = (100.0 / (1.0 - effect * s)).round() as u64;
                    let program = if with_program {
                        "\tprogram-samples=1000"
                    } else {
                        ""
                    };
                    text.push_str(&format!(
                        "experiment\tselected={name}\tspeedup={s:.2}\tduration=1000000\tselected-samples={}\tkind={kind}{program}\n\
                         throughput-point\tname=p\tdelta={visits}\n",
                        (share * 1000.0) as u64
                    ));
                }
            }
        }
        for (name, _, _, _, own) in targets {
            text.push_str(&format!("samples\tlocation={name}\tcount={own}\n"));
        }
        CozProfile::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn a_function_around_the_programs_work_ranks_after_the_places_in_it() {
        let c = analyze(&nested_profile(true));
        let order: Vec<&str> = c.targets.iter().map(|t| t.target.as_str()).collect();
        // The outer frame's +80% is true and names no place: last. A
        // function that does its 90% itself, and a call line, are places.
        assert_eq!(order, ["db:work", "a.c:5", "db:inner", "db:outer"]);
        let outer = &c.targets[3];
        assert!(outer.encloses_program, "{outer:?}");
        assert!((outer.program_share.unwrap() - 0.9).abs() < 1e-9);
        assert!((outer.max_program_speedup - 0.8).abs() < 0.02, "{outer:?}");
        assert!(c.targets[..3].iter().all(|t| !t.encloses_program));
        // A profile that does not count the program's samples ranks by the
        // effect alone, as before.
        let c = analyze(&nested_profile(false));
        let order: Vec<&str> = c.targets.iter().map(|t| t.target.as_str()).collect();
        assert_eq!(order, ["db:work", "a.c:5", "db:outer", "db:inner"]);
        assert!(c
            .targets
            .iter()
            .all(|t| !t.encloses_program && t.program_share.is_none()));
    }
}
