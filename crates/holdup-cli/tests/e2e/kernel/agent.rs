//! `holdup agent` against a real OpenTelemetry Collector (built once per
//! machine by tests/otelcol/build.sh from the Go module proxy), which
//! forwards what it receives to a sink that decodes it with the official
//! OTLP protos: every interval's profile arrives, its blocked samples have
//! subclasses, a thread that computes half of the time shows half, the
//! resource attributes are there; a Collector killed for a while costs
//! what the buffer bound says, counted. Needs root and BPF (the settings
//! that are refused before recording are in cli/agent.rs).

use crate::support::cgroups::{cgroup2_mount, Cgroups};
use crate::support::*;
use holdup_testkit::scratch;
use serde_json::Value;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn otelcol_dir() -> PathBuf {
    repo_root().join("crates/holdup-cli/tests/otelcol")
}

/// The Collector and the sink's Python, built (or taken from the cache)
/// by build.sh; None, said, when this machine cannot build them.
fn tools() -> Option<(PathBuf, PathBuf)> {
    let out = Command::new(otelcol_dir().join("build.sh"))
        .stderr(Stdio::inherit())
        .bounded_output();
    if out.status.code() == Some(3) {
        eprintln!("SKIPPED: the OpenTelemetry Collector cannot be built here (see above)");
        return None;
    }
    assert!(out.status.success(), "tests/otelcol/build.sh failed");
    let text = String::from_utf8(out.stdout).unwrap();
    let get = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("build.sh printed no {k}: {text}"))
    };
    Some((get("collector="), get("python=")))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for_port(port: u16, what: &str) {
    let until = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills the process when dropped, so a failing test leaves nothing.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The sink behind the Collector, and the Collector.
struct Pipeline {
    collector_bin: PathBuf,
    receiver: u16,
    sink_port: u16,
    /// One JSON line per request the sink received.
    received: PathBuf,
    log: PathBuf,
    collector: Option<Running>,
    _sink: Running,
}

impl Pipeline {
    fn start(dir: &Path, (collector_bin, python): (PathBuf, PathBuf)) -> Pipeline {
        let sink_port = free_port();
        let received = dir.join("received.jsonl");
        let sink = Command::new(python)
            .arg(otelcol_dir().join("sink.py"))
            .arg(sink_port.to_string())
            .arg(&received)
            .spawn()
            .expect("the sink");
        let sink = Running(sink);
        wait_for_port(sink_port, "the sink");
        let mut p = Pipeline {
            collector_bin,
            receiver: free_port(),
            sink_port,
            received,
            log: dir.join("collector.log"),
            collector: None,
            _sink: sink,
        };
        p.start_collector();
        p
    }

    fn start_collector(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(&self.collector_bin)
            .arg(format!(
                "--config=file:{}",
                otelcol_dir().join("config.yaml").display()
            ))
            .arg("--feature-gates=service.profilesSupport")
            .env("RECEIVER", format!("127.0.0.1:{}", self.receiver))
            .env("SINK", format!("127.0.0.1:{}", self.sink_port))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("the collector");
        self.collector = Some(Running(child));
        wait_for_port(self.receiver, "the collector");
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.receiver)
    }

    /// The requests the sink decoded, once there are `n` (the Collector
    /// forwards them a moment later).
    fn requests(&self, n: usize) -> Vec<Value> {
        let until = Instant::now() + Duration::from_secs(15);
        loop {
            let text = std::fs::read_to_string(&self.received).unwrap_or_default();
            let got: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            if got.len() >= n || Instant::now() > until {
                return got;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The number after `key` in the agent's closing line.
fn closing_count(stderr: &str, key: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("holdup agent: stopped after"))
        .unwrap_or_else(|| panic!("no closing line:\n{stderr}"));
    let after = line
        .split(key)
        .nth(1)
        .unwrap_or_else(|| panic!("no '{key}' in {line}"));
    after.trim().split(' ').next().unwrap().parse().unwrap()
}

/// The window lines of the agent's log: (requests made, pending).
fn window_lines(stderr: &str) -> Vec<(u64, u64)> {
    let num = |l: &str, before: &str| -> u64 {
        l.split(before)
            .next()
            .unwrap()
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    stderr
        .lines()
        .filter(|l| l.starts_with("holdup agent: window "))
        .map(|l| {
            let pending = l.split("pending ").nth(1).unwrap();
            (
                num(l, " request"),
                pending.split([',', ' ']).next().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

fn half_sleeper(iterations: u32) -> Running {
    let bin = workload("half_sleeper");
    Running(
        Command::new(bin)
            .arg(iterations.to_string())
            .spawn()
            .unwrap(),
    )
}

fn agent(endpoint: &str, pid: u32, extra: &[&str]) -> std::process::Output {
    holdup()
        .args(["agent", "--endpoint", endpoint, "-p", &pid.to_string()])
        .args(extra)
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment=e2e,team=a%2Cb",
        )
        .bounded_output()
}

#[test]
#[ignore = "needs root and BPF"]
fn every_interval_reaches_the_collector_with_blocked_samples_and_attributes() {
    let Some(tools) = tools() else { return };
    let _serial = serial();
    let dir = scratch("agent_collector");
    let pipe = Pipeline::start(&dir, tools);
    // 10 ms on the CPU, 10 ms asleep, for about 8 s.
    let work = half_sleeper(400);
    let pid = work.0.id();
    let out = agent(
        &pipe.endpoint(),
        pid,
        &["-F", "199", "--interval", "1", "--duration", "4"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{stderr}");
    assert!(out.status.success(), "{stderr}");
    let windows = window_lines(&stderr);
    let made: u64 = windows.iter().map(|w| w.0).sum();
    let sent = closing_count(&stderr, "sent");
    assert!(windows.len() >= 3, "{stderr}");
    assert_eq!(made, windows.len() as u64, "one request per window");
    assert_eq!(sent, made, "every request sent: {stderr}");
    assert_eq!(closing_count(&stderr, "dropped"), 0);
    let got = pipe.requests(sent as usize);
    assert_eq!(got.len() as u64, sent, "every request reached the sink");

    let (mut cpu, mut sleeping, mut subclasses) = (0u64, 0u64, std::collections::BTreeSet::new());
    for req in &got {
        assert_eq!(req["path"], "/v1development/profiles");
        for r in req["resources"].as_array().unwrap() {
            let a = &r["attrs"];
            assert_eq!(a["process.pid"], pid, "{a}");
            assert_eq!(a["process.executable.name"], "half_sleeper", "{a}");
            assert!(a["host.name"].as_str().is_some_and(|h| !h.is_empty()));
            assert!(a["process.linux.cgroup"].is_string(), "{a}");
            assert_eq!(a["deployment.environment"], "e2e");
            assert_eq!(a["team"], "a,b");
            for p in r["profiles"].as_array().unwrap() {
                assert_eq!(p["scope"], "holdup");
                let period = p["period"].as_u64().unwrap();
                assert_eq!(period, 1_000_000_000 / 199);
                for s in p["samples"].as_array().unwrap() {
                    let sa = &s["attrs"];
                    let v: u64 = s["values"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_u64().unwrap())
                        .sum();
                    let worker = sa["thread.name"] == "half_sleeper" && sa["thread.id"] != pid;
                    match p["sample_type"].as_str().unwrap() {
                        "samples" => {
                            assert!(sa.get("holdup.blocked.subclass").is_none());
                            if worker {
                                cpu += v;
                            }
                        }
                        "off_cpu" => {
                            let class = sa["holdup.blocked.subclass"].as_str().unwrap();
                            subclasses.insert(class.to_string());
                            assert!(sa["holdup.wait.reason"].is_string() || class == "sched");
                            if worker && class == "other" {
                                sleeping += v / period;
                            }
                        }
                        t => panic!("sample type {t}"),
                    }
                    assert!(!s["stack"].as_array().unwrap().is_empty());
                }
            }
        }
    }
    eprintln!("worker: {cpu} on-CPU points, {sleeping} asleep; subclasses {subclasses:?}");
    assert!(subclasses.contains("other"), "nanosleep: {subclasses:?}");
    assert!(
        subclasses.contains("lock"),
        "the main thread joins: {subclasses:?}"
    );
    // Up to 4 s at 199 Hz, less what it waited for a CPU on a busy machine;
    // half of the rest on the CPU.
    assert!(cpu + sleeping >= 100, "{cpu} + {sleeping}");
    assert_near(
        "the worker's on-CPU share",
        cpu as f64 / (cpu + sleeping) as f64,
        0.5,
        0.12,
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn a_collector_down_for_a_while_costs_at_most_the_buffer_and_is_counted() {
    let Some(tools) = tools() else { return };
    let _serial = serial();
    let dir = scratch("agent_collector_down");
    let mut pipe = Pipeline::start(&dir, tools);
    let work = half_sleeper(500);
    let pid = work.0.id();
    let endpoint = pipe.endpoint();
    let agent = std::thread::spawn(move || {
        agent(
            &endpoint,
            pid,
            &[
                "--interval",
                "0.5",
                "--duration",
                "7",
                "--buffer",
                "2",
                "--flush-timeout",
                "3",
            ],
        )
    });
    // Down from about 1.5 s to 4.5 s: six windows, room for two.
    std::thread::sleep(Duration::from_millis(1500));
    pipe.collector = None;
    std::thread::sleep(Duration::from_secs(3));
    pipe.start_collector();
    let out = agent.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{stderr}");
    assert!(out.status.success(), "{stderr}");
    let windows = window_lines(&stderr);
    let made: u64 = windows.iter().map(|w| w.0).sum();
    let (sent, dropped, refused) = (
        closing_count(&stderr, "sent"),
        closing_count(&stderr, "dropped"),
        closing_count(&stderr, "refused"),
    );
    assert_eq!(
        sent + dropped + refused,
        made,
        "every request accounted for"
    );
    assert_eq!(refused, 0);
    assert!(dropped >= 1, "a full buffer drops: {stderr}");
    assert!(closing_count(&stderr, "retried") >= 1, "{stderr}");
    assert!(
        windows.iter().all(|w| w.1 <= 2),
        "never more pending than the buffer: {windows:?}"
    );
    assert!(sent >= 4, "sent before and after the outage: {stderr}");
    let got = pipe.requests(sent as usize);
    assert_eq!(got.len() as u64, sent, "what was sent arrived");
}

#[test]
#[ignore = "needs root and BPF"]
fn a_containers_processes_are_named_by_their_cgroup_and_sigterm_sends_what_is_pending() {
    let Some(tools) = tools() else { return };
    let _serial = serial();
    let dir = scratch("agent_cgroup");
    let pipe = Pipeline::start(&dir, tools);
    // A pod and a container as the kubelet's cgroupfs driver names them.
    let uid = "f6f2d169-f2ae-4afa-95ed-06ff2ed6b288";
    let id = "b4d6d161c62525d726fa394b27df30e14f8ea5646313ada576b390de70cfc8cc";
    let top = cgroup2_mount().join(format!("holdup-e2e-{}", std::process::id()));
    let container = top.join(format!("pod{uid}")).join(id);
    let cgroups = Cgroups::make(vec![
        top.clone(),
        top.join(format!("pod{uid}")),
        container.clone(),
    ]);
    let work = half_sleeper(400);
    let pid = work.0.id();
    std::fs::write(container.join("cgroup.procs"), pid.to_string()).unwrap();

    let mut agent = Running(
        holdup()
            .args([
                "agent",
                "--endpoint",
                &pipe.endpoint(),
                "--interval",
                "1",
                "-F",
                "99",
            ])
            .arg("--cgroup")
            .arg(&top)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(3500));
    unsafe { libc::kill(agent.0.id() as i32, libc::SIGTERM) };
    let mut stderr = String::new();
    std::io::Read::read_to_string(agent.0.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    let status = agent.0.wait().unwrap();
    eprintln!("{stderr}");
    assert!(status.success(), "SIGTERM ends it with 0: {stderr}");
    let made: u64 = window_lines(&stderr).iter().map(|w| w.0).sum();
    let sent = closing_count(&stderr, "sent");
    assert!(made >= 2, "{stderr}");
    assert_eq!(sent, made, "what was pending at SIGTERM was sent: {stderr}");
    let got = pipe.requests(sent as usize);
    assert_eq!(got.len() as u64, sent);
    for req in &got {
        for r in req["resources"].as_array().unwrap() {
            let a = &r["attrs"];
            assert_eq!(a["process.pid"], pid, "only the cgroup's processes: {a}");
            assert_eq!(a["container.id"], id, "{a}");
            assert_eq!(a["k8s.pod.uid"], uid, "{a}");
        }
    }
    drop(work);
    drop(cgroups);
}
