//! Rendering of causal profiles: a ranked table with small speedup curves,
//! and the `holdup.causal/1` JSON document.

use holdup_analysis::causal::CausalProfile;
use std::io::{self, Write};

pub const SCHEMA: &str = "holdup.causal/1";

/// The JSON document (one object, schema `holdup.causal/1`).
pub fn json(p: &CausalProfile) -> serde_json::Value {
    let mut v = serde_json::to_value(p).expect("plain data serializes");
    if let Some(obj) = v.as_object_mut() {
        obj.insert("schema".into(), SCHEMA.into());
    }
    v
}

pub fn write_json(p: &CausalProfile, mut w: impl Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut w, &json(p))?;
    writeln!(w)
}

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A sparkline of program speedup over line speedup 0, 10, …, 100%.
fn sparkline(t: &holdup_analysis::causal::TargetCurve, top: f64) -> String {
    (0..=10)
        .map(|i| {
            let v = t.predict(i as f64 / 10.0).unwrap_or(0.0);
            if v <= 0.0 || top <= 0.0 {
                ' '
            } else {
                let idx = ((v / top) * 7.0).round().clamp(0.0, 7.0) as usize;
                BARS[idx]
            }
        })
        .collect()
}

fn pct(v: f64) -> String {
    format!("{:+.0}%", v * 100.0)
}

/// A 95% interval as `+28…+35%`.
fn interval(i: Option<[f64; 2]>) -> String {
    i.map_or("-".to_string(), |[low, high]| {
        format!("{:+.0}…{:+.0}%", low * 100.0, high * 100.0)
    })
}

/// Targets ranked by the best predicted program speedup, each with its
/// curve at 25% steps and a sparkline of 10% steps.
pub fn write_text(p: &CausalProfile, mut w: impl Write) -> io::Result<()> {
    let Some(point) = &p.progress_point else {
        writeln!(w, "holdup causal: no experiment measured a progress point")?;
        return Ok(());
    };
    let unit = |ns: f64| {
        if ns >= 1e9 {
            format!("{:.2} s", ns / 1e9)
        } else if ns >= 1e6 {
            format!("{:.2} ms", ns / 1e6)
        } else {
            format!("{:.1} µs", ns / 1e3)
        }
    };
    writeln!(
        w,
        "holdup causal: {} experiments; progress point {:?}: {} per visit at baseline ({} experiments at 0%)",
        p.experiments,
        point,
        unit(p.baseline_ns),
        p.baseline_experiments
    )?;
    if p.progress_points.len() > 1 {
        writeln!(
            w,
            "  (other progress points: {})",
            p.progress_points
                .iter()
                .filter(|n| *n != point)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    if p.targets.is_empty() {
        writeln!(w, "no targets")?;
        return Ok(());
    }
    writeln!(w)?;
    let width = p
        .targets
        .iter()
        .map(|t| t.target.chars().count())
        .max()
        .unwrap_or(6)
        .clamp(6, 60);
    let top = p
        .targets
        .iter()
        .map(|t| t.max_program_speedup)
        .fold(0.0, f64::max);
    writeln!(
        w,
        "{:>3}  {:<width$}  {:>8} {:>5} {:>6}  {:>6} {:>11}   {:>5} {:>5} {:>5} {:>5}   curve 0→100%",
        "#", "target", "samples", "exp", "spread", "best", "sure", "25%", "50%", "75%", "100%"
    )?;
    for (i, t) in p.targets.iter().enumerate() {
        let spread = t
            .spread
            .map_or("-".to_string(), |s| format!("±{:.0}%", s * 50.0));
        if !t.enough_data {
            // A curve needs three speedups: no number rather than a guess.
            writeln!(
                w,
                "{:>3}  {:<width$}  {:>8} {:>5} {:>6}  too few experiments to predict",
                i + 1,
                t.target,
                t.samples,
                t.experiments,
                spread
            )?;
            continue;
        }
        if t.no_measurable_effect {
            // Its curve is noise: no number that reads as a prediction.
            writeln!(
                w,
                "{:>3}  {:<width$}  {:>8} {:>5} {:>6}  no measurable effect (every point's 95% interval holds 0; best {})",
                i + 1,
                t.target,
                t.samples,
                t.experiments,
                spread,
                interval(t.best_interval)
            )?;
            continue;
        }
        let at = |s: f64| t.predict(s).map_or("-".to_string(), pct);
        // An outer frame of nearly all the work: its number is true, and
        // says that everything faster is faster.
        let encloses = match t.program_share {
            Some(share) if t.encloses_program => {
                format!("   encloses {:.0}% of the program", share * 100.0)
            }
            _ => String::new(),
        };
        writeln!(
            w,
            "{:>3}  {:<width$}  {:>8} {:>5} {:>6}  {:>6} {:>11}   {:>5} {:>5} {:>5} {:>5}   {}{}",
            i + 1,
            t.target,
            t.samples,
            t.experiments,
            spread,
            pct(t.max_program_speedup),
            interval(t.best_interval),
            at(0.25),
            at(0.5),
            at(0.75),
            at(1.0),
            sparkline(t, top),
            encloses,
        )?;
    }
    writeln!(w)?;
    writeln!(w, "Program speedup predicted if the target were made faster by 25–100%; samples are weighted sample points;")?;
    writeln!(w, "exp: experiments on the target (ranked from 10, at three speedups); spread: half the interquartile range of single experiments around the curve;")?;
    writeln!(w, "sure: the 95% interval (bootstrap over experiments) of the point whose low end is highest, which ranks the targets.")?;
    if p.targets
        .iter()
        .any(|t| t.encloses_program && t.enough_data && !t.no_measurable_effect)
    {
        writeln!(w, "encloses: a function whose experiments took in most of the program's samples, nearly all in what it calls;")?;
        writeln!(
            w,
            "making it faster makes everything faster: ranked after the places inside it."
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdup_analysis::causal::{analyze, CozProfile};

    #[test]
    fn json_has_the_contract_fields() {
        let text = "startup\ttime=1\n\
experiment\tselected=/a.c:1\tspeedup=0.00\tduration=100\tselected-samples=1\n\
throughput-point\tname=p\tdelta=10\n\
experiment\tselected=/a.c:1\tspeedup=0.50\tduration=100\tselected-samples=1\n\
throughput-point\tname=p\tdelta=15\n";
        let p = analyze(&CozProfile::parse(text.as_bytes()).unwrap());
        let v = json(&p);
        assert_eq!(v["schema"], SCHEMA);
        assert_eq!(v["progress_points"][0], "p");
        let t = &v["targets"][0];
        assert_eq!(t["target"], "a.c:1");
        assert_eq!(t["kind"], "line");
        assert!(t["max_program_speedup"].is_number());
        assert!(t["curve"][1]["speedup"].is_number());
        assert!(t["curve"][1]["program_speedup"].is_number());
        assert!(t["curve"][1]["experiments"].is_number());
        let mut out = Vec::new();
        write_text(&p, &mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("a.c:1"), "{s}");
        // One non-zero speedup is no curve: no number is printed for it.
        assert!(s.contains("too few experiments to predict"), "{s}");
        assert!(t["spread"].is_null(), "{t}");
    }

    #[test]
    fn a_function_around_the_program_says_so() {
        let mut text = String::from("startup\ttime=1\n");
        for _ in 0..4 {
            for pct in [0u32, 25, 50, 75, 100] {
                let visits = (100.0 / (1.0 - 0.8 * pct as f64 / 100.0)).round();
                text.push_str(&format!(
                    "experiment\tselected=db:outer\tspeedup={:.2}\tduration=1000000\tselected-samples=90\tkind=function\tprogram-samples=100\n\
                     throughput-point\tname=p\tdelta={visits}\n",
                    pct as f64 / 100.0
                ));
            }
        }
        text.push_str(
            "samples\tlocation=db:outer\tcount=1\nsamples\tlocation=db:inner\tcount=99\n",
        );
        let p = analyze(&CozProfile::parse(text.as_bytes()).unwrap());
        let v = json(&p);
        assert_eq!(v["targets"][0]["encloses_program"], true);
        assert!((v["targets"][0]["program_share"].as_f64().unwrap() - 0.9).abs() < 1e-9);
        let mut out = Vec::new();
        write_text(&p, &mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.contains("+80%") && s.contains("encloses 90% of the program"),
            "{s}"
        );
        assert!(s.contains("ranked after the places inside it"), "{s}");
    }
}
