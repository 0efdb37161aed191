//! How sure a curve is: a 95% confidence interval per point, from a
//! bootstrap over the experiments.
//!
//! An experiment is the unit of measurement (one target, one speedup, one
//! stretch of the run), so the profile's experiments are drawn again with
//! replacement, the curves are made again from each draw (the baseline
//! too: it is measured as well), and the middle 95% of the fitted values
//! a point takes is its interval. A target none of whose intervals keeps
//! clear of 0 has no measurable effect: a line whose halving changed the
//! program by −2% but whose curve wandered to −26% says so instead of
//! showing the −26%.

use super::{interpolate, Experiment, Tallies, TargetCurve};
use holdup_coz::experiment::mix64;

/// Draws of the experiments.
const RESAMPLES: usize = 200;

/// A point gets an interval when at least this many draws measured its
/// target (a rare target is missing from some draws).
const MIN_DRAWS: usize = 50;

/// The share of the draws' values that the interval leaves out, half on
/// each side.
const OUTSIDE: f64 = 0.05;

/// splitmix64 with a fixed seed: a profile always reads the same.
struct Draws(u64);

impl Draws {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        ((mix64(self.0) as u128 * n as u128) >> 64) as usize
    }
}

/// Set the intervals of `targets` (curves of progress point `primary` of
/// `experiments`), their best intervals and whether they have any effect.
pub(super) fn add_intervals(
    experiments: &[Experiment],
    primary: &str,
    targets: &mut [TargetCurve],
) {
    let n = experiments.len();
    if n == 0 {
        return;
    }
    let mut draws = Draws(0x686f_6c64_7570);
    // Per target, per point of its curve: the fitted values of the draws.
    let mut values: Vec<Vec<Vec<f64>>> = targets
        .iter()
        .map(|t| vec![Vec::new(); t.curve.len()])
        .collect();
    for _ in 0..RESAMPLES {
        let drawn = (0..n).map(|_| &experiments[draws.below(n)]);
        let t = Tallies::of(drawn, primary);
        let Some(base) = t.baseline.value(t.latency) else {
            continue;
        };
        for (target, vals) in targets.iter().zip(&mut values) {
            let Some(accs) = t.by_target.get(target.location.as_str()) else {
                continue;
            };
            let curve = t.curve(accs, base);
            for (p, v) in target.curve.iter().zip(vals.iter_mut()) {
                v.extend(interpolate(&curve, p.speedup));
            }
        }
    }
    for (target, vals) in targets.iter_mut().zip(values) {
        for (p, v) in target.curve.iter_mut().zip(vals) {
            p.interval = middle(v);
        }
        let sped_up = || {
            target
                .curve
                .iter()
                .filter(|p| p.speedup > 0.0)
                .filter_map(|p| p.interval)
        };
        target.best_interval = sped_up().max_by(|a, b| a[0].total_cmp(&b[0]));
        target.no_measurable_effect = target.enough_data
            && target.best_interval.is_some()
            && sped_up().all(|[low, high]| low <= 0.0 && high >= 0.0);
    }
}

/// The interval that leaves [`OUTSIDE`] of the values out, half on each
/// side; None from fewer than [`MIN_DRAWS`] values.
fn middle(mut v: Vec<f64>) -> Option<[f64; 2]> {
    if v.len() < MIN_DRAWS {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    Some([at(OUTSIDE / 2.0), at(1.0 - OUTSIDE / 2.0)])
}

#[cfg(test)]
mod tests {
    use super::super::{analyze, CausalProfile, CozProfile, TargetCurve};

    fn named<'a>(c: &'a CausalProfile, target: &str) -> &'a TargetCurve {
        c.targets.iter().find(|t| t.target == target).unwrap()
    }

    /// A profile of `rounds` experiments of each target at each speedup
    /// (0, 25, 50, 75, 100%), 100 visits at baseline of a 1 ms experiment:
    /// a target's program speedup at line speedup s is `effect · s`, plus
    /// the program's noise of ± `noise` in every experiment (a fixed
    /// pseudo-random sequence).
    fn synthetic(targets: &[(&str, f64, usize)], noise: f64) -> CozProfile {
        let mut text = String::from("startup\ttime=1\n");
        let mut state = 12345u64;
        let mut jitter = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as f64 / (1u64 << 31) as f64 * 2.0 - 1.0
        };
        let most = targets.iter().map(|t| t.2).max().unwrap_or(0);
        for round in 0..most {
            for &(name, effect, rounds) in targets {
                if round >= rounds {
                    continue;
                }
                for pct in [0u32, 25, 50, 75, 100] {
                    let s = pct as f64 / 100.0;
                    let speedup = effect * s + noise * jitter();
                    // period = base · (1 − speedup): visits = 100 / (1 − speedup)
                    let visits = (100.0 / (1.0 - speedup)).round() as u64;
                    text.push_str(&format!(
                        "experiment\tselected={name}\tspeedup={s:.2}\tduration=1000000\tselected-samples=5\n\
                         throughput-point\tname=p\tdelta={visits}\n"
                    ));
                }
            }
        }
        CozProfile::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn a_real_effect_has_an_interval_clear_of_zero_around_it() {
        let c = analyze(&synthetic(
            &[("/a.c:1", 0.5, 12), ("/b.c:2", 0.0, 12)],
            0.03,
        ));
        let a = named(&c, "a.c:1");
        assert!(!a.no_measurable_effect, "{a:?}");
        let half = a.curve.iter().find(|p| p.speedup == 0.5).unwrap();
        let [low, high] = half.interval.unwrap();
        assert!(low > 0.0 && low <= 0.25 && high >= 0.25, "{low} {high}");
        assert!(high - low < 0.1, "{low} {high}");
        let [best_low, _] = a.best_interval.unwrap();
        assert!(best_low > 0.3, "{best_low}");
        // A line that does not matter, measured as often: no effect.
        let b = named(&c, "b.c:2");
        assert!(b.no_measurable_effect, "{b:?}");
        // Deterministic: the same profile reads the same.
        let again = analyze(&synthetic(
            &[("/a.c:1", 0.5, 12), ("/b.c:2", 0.0, 12)],
            0.03,
        ));
        assert_eq!(
            again.targets[0].curve[2].interval,
            c.targets[0].curve[2].interval
        );
    }

    /// A line that does not matter, with one experiment per speedup, has a
    /// curve that wanders far from 0 on the program's noise: it is "no
    /// measurable effect", and ranks below a small effect measured often
    /// even when its best point is higher.
    #[test]
    fn a_wandering_curve_is_no_effect_and_ranks_below_a_sure_one() {
        let c = analyze(&synthetic(
            &[("/noisy.c:1", 0.0, 2), ("/sure.c:2", 0.08, 60)],
            0.3,
        ));
        let noisy = named(&c, "noisy.c:1");
        let sure = named(&c, "sure.c:2");
        assert!(noisy.enough_data);
        // Its points stray well away from 0, and it still says nothing.
        let wander = noisy
            .curve
            .iter()
            .map(|p| p.fitted.abs())
            .fold(0.0, f64::max);
        assert!(wander > sure.max_program_speedup, "{noisy:?}");
        assert!(noisy.no_measurable_effect, "{noisy:?}");
        assert!(!sure.no_measurable_effect, "{sure:?}");
        assert_eq!(c.targets[0].target, "sure.c:2");
    }

    /// A target with one experiment per speedup draws a clean curve
    /// whenever those few happened to agree, and a bootstrap of single
    /// measurements calls it sure: it is too few to rank, and ranks below
    /// a smaller effect measured often.
    #[test]
    fn a_lucky_curve_of_few_experiments_is_not_ranked_above_a_measured_one() {
        let few_and_many = [("/lucky.c:1", 0.7, 1), ("/sure.c:2", 0.3, 12)];
        let c = analyze(&synthetic(&few_and_many, 0.02));
        let lucky = named(&c, "lucky.c:1");
        assert_eq!(lucky.experiments, 5);
        assert!(!lucky.enough_data, "{lucky:?}");
        assert!(!lucky.no_measurable_effect, "{lucky:?}");
        assert_eq!(c.targets[0].target, "sure.c:2");
        assert!(c.targets[0].enough_data);
    }

    #[test]
    fn too_few_draws_give_no_interval() {
        assert_eq!(super::middle(vec![0.1; 10]), None);
        let v: Vec<f64> = (0..=100).map(|i| i as f64 / 100.0).collect();
        assert_eq!(super::middle(v), Some([0.03, 0.98]));
    }
}
