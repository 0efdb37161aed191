//! Stripped binaries by name: the debug information of a program is kept
//! apart (`objcopy --only-keep-debug`) and served by a real debuginfod
//! server; the program that runs is stripped (its build-id stays). The
//! recording fetches the debug file by build-id into the user's cache and
//! names the program's function and line from it; a later recording, with
//! no server, finds it there.

use crate::support::debug_split::{build_id, private_cache, split};
use crate::support::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A debuginfod serving the files under a directory, on a free port.
struct Debuginfod {
    child: Child,
    url: String,
}

impl Drop for Debuginfod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The HTTP status of `GET url` (0 if nothing answers).
fn status_of(url: &str) -> u32 {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let Ok(mut s) = std::net::TcpStream::connect(host) else {
        return 0;
    };
    let _ = write!(s, "GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n");
    let mut head = [0u8; 12];
    if s.read_exact(&mut head).is_err() {
        return 0;
    }
    String::from_utf8_lossy(&head[9..12]).parse().unwrap_or(0)
}

impl Debuginfod {
    /// Serve `dir`; ready once it serves the debug file of `build_id`.
    fn serve(dir: &Path, build_id: &str) -> Debuginfod {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let db = dir.with_file_name("debuginfod.sqlite");
        let child = Command::new("debuginfod")
            .args(["-F", dir.to_str().unwrap(), "-d", db.to_str().unwrap()])
            .args(["-p", &port.to_string(), "-t", "0", "-g", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("debuginfod (scripts/deps installs it)");
        let server = Debuginfod {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let file = format!("{}/buildid/{build_id}/debuginfo", server.url);
        let began = Instant::now();
        while status_of(&file) != 200 {
            assert!(
                began.elapsed() < Duration::from_secs(30),
                "debuginfod did not serve {file} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }
}

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

/// Function and line specs of a stripped binary (`--progress` and
/// `--latency` of causal runs, `--func` of latency) are found in its debug
/// file, fetched from a debuginfod server as recordings fetch it: the C++
/// overloads by their demangled name, at the offsets the unstripped binary
/// gives them.
#[test]
fn probe_specs_of_a_stripped_binary_come_from_its_debug_file() {
    use holdup_coz::probe::{function_at, resolve};
    let _serial = serial();
    let dir = scratch("debuginfod_specs");
    let src = repo_root().join("workloads/overloads.cpp");
    let full = cxx(&src, &dir.join("overloads"), &["-O2"]);
    let bin = split(&full, &dir);
    let id = build_id(&bin);
    // Stripped, and no debug file found yet: no such function.
    let e = resolve(Some(&bin), "ns::Cls::work").unwrap_err();
    assert!(e.contains("no function 'ns::Cls::work'"), "{e}");

    let server = Debuginfod::serve(&dir.join("served"), &id);
    let cache = private_cache(&dir);
    // What `holdup causal run` and `holdup latency` do first, with this
    // test's cache and server.
    // Set in this process for the library calls below and taken away
    // again (also on a panic): the other end-to-end tests share the
    // process and must not meet this test's server.
    let _env = ScopedEnv::set(&[
        ("XDG_CACHE_HOME", cache.as_os_str()),
        ("DEBUGINFOD_URLS", server.url.as_ref()),
    ]);
    holdup_record::embed_symbols::find_debug_files_for_specs();
    let stripped = resolve(Some(&bin), "ns::Cls::work").unwrap();
    let unstripped = resolve(Some(&full), "ns::Cls::work").unwrap();
    assert_eq!(stripped.len(), 2);
    let offsets = |s: &[holdup_coz::probe::Site]| s.iter().map(|s| s.offset).collect::<Vec<_>>();
    assert_eq!(offsets(&stripped), offsets(&unstripped));
    // A line of the source names its function too (latency's --func FILE:LINE).
    let line = std::fs::read_to_string(&src)
        .unwrap()
        .lines()
        .position(|l| l.starts_with("void Cls::work(int x)"))
        .unwrap()
        + 1;
    assert_eq!(
        function_at(&bin, &format!("overloads.cpp:{line}")),
        Ok("_ZN2ns3Cls4workEi".to_string())
    );
    assert!(cache
        .join("holdup/debuginfod")
        .join(format!("{id}.debug"))
        .is_file());
}

/// Environment variables set until dropped.
struct ScopedEnv(Vec<&'static str>);

impl ScopedEnv {
    fn set(vars: &[(&'static str, &std::ffi::OsStr)]) -> ScopedEnv {
        for (k, v) in vars {
            std::env::set_var(k, v);
        }
        ScopedEnv(vars.iter().map(|(k, _)| *k).collect())
    }
}

impl Drop for ScopedEnv {
    fn drop(&mut self) {
        for k in &self.0 {
            std::env::remove_var(k);
        }
    }
}
