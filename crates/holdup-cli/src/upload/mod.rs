//! Uploading a trace's profile, as pprof, to a continuous-profiling server:
//! Pyroscope through its HTTP ingest API (`POST /ingest?format=pprof`, the
//! gzipped profile as the body) and Parca through its profile store's
//! `WriteRaw` call, sent as gRPC-web over HTTP/1.1 (Parca serves gRPC-web
//! next to gRPC on the same port, so no HTTP/2 client is needed).
//!
//! The series carries the labels `service_name`, `host` and the user's;
//! `subclass`, `thread`, `tid` and `wait_reason` are the profile's own
//! sample labels. Transient failures (connection refused, timeouts, 5xx,
//! 429, gRPC `UNAVAILABLE`) are retried with exponential backoff until a
//! bounded total time has passed; a refusal of the profile, or of the
//! server's certificate, is not retried.
//!
//! Over http or https (the system's roots, `--ca-cert`), with basic or
//! bearer authentication, a tenant (`X-Scope-OrgID`, as Grafana's servers
//! take it) and any header: see `endpoint.rs`.

mod endpoint;

pub use endpoint::{parse_header, redacted, Endpoint};

use crate::cmd::input::load_trace;
use anyhow::{bail, Context};
use holdup_analysis::profile::Filter;
use holdup_render::export::{self, pprof, protobuf::Msg};
use holdup_trace::Trace;
use std::path::{Path, PathBuf};
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
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// How to reach a server: https roots, authentication, headers. Shared by
/// the pushes and `holdup agent`.
#[derive(clap::Args, Clone, Debug)]
pub struct ConnectArgs {
    /// For https: also trust the CA certificates (PEM) in this file, besides
    /// the system's.
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// HTTP basic authentication (Grafana Cloud: the stack's user id and a
    /// token). The command line is visible to other users: prefer
    /// --basic-auth-file or HOLDUP_PUSH_BASIC_AUTH=USER:PASS.
    #[arg(long, value_name = "USER:PASS", conflicts_with = "basic_auth_file")]
    pub basic_auth: Option<String>,
    /// A file whose first line is USER:PASS for basic authentication.
    #[arg(long, value_name = "FILE")]
    pub basic_auth_file: Option<PathBuf>,
    /// A bearer token (Authorization: Bearer). Prefer --bearer-token-file
    /// or HOLDUP_PUSH_TOKEN.
    #[arg(long, value_name = "TOKEN", conflicts_with = "bearer_token_file")]
    pub bearer_token: Option<String>,
    /// A file whose first line is the bearer token.
    #[arg(long, value_name = "FILE")]
    pub bearer_token_file: Option<PathBuf>,
    /// The tenant of a multi-tenant server, sent as X-Scope-OrgID.
    #[arg(long, value_name = "ID")]
    pub tenant: Option<String>,
    /// An extra HTTP header of every request, as NAME=VALUE (repeatable).
    #[arg(long = "header", value_name = "NAME=VALUE", value_parser = endpoint::parse_header)]
    pub headers: Vec<(String, String)>,
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
pub struct Request {
    /// Without credentials (they are headers).
    pub url: String,
    pub query: Vec<(&'static str, String)>,
    pub content_type: &'static str,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
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
        headers: vec![("x-grpc-web".into(), "1".into())],
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
pub fn first_line(body: &[u8]) -> String {
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

/// A server's answer: its status, headers and (the first MiB of) its body.
pub struct Answer {
    pub status: u16,
    pub headers: ureq::http::HeaderMap,
    pub body: Vec<u8>,
}

/// One POST of `req`, whatever the status of the answer.
pub fn post(agent: &ureq::Agent, req: &Request, timeout: Duration) -> Result<Answer, ureq::Error> {
    let mut call = agent
        .post(&req.url)
        .config()
        .timeout_global(Some(timeout))
        .build()
        .header("content-type", req.content_type);
    for (k, v) in &req.headers {
        call = call.header(k, v);
    }
    for (k, v) in &req.query {
        call = call.query(*k, v);
    }
    let mut resp = call.send(&req.body[..])?;
    let body = resp
        .body_mut()
        .with_config()
        .limit(1 << 20)
        .read_to_vec()
        .unwrap_or_default();
    Ok(Answer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body,
    })
}

fn attempt(agent: &ureq::Agent, api: Api, req: &Request, timeout: Duration) -> Attempt {
    let Answer {
        status,
        headers,
        body,
    } = match post(agent, req, timeout) {
        Ok(a) => a,
        Err(e) if permanent(&e) => return Attempt::Refused(e.to_string()),
        Err(e) => return Attempt::Transient(e.to_string()),
    };
    if status == 429 || status == 408 || status >= 500 {
        return Attempt::Transient(format!("HTTP {status} {}", first_line(&body)));
    }
    if !(200..300).contains(&status) {
        return Attempt::Refused(format!("HTTP {status} {}", first_line(&body)));
    }
    if api == Api::Parca {
        return match grpc_status(&headers, &body) {
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

/// Failures that trying again would not mend: TLS (an unknown issuer, a
/// name that does not match), a URL ureq cannot use.
pub fn permanent(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::Tls(_)
        | ureq::Error::Rustls(_)
        | ureq::Error::Pem(_)
        | ureq::Error::BadUri(_)
        | ureq::Error::TlsRequired => true,
        // rustls's handshake failures come through the stream.
        ureq::Error::Io(io) => io.kind() == std::io::ErrorKind::InvalidData,
        _ => false,
    }
}

/// Send with retries: backoff from 250 ms doubling to 4 s, every attempt
/// and pause cut to what is left of `budget`.
fn send(agent: &ureq::Agent, api: Api, req: &Request, budget: Duration) -> anyhow::Result<u32> {
    let deadline = Instant::now() + budget;
    let mut pause = Duration::from_millis(250);
    let mut tries = 0;
    loop {
        tries += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        match attempt(agent, api, req, left.max(Duration::from_millis(100))) {
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

/// Push the profile of the trace at `path` to `to`. Errors show no
/// credential.
pub fn push(path: &Path, to: &Endpoint, args: &PushArgs) -> anyhow::Result<()> {
    push_profile(path, to, args).map_err(|e| endpoint::redacted(e, Some(to)))
}

fn push_profile(path: &Path, to: &Endpoint, args: &PushArgs) -> anyhow::Result<()> {
    let trace = load_trace(path)?;
    let samples = export::stack_samples(&trace, &Filter::default());
    if samples.is_empty() {
        bail!("{}: no samples to push", path.display());
    }
    let labels = series_labels(&trace, args)?;
    let mut gz = Vec::new();
    pprof::write(&trace, &samples, &mut gz).context("encoding the profile")?;
    let size = gz.len();
    let mut req = match args.api {
        Api::Pyroscope => pyroscope_request(&to.url, &trace, &labels, gz),
        Api::Parca => parca_request(&to.url, &labels, gz),
    };
    req.headers.extend(to.headers.iter().cloned());
    let budget = Duration::from_secs_f64(args.push_timeout);
    let tries = send(&to.agent(), args.api, &req, budget)?;
    let shown: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    eprintln!(
        "holdup: pushed {} ({:.1} kB of pprof, {}) to {}{}",
        path.display(),
        size as f64 / 1e3,
        shown.join(" "),
        to.url,
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
pub fn after_record(path: &Path, to: &Endpoint, args: &PushArgs) {
    if let Err(e) = push(path, to, args) {
        let api = match args.api {
            Api::Pyroscope => "",
            Api::Parca => " --api parca",
        };
        eprintln!(
            "holdup: warning: could not push the profile: {e}; the trace is kept in {} (push it later with holdup push -i {} --url {}{api})",
            path.display(),
            path.display(),
            to.url
        );
    }
}
