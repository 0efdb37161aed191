//! `holdup-fuzz --target NAME [--seed N] [--inputs N] [--seconds S]
//! [--corpus DIR] [--crashes DIR] [--replay INDEX --out FILE]`: a run of the
//! stable fuzzer on one target.
//!
//! `holdup-fuzz --target NAME --check FILE...`: run files through a target
//! (a crash found by `cargo fuzz`, say); `--seeds DIR`: write the target's
//! seeds there, as a starting corpus for `cargo fuzz`; `--list`: the targets.

use holdup_fuzz::{check, fuzz, make_input, Config, Target, TARGETS};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

fn usage() -> ExitCode {
    eprintln!(
        "usage: holdup-fuzz --target NAME [--seed N] [--inputs N] [--seconds S] [--corpus DIR] [--crashes DIR] [--replay INDEX --out FILE]\n       holdup-fuzz --target NAME --check FILE...\n       holdup-fuzz --target NAME --seeds DIR\n       holdup-fuzz --list"
    );
    ExitCode::from(2)
}

fn fail(msg: String) -> ExitCode {
    eprintln!("holdup-fuzz: {msg}");
    ExitCode::from(2)
}

/// Run `files` through `target`; failure if one panics.
fn check_files(target: &Target, files: &[String]) -> ExitCode {
    let mut status = ExitCode::SUCCESS;
    for f in files {
        let input = match std::fs::read(f) {
            Ok(b) => b,
            Err(e) => return fail(format!("{f}: {e}")),
        };
        match check(target, &input) {
            Ok(parsed) => eprintln!(
                "holdup-fuzz: {f}: ok ({}, peak live memory so far {} KiB)",
                if parsed { "parsed" } else { "refused" },
                holdup_fuzz::peak_live_bytes() >> 10
            ),
            Err((msg, at)) => {
                eprintln!("holdup-fuzz: {f}: panics at {at}: {msg}");
                status = ExitCode::FAILURE;
            }
        }
    }
    status
}

fn write_seeds(target: &Target, dir: &str) -> ExitCode {
    if let Err(e) = std::fs::create_dir_all(dir) {
        return fail(format!("{dir}: {e}"));
    }
    for (i, seed) in (target.seeds)().iter().enumerate() {
        let path = PathBuf::from(dir).join(format!("seed-{i}"));
        if let Err(e) = std::fs::write(&path, seed) {
            return fail(format!("{}: {e}", path.display()));
        }
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--list") {
        for t in TARGETS {
            println!("{:<9} {}", t.name, t.about);
        }
        return ExitCode::SUCCESS;
    }
    let Some(target) = args
        .iter()
        .position(|a| a == "--target")
        .and_then(|i| args.get(i + 1))
    else {
        return usage();
    };
    let Some(target) = holdup_fuzz::targets::by_name(target) else {
        return fail(format!("no target {target} (--list names them)"));
    };
    let mut cfg = Config {
        max_inputs: u64::MAX,
        progress_every: 250_000,
        ..Config::new(target)
    };
    let mut replay = None;
    let mut out = None;
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        if a == "--check" {
            return check_files(target, rest.as_slice());
        }
        let Some(v) = rest.next() else {
            return usage();
        };
        let num = || v.parse::<u64>().ok();
        match a.as_str() {
            "--target" => {}
            "--seeds" => return write_seeds(target, v),
            "--seed" => cfg.seed = num().unwrap_or(1),
            "--inputs" => cfg.max_inputs = num().unwrap_or(0),
            "--seconds" => cfg.max_time = num().map(Duration::from_secs),
            "--replay" => replay = num(),
            "--out" => out = Some(PathBuf::from(v)),
            "--crashes" => cfg.crash_dir = Some(PathBuf::from(v)),
            "--corpus" => {
                let Ok(dir) = std::fs::read_dir(v) else {
                    return fail(format!("cannot read {v}"));
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
            return fail(format!("{}: {e}", out.display()));
        }
        eprintln!("holdup-fuzz: wrote input {index} to {}", out.display());
        return check_files(target, &[out.display().to_string()]);
    }
    let s = fuzz(&cfg);
    let secs = s.elapsed.as_secs_f64();
    println!(
        "holdup-fuzz: {} seed {}: {} inputs in {:.1} s ({:.0}/s), {} parsed, corpus {}, largest input {} B, peak live memory {:.1} MiB, {} panics at {} places",
        target.name,
        cfg.seed,
        s.inputs,
        secs,
        s.inputs as f64 / secs.max(1e-9),
        s.parsed,
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
