//! `holdup agent`: record the whole machine (or some processes)
//! continuously and send every interval's profile — on-CPU and blocked
//! samples, per process — to an OpenTelemetry Collector as OTLP profiles
//! over HTTP, until stopped.
//!
//! The recording is the session's ([`holdup_record::windows`]); the
//! encoding is [`holdup_render::export::otlp`]; sending goes through the
//! push's HTTP client (https, authentication, headers) from a bounded
//! buffer ([`sender`]).

mod otel_env;
mod resource;
mod sender;

pub use otel_env::resource_attributes;
pub use resource::processes_of_trace;

use anyhow::bail;
use holdup_analysis::profile::Filter;
use holdup_bpf::{RecorderOptions, Target};
use holdup_record::session::Config;
use holdup_record::windows::{self, Window};
use holdup_render::export::{self, otlp, StackSample};
use holdup_trace::Class;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// The default sampling rate: low enough to stay on (peers use 19 to 100
/// Hz), a prime so that it does not run in step with periodic work.
pub const DEFAULT_FREQ: u64 = 19;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Sampling frequency in Hz; on-CPU and blocked samples share its
    /// period. Low by default: the agent stays on.
    #[arg(short = 'F', long = "freq", default_value_t = DEFAULT_FREQ, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub freq: u64,
    /// Send a profile every this many seconds.
    #[arg(long, default_value_t = 10.0, value_parser = positive_seconds)]
    pub interval: f64,
    /// Stop after this many seconds (default: until SIGTERM or SIGINT,
    /// which send what is pending first).
    #[arg(long, value_parser = positive_seconds)]
    pub duration: Option<f64>,
    /// Only these processes (comma-separated pids) instead of the whole
    /// machine; the agent keeps running when they exit.
    #[arg(short, long, value_delimiter = ',', conflicts_with = "cgroup")]
    pub pid: Vec<u32>,
    /// Only processes in this cgroup (a directory of the cgroup v2
    /// hierarchy) and below it.
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<PathBuf>,
    /// The Collector's OTLP/HTTP base URL (http://HOST:4318): profiles go
    /// to its /v1development/profiles. Default: OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT
    /// (the whole URL), else OTEL_EXPORTER_OTLP_ENDPOINT (a base URL),
    /// else http://localhost:4318.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// gzip or none; default: OTEL_EXPORTER_OTLP_COMPRESSION, else gzip.
    #[arg(long, value_name = "gzip|none")]
    pub compression: Option<String>,
    /// Unsent requests kept in memory while the Collector is unreachable;
    /// more are dropped, and counted.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub buffer: u32,
    /// Give up one attempt to send after this many seconds.
    #[arg(long, default_value_t = 10.0, value_parser = positive_seconds)]
    pub timeout: f64,
    /// At the end, try to send what is pending for at most this many
    /// seconds.
    #[arg(long, default_value_t = 5.0, value_parser = positive_seconds)]
    pub flush_timeout: f64,
    /// Largest request in bytes (before compression): a larger profile is
    /// split by process, and a process too large alone keeps its heaviest
    /// samples. The Collector refuses requests over 20 MiB.
    #[arg(long, default_value_t = 16 << 20, value_parser = clap::value_parser!(u64).range(1024..=(64 << 20)), hide = true)]
    pub max_request_bytes: u64,
    /// Bytes of user stack copied per sample for unwinding through code
    /// without frame pointers.
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(0..=4096))]
    pub stack_bytes: u32,
    /// Blocked-sample stacks taken per second at most (all CPUs
    /// together): above it short blocked intervals have their stacks taken
    /// at random, weighted by the inverse of their odds, so that shares
    /// stay unbiased while every blocked interval's time is counted.
    #[arg(long, value_name = "PER_SECOND", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub stack_budget: u32,
    /// Ring buffer size in MiB (a power of two).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=2048))]
    pub ring_mb: u32,
    #[command(flatten)]
    pub connect: crate::upload::ConnectArgs,
}

fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("'{s}' is not a positive number of seconds")),
    }
}

/// What one window gave, for its log line.
#[derive(Default)]
struct Sent {
    cpu_points: u64,
    blocked_points: u64,
    processes: usize,
    requests: usize,
    bytes: usize,
    capped_samples: u64,
}

/// What the agent keeps from window to window.
struct Agent {
    sender: sender::Sender,
    processes: resource::Processes,
    common: Vec<(String, otlp::Value)>,
    max_request_bytes: usize,
    windows: u64,
}

impl Agent {
    fn window(&mut self, w: &Window) -> Sent {
        let samples: Vec<StackSample> = export::stack_samples(w.trace, &Filter::default());
        let mut pids: Vec<u32> = samples.iter().map(|s| s.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        let attrs = self.processes.of(w.trace, &pids);
        let mut out = Sent {
            processes: attrs.len(),
            ..Default::default()
        };
        for s in &samples {
            if s.class == Class::Cpu {
                out.cpu_points += s.points;
            } else {
                out.blocked_points += s.points;
            }
        }
        let req = otlp::Request {
            trace: w.trace,
            samples: &samples,
            start_unix_ns: w.start_unix_ns,
            duration_ns: w.duration_ns,
            processes: &attrs,
            common: &self.common,
            stack_sampling_ratio: w.stack_sampling_ratio,
        };
        let capped = otlp::encode_capped(&req, self.max_request_bytes);
        out.capped_samples = capped.dropped_samples;
        for r in capped.requests {
            out.requests += 1;
            out.bytes += r.len();
            self.sender.push(r);
        }
        out
    }

    fn log(&self, w: &Window, sent: &Sent) {
        let st = self.sender.stats();
        let mut extra = String::new();
        if w.lost_events > 0 {
            extra += &format!(", {} events lost by the recorder", w.lost_events);
        }
        if w.stack_sampling_ratio > 1.0 {
            extra += &format!(
                ", blocked-sample stacks taken for 1 in {:.2} intervals (weights scaled)",
                w.stack_sampling_ratio
            );
        }
        if w.user_stacks_given_up > 0 {
            extra += &format!(
                ", {} blocked samples of threads without rseq without user stack (no task work took it; no sys_exit hook under a stack budget)",
                w.user_stacks_given_up
            );
        }
        if sent.capped_samples > 0 {
            extra += &format!(
                ", {} samples left out of requests too large",
                sent.capped_samples
            );
        }
        eprintln!(
            "holdup agent: window {}: {} on-CPU and {} blocked samples of {} processes in {} request{} ({:.1} kB); sent {}, retried {}, dropped {}, refused {}, pending {}; holding {} stacks ({} made), {} symbols, {} files' symbol tables, {} address spaces{extra}",
            self.windows,
            sent.cpu_points,
            sent.blocked_points,
            sent.processes,
            sent.requests,
            if sent.requests == 1 { "" } else { "s" },
            sent.bytes as f64 / 1e3,
            st.sent,
            st.retried,
            st.dropped,
            st.refused,
            st.pending,
            w.held.stacks,
            w.held.stacks_made,
            w.held.symbols,
            w.held.files,
            w.held.processes
        );
    }
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let url = otel_env::endpoint(a.endpoint.as_deref());
    let mut connect = a.connect.clone();
    for (k, v) in otel_env::headers()? {
        if !connect
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(&k))
        {
            connect.headers.push((k, v));
        }
    }
    let endpoint = crate::upload::Endpoint::new(&url, &connect)
        .map_err(|e| crate::upload::redacted(e, None))?;
    let gzip = otel_env::gzip(a.compression.as_deref())?;
    let common = otel_env::resource_attributes()?;
    let cgroup = a
        .cgroup
        .as_deref()
        .map(holdup_record::cgroup::resolve)
        .transpose()?;
    if !a.ring_mb.is_power_of_two() {
        bail!("--ring-mb must be a power of two");
    }
    for &pid in &a.pid {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            bail!("no process with pid {pid}");
        }
    }
    let target = if a.pid.is_empty() {
        Target::All
    } else {
        Target::Pids(a.pid.clone())
    };
    let period_ns = 1_000_000_000 / a.freq;
    let cfg = Config {
        output: PathBuf::new(),
        target: target.clone(),
        command: Vec::new(),
        period_ns,
        duration: a.duration.map(Duration::from_secs_f64),
        verbose: false,
        options: RecorderOptions {
            target,
            period_ns,
            follow_children: true,
            // No wait-for graph is sent: its segments would cost for nothing.
            segments: false,
            block_io: false,
            stack_copy_bytes: a.stack_bytes,
            ring_bytes: a.ring_mb << 20,
            syscalls: None,
            own_preemption_is_delay: false,
            cgroup: cgroup.as_ref().map(|c| c.filter),
            stack_budget: a.stack_budget,
            goroutines: false,
            // The profiles sent name the waker, not its stacks.
            waker_stacks: false,
        },
        cgroup,
        flight: None,
    };
    eprintln!(
        "holdup agent: sampling at {} Hz, a profile every {} s to {}",
        a.freq, a.interval, endpoint.url
    );
    let endpoint = Arc::new(endpoint);
    let mut agent = Agent {
        sender: sender::Sender::start(
            endpoint.clone(),
            sender::Options {
                gzip,
                buffer: a.buffer as usize,
                timeout: Duration::from_secs_f64(a.timeout),
            },
        ),
        processes: resource::Processes::default(),
        common,
        max_request_bytes: a.max_request_bytes as usize,
        windows: 0,
    };
    let result = windows::record_windows(&cfg, Duration::from_secs_f64(a.interval), |w| {
        agent.windows += 1;
        let sent = agent.window(&w);
        agent.log(&w, &sent);
        Ok(())
    });
    let windows = agent.windows;
    let st = agent
        .sender
        .finish(Duration::from_secs_f64(a.flush_timeout));
    result?;
    eprintln!(
        "holdup agent: stopped after {windows} windows: sent {} requests ({:.1} kB), retried {} times, dropped {} (buffer full or unsent at the end), refused {}{}",
        st.sent,
        st.sent_bytes as f64 / 1e3,
        st.retried,
        st.dropped,
        st.refused,
        if st.rejected_profiles > 0 {
            format!(", {} profiles rejected by the receiver", st.rejected_profiles)
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}
