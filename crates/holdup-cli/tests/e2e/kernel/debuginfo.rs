//! Stripped binaries by name: the debug information of a program is kept
//! apart (`objcopy --only-keep-debug`) and served by a real debuginfod
//! server; the program that runs is stripped (its build-id stays). The
//! recording fetches the debug file by build-id into the user's cache and
//! names the program's function and line from it; a later recording, with
//! no server, finds it there.

use crate::support::debug_split::{build_id, private_cache, split};
use crate::support::debuginfod::*;
use crate::support::*;
use std::path::Path;

/// Record the stripped program with `env`; its `crunch` row of the report
/// (on-CPU samples, file, line), the CPU time it measured, and stderr.
fn record_crunch(dir: &Path, bin: &Path, env: &[(&str, &str)]) -> (f64, String, u64, f64, String) {
    let data = dir.join("holdup.data");
    let out = holdup()
        .args(["record", "-o", data.to_str().unwrap(), "--"])
        .arg(bin)
        .arg("1")
        .env_remove("DEBUGINFOD_URLS")
        .envs(env.iter().copied())
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let cpu = printed_value(&String::from_utf8_lossy(&out.stdout), "crunch_cpu_s");
    let r = report(&data);
    let row = threads(&r)
        .iter()
        .flat_map(|t| t["functions"].as_array().unwrap())
        .find(|f| f["symbol"] == "crunch");
    let Some(row) = row else {
        return (0.0, String::new(), 0, cpu, err);
    };
    (
        row["total"]["cpu"].as_f64().unwrap(),
        row["file"].as_str().unwrap_or_default().to_string(),
        row["line"].as_u64().unwrap(),
        cpu,
        err,
    )
}

#[test]
#[ignore = "needs root and BPF"]
fn a_stripped_binary_is_named_through_debuginfod_then_from_the_cache() {
    let _serial = serial();
    let dir = scratch("debuginfod");
    let bin = split(&workload("stripped_work"), &dir);
    let id = build_id(&bin);
    let source = repo_root().join("workloads/stripped_work.c");
    let hot_line = std::fs::read_to_string(&source)
        .unwrap()
        .lines()
        .position(|l| l.contains("CRUNCH LINE"))
        .unwrap() as u64
        + 1;
    let cache = private_cache(&dir);
    let xdg = ("XDG_CACHE_HOME", cache.to_str().unwrap());

    // Stripped and nothing to ask: no name.
    let (named, ..) = record_crunch(&dir, &bin, &[xdg]);
    assert_eq!(named, 0.0);

    let server = Debuginfod::serve(&dir.join("served"), &id);
    let (named, file, line, cpu, err) =
        record_crunch(&dir, &bin, &[xdg, ("DEBUGINFOD_URLS", &server.url)]);
    eprintln!("through debuginfod: crunch in {named} samples, {cpu:.3} s of CPU, at {file}:{line}");
    assert!(
        named / 1000.0 >= 0.9 * cpu,
        "{named} samples for {cpu} s: {err}"
    );
    assert!(file.ends_with("workloads/stripped_work.c"), "{file}");
    // The loop's two lines: its test and its body.
    assert!(
        (hot_line - 1..=hot_line).contains(&line),
        "line {line}, not {hot_line}"
    );
    assert!(!err.contains("warning"), "{err}");
    let fetched = cache.join("holdup/debuginfod").join(format!("{id}.debug"));
    assert!(fetched.is_file(), "{} was not kept", fetched.display());

    // No server any more: the file fetched before names it.
    drop(server);
    let (named, file, _, cpu, err) = record_crunch(&dir, &bin, &[xdg]);
    assert!(
        named / 1000.0 >= 0.9 * cpu,
        "{named} samples for {cpu} s: {err}"
    );
    assert!(file.ends_with("workloads/stripped_work.c"), "{file}");
}
