//! Pushing a trace's profile, as pprof, to a continuous-profiling server:
//! Pyroscope through its HTTP ingest API (`POST /ingest?format=pprof`, the
//! gzipped profile as the body) and Parca through its profile store's
//! `WriteRaw` call, sent as gRPC-web over HTTP/1.1 (Parca serves gRPC-web
//! next to gRPC on the same port, so no HTTP/2 client is needed).
//!
//! The series carries the labels `service_name`, `host` and the user's;
//! `subclass`, `thread`, `tid` and `wait_reason` are the profile's own
//! sample labels. Transient failures (connection refused, timeouts, 5xx,
//! 429, gRPC `UNAVAILABLE`) are retried with exponential backoff until a
//! bounded total time has passed; a refusal of the profile is not retried.

use crate::cmd::input::load_trace;
use anyhow::{anyhow, bail, Context};
use holdup_analysis::profile::Filter;
use holdup_render::export::{self, pprof, protobuf::Msg};
use holdup_trace::Trace;
use std::path::Path;
use std::time::{Duration, Instant};

/// Which server's API to speak.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// Grafana Pyroscope: HTTP `POST /ingest?format=pprof` (port 4040 by default).
    Pyroscope,
    /// Parca: the profile store's WriteRaw over gRPC-web (port 7070 by default).
    Parca,
}

/// Where and how to push: shared by `holdup push` and `holdup record --push`.
#[derive(clap::Args, Clone, Debug)]
pub struct PushArgs {
    /// The server's API.
    #[arg(long, value_enum, default_value = "pyroscope")]
    pub api: Api,
    /// The `service_name` label; by default the recorded command's name.
    #[arg(long)]
    pub service: Option<String>,
    /// An extra label of the pushed profile, as NAME=VALUE (repeatable).
    #[arg(long = "label", value_name = "NAME=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// Give up pushing after this many seconds, retries included.
    #[arg(long, default_value_t = 15.0, value_parser = parse_seconds)]
    pub push_timeout: f64,
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Characters that would break Pyroscope's `app{k=v,…}` series key.
fn valid_value(value: &str) -> bool {
    !value.is_empty() && !value.contains(['{', '}', ',', '=', '"'])
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not NAME=VALUE"))?;
    if !valid_name(k) || k.starts_with("__") {
        return Err(format!(
            "'{k}' is not a label name (letters, digits and _, not starting with a digit or __)"
        ));
    }
    if !valid_value(v) {
        return Err(format!(
            "'{v}' is not a label value (non-empty, without {{}},=\")"
        ));
    }
    Ok((k.to_string(), v.to_string()))
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 3600.0 => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds in (0, 3600]")),
    }
}

/// The URL must be plain http://host[:port][/path]; the API's path is
/// appended to it.
pub fn check_url(url: &str) -> anyhow::Result<()> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        if url.starts_with("https://") {
            anyhow!("{url}: https is not supported; push over http (e.g. through a local proxy)")
        } else {
            anyhow!("{url}: not an http:// URL")
        }
    })?;
    if rest.split('/').next().unwrap_or("").is_empty() {
        bail!("{url}: no host");
    }
    Ok(())
}

/// The pushed series' labels, in order: service_name, host, then the user's.
fn series_labels(trace: &Trace, args: &PushArgs) -> anyhow::Result<Vec<(String, String)>> {
    let service = match &args.service {
        Some(s) => s.clone(),
        None => trace
            .header
            .command
            .first()
            .and_then(|c| Path::new(c).file_name())
            .map_or_else(|| "holdup".into(), |n| n.to_string_lossy().into_owned()),
    };
    if !valid_value(&service) {
        bail!("'{service}' cannot be a service name (non-empty, without {{}},=\"); give --service");
    }
    let mut labels = vec![("service_name".to_string(), service)];
    let host = &trace.header.hostname;
    if valid_value(host) {
        labels.push(("host".into(), host.clone()));
    }
    for (k, v) in &args.labels {
        match labels.iter_mut().find(|(name, _)| name == k) {
            Some(l) => l.1 = v.clone(),
            None => labels.push((k.clone(), v.clone())),
        }
    }
    Ok(labels)
}

/// One request, ready to be sent (and sent again).
struct Request {
    url: String,
    query: Vec<(&'static str, String)>,
    content_type: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    body: Vec<u8>,
}

/// Pyroscope's ingest call: the series key is `service{k=v,…}` (its
/// `service_name` label comes from the key's name).
fn pyroscope_request(
    url: &str,
    trace: &Trace,
    labels: &[(String, String)],
    gz: Vec<u8>,
) -> Request {
    let service = &labels[0].1;
    let rest: Vec<String> = labels[1..]
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let from = trace.header.start_unix_ns / 1_000_000_000;
    let duration = trace.end_ns.saturating_sub(trace.header.start_ns);
    let until = (trace.header.start_unix_ns + duration).div_ceil(1_000_000_000);
    Request {
        url: format!("{}/ingest", url.trim_end_matches('/')),
        query: vec![
            ("name", format!("{service}{{{}}}", rest.join(","))),
            ("from", from.to_string()),
            ("until", until.max(from + 1).to_string()),
            ("format", "pprof".into()),
            ("spyName", "holdup".into()),
            (
                "sampleRate",
                (1_000_000_000 / trace.header.period_ns.max(1)).to_string(),
            ),
        ],
        content_type: "application/octet-stream",
        headers: Vec::new(),
        body: gz,
    }
}

/// The gRPC method Parca's agents call.
pub const PARCA_WRITE_RAW: &str = "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw";

/// Parca's `WriteRawRequest { series: [RawProfileSeries { labels: LabelSet
/// { labels: [Label {name, value}] }, samples: [RawSample { raw_profile }] }] }`
/// in one gRPC-web frame. `__name__` names the profile, as agents do.
fn parca_request(url: &str, labels: &[(String, String)], gz: Vec<u8>) -> Request {
    let mut set = Msg::default();
    let name = ("__name__".to_string(), "holdup".to_string());
    for (k, v) in std::iter::once(&name).chain(labels) {
        let mut l = Msg::default();
        l.bytes(1, k.as_bytes());
        l.bytes(2, v.as_bytes());
        set.msg(1, l);
    }
    let mut sample = Msg::default();
    sample.bytes(1, &gz);
    let mut series = Msg::default();
    series.msg(1, set);
    series.msg(2, sample);
    let mut req = Msg::default();
    req.msg(2, series);
    let mut body = Vec::with_capacity(req.0.len() + 5);
    body.push(0); // a data frame, not compressed
    body.extend_from_slice(&(req.0.len() as u32).to_be_bytes());
    body.extend_from_slice(&req.0);
    Request {
        url: format!("{}{PARCA_WRITE_RAW}", url.trim_end_matches('/')),
        query: Vec::new(),
        content_type: "application/grpc-web+proto",
        headers: vec![("x-grpc-web", "1")],
        body,
    }
}

/// How one attempt ended.
enum Attempt {
    Done,
    /// Worth trying again (the server may come up or recover).
    Transient(String),
    /// The server refused the profile: trying again would not help.
    Refused(String),
}

/// The first line of a server's answer, for an error message.
fn first_line(body: &[u8]) -> String {
    let s = String::from_utf8_lossy(body);
    let line = s
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    line.chars().take(200).collect()
}

/// gRPC status and message: in the headers (a trailers-only answer) or in
/// the trailer frame that ends a gRPC-web body.
fn grpc_status(headers: &ureq::http::HeaderMap, body: &[u8]) -> Option<(u32, String)> {
    let from_headers = |get: &dyn Fn(&str) -> Option<String>| {
        let code = get("grpc-status")?.trim().parse().ok()?;
        Some((code, get("grpc-message").unwrap_or_default()))
    };
    if let Some(s) = from_headers(&|k| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }) {
        return Some(s);
    }
    let mut i = 0;
    while i + 5 <= body.len() {
        let flag = body[i];
        let len = u32::from_be_bytes(body[i + 1..i + 5].try_into().ok()?) as usize;
        let frame = body.get(i + 5..i + 5 + len)?;
        if flag & 0x80 != 0 {
            let text = String::from_utf8_lossy(frame);
            let get = |k: &str| {
                text.lines().find_map(|l| {
                    let (name, v) = l.split_once(':')?;
                    name.trim()
                        .eq_ignore_ascii_case(k)
                        .then(|| v.trim().to_string())
                })
            };
            return from_headers(&get);
        }
        i += 5 + len;
    }
    None
}

fn attempt(agent: &ureq::Agent, api: Api, req: &Request, timeout: Duration) -> Attempt {
    let mut call = agent
        .post(&req.url)
        .config()
        .timeout_global(Some(timeout))
        .build()
        .header("content-type", req.content_type);
    for (k, v) in &req.headers {
        call = call.header(*k, *v);
    }
    for (k, v) in &req.query {
        call = call.query(*k, v);
    }
    let mut resp = match call.send(&req.body[..]) {
        Ok(r) => r,
        Err(e) => return Attempt::Transient(e.to_string()),
    };
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(1 << 20)
        .read_to_vec()
        .unwrap_or_default();
    if status == 429 || status == 408 || status >= 500 {
        return Attempt::Transient(format!("HTTP {status} {}", first_line(&body)));
    }
    if !(200..300).contains(&status) {
        return Attempt::Refused(format!("HTTP {status} {}", first_line(&body)));
    }
    if api == Api::Parca {
        return match grpc_status(resp.headers(), &body) {
            Some((0, _)) => Attempt::Done,
            // UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED.
            Some((code @ (14 | 4 | 8 | 10), msg)) => {
                Attempt::Transient(format!("gRPC status {code} {msg}"))
            }
            Some((code, msg)) => Attempt::Refused(format!("gRPC status {code} {msg}")),
            None => Attempt::Refused("no gRPC status in the answer (not a Parca server?)".into()),
        };
    }
    Attempt::Done
}

/// Send with retries: backoff from 250 ms doubling to 4 s, every attempt
/// and pause cut to what is left of `budget`.
fn send(api: Api, req: &Request, budget: Duration) -> anyhow::Result<u32> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let deadline = Instant::now() + budget;
    let mut pause = Duration::from_millis(250);
    let mut tries = 0;
    loop {
        tries += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        match attempt(&agent, api, req, left.max(Duration::from_millis(100))) {
            Attempt::Done => return Ok(tries),
            Attempt::Refused(why) => bail!("{} refused the profile: {why}", req.url),
            Attempt::Transient(why) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    bail!(
                        "{}: {why} (gave up after {tries} attempts in {:.1} s)",
                        req.url,
                        budget.as_secs_f64()
                    );
                }
                std::thread::sleep(pause.min(left));
                pause = (pause * 2).min(Duration::from_secs(4));
            }
        }
    }
}

/// Push the profile of the trace at `path` to the server at `url`.
pub fn push(path: &Path, url: &str, args: &PushArgs) -> anyhow::Result<()> {
    check_url(url)?;
    let trace = load_trace(path)?;
    let samples = export::stack_samples(&trace, &Filter::default());
    if samples.is_empty() {
        bail!("{}: no samples to push", path.display());
    }
    let labels = series_labels(&trace, args)?;
    let mut gz = Vec::new();
    pprof::write(&trace, &samples, &mut gz).context("encoding the profile")?;
    let size = gz.len();
    let req = match args.api {
        Api::Pyroscope => pyroscope_request(url, &trace, &labels, gz),
        Api::Parca => parca_request(url, &labels, gz),
    };
    let tries = send(args.api, &req, Duration::from_secs_f64(args.push_timeout))?;
    let shown: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    eprintln!(
        "holdup: pushed {} ({:.1} kB of pprof, {}) to {url}{}",
        path.display(),
        size as f64 / 1e3,
        shown.join(" "),
        if tries > 1 {
            format!(" after {tries} attempts")
        } else {
            String::new()
        }
    );
    Ok(())
}

/// After `holdup record`: push, and on failure warn in one line. The trace
/// is on disk already and stays there; the recorded command's exit code is
/// not changed.
pub fn after_record(path: &Path, url: &str, args: &PushArgs) {
    if let Err(e) = push(path, url, args) {
        let mut msg = e.to_string();
        for cause in e.chain().skip(1) {
            msg.push_str(": ");
            msg.push_str(&cause.to_string());
        }
        let api = match args.api {
            Api::Pyroscope => "",
            Api::Parca => " --api parca",
        };
        eprintln!(
            "holdup: warning: could not push the profile: {msg}; the trace is kept in {} (push it later with holdup push -i {} --url {url}{api})",
            path.display(),
            path.display()
        );
    }
}
