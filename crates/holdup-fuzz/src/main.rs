//! `holdup-fuzz [--seed N] [--inputs N] [--seconds S] [--corpus DIR]
//! [--crashes DIR] [--replay INDEX --out FILE]`

use holdup_fuzz::{fuzz, make_input, Config};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

fn usage() -> ExitCode {
    eprintln!(
        "usage: holdup-fuzz [--seed N] [--inputs N] [--seconds S] [--corpus DIR] [--crashes DIR] [--replay INDEX --out FILE]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut cfg = Config {
        max_inputs: u64::MAX,
        progress_every: 250_000,
        ..Default::default()
    };
    let mut replay = None;
    let mut out = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let Some(v) = args.next() else {
            return usage();
        };
        let num = || v.parse::<u64>().ok();
        match a.as_str() {
            "--seed" => cfg.seed = num().unwrap_or(1),
            "--inputs" => cfg.max_inputs = num().unwrap_or(0),
            "--seconds" => cfg.max_time = num().map(Duration::from_secs),
            "--replay" => replay = num(),
            "--out" => out = Some(PathBuf::from(&v)),
            "--crashes" => cfg.crash_dir = Some(PathBuf::from(&v)),
            "--corpus" => {
                let Ok(dir) = std::fs::read_dir(&v) else {
                    eprintln!("holdup-fuzz: cannot read {v}");
                    return ExitCode::from(2);
                };
                for e in dir.flatten() {
                    if let Ok(b) = std::fs::read(e.path()) {
                        if b.len() <= holdup_fuzz::MAX_INPUT {
                            cfg.corpus.push(b);
                        }
                    }
                }
            }
            _ => return usage(),
        }
    }
    if let Some(index) = replay {
        let input = make_input(cfg.seed, index, &cfg.corpus);
        let out = out.unwrap_or_else(|| PathBuf::from(format!("input-{index}.bin")));
        if let Err(e) = std::fs::write(&out, &input) {
            eprintln!("holdup-fuzz: {}: {e}", out.display());
            return ExitCode::from(2);
        }
        eprintln!("holdup-fuzz: wrote input {index} to {}", out.display());
        return match holdup_fuzz::check(&input) {
            Some((msg, at)) => {
                eprintln!("holdup-fuzz: it panics at {at}: {msg}");
                ExitCode::FAILURE
            }
            None => ExitCode::SUCCESS,
        };
    }
    let s = fuzz(&cfg);
    let secs = s.elapsed.as_secs_f64();
    println!(
        "holdup-fuzz: seed {}: {} inputs in {:.1} s ({:.0}/s), {} read as traces, corpus {}, largest input {} B, peak live memory {:.1} MiB, {} panics at {} places",
        cfg.seed,
        s.inputs,
        secs,
        s.inputs as f64 / secs.max(1e-9),
        s.traces_read,
        cfg.corpus.len(),
        s.largest_input,
        s.peak_live_bytes as f64 / (1 << 20) as f64,
        s.panics,
        s.crashes.len()
    );
    for c in &s.crashes {
        println!(
            "holdup-fuzz: input {} ({} B) panics at {}: {}",
            c.index,
            c.input.len(),
            c.location,
            c.message
        );
    }
    if s.crashes.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
