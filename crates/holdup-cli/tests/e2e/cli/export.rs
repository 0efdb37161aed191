//! `holdup export` and the commands around it on a hand-made trace: its bad
//! input, `holdup html` (one self-contained page, every name escaped), and
//! `holdup push` against servers in the test. The formats themselves on the
//! small trace, and the decoders used here, are holdup-render's tests;
//! recorded traces read back in every format are in `kernel/export.rs`.

use crate::support::export::decode::pprof::*;
use crate::support::export::decode::protobuf::*;
use crate::support::export::*;
use crate::support::small_trace::*;
use crate::support::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn setup(test: &str) -> PathBuf {
    let dir = scratch(test);
    small_trace(&dir.join("small.data"));
    dir
}

// ---- holdup html -------------------------------------------------------------

const HOSTILE: &str = "<script>alert(1)</script>";

/// A causal profile whose one line is named with markup.
const COZ: &str = "startup\ttime=1\n\
experiment\tselected=/src/x<i>.c:10\tspeedup=0.00\tduration=1000\tselected-samples=3\n\
throughput-point\tname=round\tdelta=10\n\
experiment\tselected=/src/x<i>.c:10\tspeedup=0.25\tduration=1000\tselected-samples=3\n\
throughput-point\tname=round\tdelta=15\n\
experiment\tselected=/src/x<i>.c:10\tspeedup=0.50\tduration=1000\tselected-samples=3\n\
throughput-point\tname=round\tdelta=20\n\
experiment\tselected=/src/x<i>.c:10\tspeedup=1.00\tduration=1000\tselected-samples=3\n\
throughput-point\tname=round\tdelta=20\n\
runtime\ttime=6\tprogress-points=1\texperiments=4\n";

#[test]
fn html_is_one_self_contained_page_with_every_name_escaped() {
    let dir = scratch("export_html");
    small_trace_named(&dir.join("small.data"), HOSTILE);
    std::fs::write(dir.join("profile.coz"), COZ).unwrap();
    let o = holdup()
        .current_dir(&dir)
        .args(["html", "-i", "small.data", "-o", "report.html"])
        .args(["--causal", "profile.coz"])
        .bounded_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();

    // Escaped everywhere: text, the flame graph's JSON, the causal target.
    assert!(!page.contains("alert(1)</script>"), "unescaped thread name");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(page.contains("\\u003cscript\\u003ealert(1)"));
    assert!(!page.contains("x<i>"));
    assert!(page.contains("x&lt;i&gt;.c:10"), "the causal target");
    assert_eq!(page.matches("<script").count(), 2, "data and code only");
    // Self-contained: nothing to fetch (SVG namespaces are names, not fetches).
    let offline = page
        .replace("xmlns=\"http://www.w3.org/2000/svg\"", "")
        .replace("xmlns:xlink=\"http://www.w3.org/1999/xlink\"", "");
    for net in ["http://", "https://", " src=", "<link", "@import"] {
        assert!(!offline.contains(net), "{net} in the page");
    }
    for id in ["flame-section", "report", "waitgraph", "causal", "filter"] {
        assert!(page.contains(&format!("id=\"{id}\"")), "no #{id}");
    }
    assert!(page.contains("<svg"), "the wait-for graph picture");
    assert!(page.contains("<path d=\"M"), "a causal curve");

    // In a real browser: the script runs to its end without console
    // messages and draws one box per flame graph node (17 here).
    let url = format!("file://{}", dir.join("report.html").display());
    let browse = |url: &str, extra: &[&str]| {
        let o = std::process::Command::new(chromium())
            .args(["--headless", "--no-sandbox", "--disable-gpu"])
            .args([
                "--enable-logging=stderr",
                "--v=0",
                "--window-size=1280,1600",
            ])
            .args(extra)
            .arg(url)
            .bounded_output();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        let console: Vec<&str> = err.lines().filter(|l| l.contains(":CONSOLE")).collect();
        assert!(console.is_empty(), "console messages: {console:#?}");
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let dom = browse(&url, &["--dump-dom"]);
    assert!(
        dom.contains("data-ready=\"1\""),
        "the script did not finish"
    );
    let boxes = dom.matches("<div class=\"c").count();
    assert_eq!(boxes, 17, "flame graph boxes");
    assert!(dom.contains(">&lt;script&gt;alert(1)&lt;/script&gt;-10<"));
    // A search from the link: helper holds 13 of the 17 points (a: 5 on
    // CPU and 3 lock-blocked below it; b: 3 and 2 of runqueue).
    let dom = browse(&format!("{url}#search=helper"), &["--dump-dom"]);
    assert_eq!(dom.matches(" hit\"").count(), 2, "the two helper boxes");
    assert!(dom.contains("matched 76.47% for \"helper\""), "{dom}");
    let shot = dir.join("report.png");
    browse(&url, &[&format!("--screenshot={}", shot.display())]);
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 10_000, "screenshot of {size} bytes");
}

/// What a `dot` that cannot be trusted prints: every way an SVG can run
/// code once pasted into a page, around a thread's name.
const HOSTILE_SVG: &str = r##"<?xml version="1.0"?>
<svg width="100pt" height="50pt" onload="document.documentElement.setAttribute('data-pwned','onload')">
<script>document.documentElement.setAttribute('data-pwned','script')</script>
<g class="node"><title>&lt;script&gt;alert(1)&lt;/script&gt;</title>
<a href="javascript:alert(1)"><text>link</text></a>
<foreignObject width="10" height="10"><img src="x" onerror="document.documentElement.setAttribute('data-pwned','img')"/></foreignObject>
<image href="x" onerror="document.documentElement.setAttribute('data-pwned','image')"/>
<text x="5" y="20" onmouseover="alert(1)">&lt;script&gt;alert(1)&lt;/script&gt;:10</text></g>
</svg>
"##;

/// `dot` is fed the graph on its standard input and its picture read from
/// its standard output (no file in a shared directory, where a planted
/// link would be written through), and the picture is rebuilt before it
/// is pasted: a `dot` that prints scripts, handlers and foreign objects
/// runs nothing in the browser.
#[test]
fn html_takes_dot_output_from_a_pipe_and_runs_nothing_in_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("export_html_dot");
    small_trace_named(&dir.join("small.data"), HOSTILE);
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::write(bin.join("picture.svg"), HOSTILE_SVG).unwrap();
    // Logs its arguments; prints the picture where it is told to.
    let fake = format!(
        "#!/bin/sh\necho \"$@\" > {log}\ncat > /dev/null\nout=/dev/stdout\n[ \"$2\" = -o ] && out=$3\ncat {svg} > \"$out\"\n",
        log = dir.join("dot.args").display(),
        svg = bin.join("picture.svg").display()
    );
    std::fs::write(bin.join("dot"), fake).unwrap();
    std::fs::set_permissions(bin.join("dot"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let o = holdup()
        .current_dir(&dir)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("TMPDIR", &tmp)
        .args(["html", "-i", "small.data", "-o", "report.html"])
        .bounded_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let args = std::fs::read_to_string(dir.join("dot.args")).unwrap();
    assert_eq!(args.trim(), "-Tsvg", "dot is given no file to write");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);

    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let wait = &page[page.find("id=\"waitgraph\"").unwrap()..];
    let wait = &wait[..wait.find("</div>").unwrap()];
    for gone in [
        "onload",
        "onerror",
        "onmouseover",
        "<script",
        "javascript",
        "foreignObject",
        "<a ",
        "<image",
        "data-pwned",
    ] {
        assert!(!wait.contains(gone), "{gone} in the wait-for graph");
    }
    assert!(
        wait.contains("<svg width=\"100pt\" height=\"50pt\">"),
        "{wait}"
    );
    assert!(
        wait.contains("<text x=\"5\" y=\"20\">&lt;script&gt;alert(1)&lt;/script&gt;:10</text>"),
        "{wait}"
    );
    assert_eq!(page.matches("<script").count(), 2, "data and code only");

    let o = std::process::Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(format!("file://{}", dir.join("report.html").display()))
        .bounded_output();
    let dom = String::from_utf8_lossy(&o.stdout);
    assert!(dom.contains("data-ready=\"1\""), "the page's script ran");
    assert!(!dom.contains("data-pwned"), "code from dot's output ran");
    assert!(!String::from_utf8_lossy(&o.stderr).contains(":CONSOLE"));
}

/// Without GraphViz the wait-for graph is its text rendering, escaped.
#[test]
fn html_without_graphviz_has_the_wait_for_graph_as_text() {
    let dir = scratch("export_html_text");
    small_trace_named(&dir.join("small.data"), HOSTILE);
    let o = holdup()
        .current_dir(&dir)
        .env("PATH", "/nonexistent")
        .args(["html", "-i", "small.data", "-o", "report.html"])
        .bounded_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(!page.contains("<svg"), "no picture without dot");
    let wait = &page[page.find("id=\"waitgraph\"").unwrap()..];
    let text = &wait[wait.find("<pre>").expect("the text rendering")..];
    assert!(
        text.contains("&lt;script&gt;alert(1)&lt;/script&gt;:10"),
        "{text}"
    );
    assert!(text.contains("b:11"), "{text}");
    assert!(!page.contains("alert(1)</script>"));
}

#[test]
fn html_bad_input_gives_one_clear_line() {
    let dir = setup("export_html_bad");
    std::fs::write(dir.join("junk.coz"), "not a profile\n").unwrap();
    fails_with(&dir, &["html", "-i", "missing.data"], "missing.data");
    fails_with(
        &dir,
        &["html", "-i", "small.data", "--causal", "none.coz"],
        "cannot open none.coz",
    );
    fails_with(
        &dir,
        &["html", "-i", "small.data", "-o", "no/such/dir/r.html"],
        "cannot write no/such/dir/r.html",
    );
    fails_with(
        &dir,
        &["html", "-i", "small.data", "--tid", "99"],
        "no samples match",
    );
    assert!(!dir.join("holdup.html").exists());
}

fn fails_with(dir: &Path, args: &[&str], needle: &str) {
    let out = holdup().current_dir(dir).args(args).bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("holdup: error") || l.starts_with("error:"))
            .count(),
        1,
        "{err}"
    );
}

#[test]
fn bad_input_gives_one_clear_line() {
    let dir = setup("export_bad");
    std::fs::write(dir.join("junk.data"), b"this is not a trace").unwrap();
    fails_with(
        &dir,
        &["export", "-f", "svg", "-i", "small.data"],
        "invalid value 'svg'",
    );
    fails_with(
        &dir,
        &[
            "export",
            "-f",
            "pprof",
            "-i",
            "small.data",
            "-o",
            "no/such/dir/p.pb.gz",
        ],
        "cannot write no/such/dir/p.pb.gz",
    );
    fails_with(
        &dir,
        &["export", "-f", "pprof", "-i", "junk.data"],
        "junk.data",
    );
    fails_with(
        &dir,
        &["export", "-f", "speedscope", "-i", "missing.data"],
        "missing.data",
    );
    fails_with(
        &dir,
        &["export", "-f", "pprof", "-i", "small.data", "--tid", "99"],
        "no samples match",
    );
    assert!(
        !dir.join("holdup.pb.gz").exists(),
        "nothing written on error"
    );
}

/// [`serve`] over TLS, with a certificate for 127.0.0.1 made here and
/// signed by itself; its PEM is written to `cert`.
fn serve_tls(answers: Vec<Vec<u8>>, cert: &Path) -> (String, std::sync::mpsc::Receiver<Received>) {
    use std::io::Write;
    use std::sync::Arc;
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    std::fs::write(cert, made.cert.pem()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(made.key_pair.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![made.cert.der().clone()], key)
            .unwrap(),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut n = 0;
        for tcp in listener.incoming() {
            let conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let tls = rustls::StreamOwned::new(conn, tcp.unwrap());
            let Some((mut conn, got)) = read_request(tls) else {
                continue;
            };
            // Told before answered, as in `serve`.
            let _ = tx.send(got);
            let answer = &answers[n.min(answers.len() - 1)];
            n += 1;
            let tls = conn.get_mut();
            tls.write_all(answer).unwrap();
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    (url, rx)
}

/// A gRPC-web answer: an empty message, then the trailers with `status`.
fn grpc_web_answer(status: u32, message: &str) -> Vec<u8> {
    let trailers = format!("grpc-status:{status}\r\ngrpc-message:{message}\r\n");
    let mut body = vec![0, 0, 0, 0, 0, 0x80];
    body.extend_from_slice(&(trailers.len() as u32).to_be_bytes());
    body.extend_from_slice(trailers.as_bytes());
    http_answer("200 OK", "application/grpc-web+proto", &body)
}

fn push(dir: &Path, url: &str, extra: &[&str]) -> std::process::Output {
    holdup()
        .current_dir(dir)
        .args(["push", "-i", "small.data", "--url", url])
        .args(extra)
        .bounded_output()
}

#[test]
fn push_to_pyroscope_sends_the_pprof_export_with_its_labels() {
    let dir = setup("push_pyroscope");
    let (url, rx) = serve(vec![http_answer("200 OK", "text/plain", b"")]);
    let out = push(&dir, &url, &["--service", "shop", "--label", "env=test"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("holdup: pushed small.data"), "{err}");
    let got = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
    let (path, query) = got.target.split_once('?').unwrap();
    assert_eq!(path, "/ingest");
    let query: BTreeMap<&str, &str> = query
        .split('&')
        .map(|kv| kv.split_once('=').unwrap())
        .collect();
    assert_eq!(query["name"], "shop{host=test-host,env=test}");
    assert_eq!(query["format"], "pprof");
    assert_eq!(query["from"], "1700000000");
    // The small trace ends 10 ms after it starts.
    assert_eq!(query["until"], "1700000001");
    assert_eq!(query["sampleRate"], "1000");
    assert_eq!(got.headers["content-type"], "application/octet-stream");
    let pushed = decode_gz(&got.body);
    let exported = decode(&export(&dir, "pprof", "p.pb.gz"));
    assert_eq!(pushed.listing(), exported.listing());
    assert_eq!(pushed.total("wall"), 17 * MS);
    let subclasses: std::collections::BTreeSet<&str> = pushed
        .samples
        .iter()
        .map(|s| s.2["subclass"].as_str())
        .collect();
    assert_eq!(
        subclasses.into_iter().collect::<Vec<_>>(),
        ["cpu", "io", "lock", "runqueue"]
    );
}

/// One series of Parca's `WriteRawRequest`: its labels and raw profiles.
type ParcaSeries = (Vec<(String, String)>, Vec<Vec<u8>>);

fn decode_write_raw(body: &[u8]) -> Vec<ParcaSeries> {
    assert_eq!(body[0], 0, "an uncompressed gRPC-web data frame");
    let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
    assert_eq!(body.len(), 5 + len, "one frame");
    let req = fields(&body[5..]);
    let text = |fs: &[(u32, Val)], f: u32| match &fs.iter().find(|(n, _)| *n == f).unwrap().1 {
        Val::Bytes(b) => String::from_utf8(b.clone()).unwrap(),
        Val::Int(_) => panic!("field {f} is not a string"),
    };
    msgs(&req, 2)
        .iter()
        .map(|series| {
            let labels = msgs(&series[..], 1)
                .iter()
                .flat_map(|set| msgs(set, 1))
                .map(|l| (text(&l, 1), text(&l, 2)))
                .collect();
            let raws = msgs(&series[..], 2)
                .iter()
                .map(
                    |sample| match &sample.iter().find(|(n, _)| *n == 1).unwrap().1 {
                        Val::Bytes(b) => b.clone(),
                        Val::Int(_) => panic!("raw_profile"),
                    },
                )
                .collect();
            (labels, raws)
        })
        .collect()
}

#[test]
fn push_to_parca_sends_write_raw_over_grpc_web() {
    let dir = setup("push_parca");
    let (url, rx) = serve(vec![grpc_web_answer(0, "")]);
    let out = push(
        &dir,
        &url,
        &[
            "--api", "parca", "--label", "env=test", "--label", "host=h1",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let got = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
    assert_eq!(
        got.target,
        "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw"
    );
    assert_eq!(got.headers["content-type"], "application/grpc-web+proto");
    let series = decode_write_raw(&got.body);
    assert_eq!(series.len(), 1);
    let (labels, raws) = &series[0];
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    // The small trace has no command: the service is named after holdup.
    assert_eq!(
        labels,
        [
            "__name__=holdup",
            "service_name=holdup",
            "host=h1",
            "env=test"
        ]
    );
    assert_eq!(raws.len(), 1);
    let exported = decode(&export(&dir, "pprof", "p.pb.gz"));
    assert_eq!(decode_gz(&raws[0]).listing(), exported.listing());
}

#[test]
fn push_retries_a_busy_server_and_gives_up_on_a_refusal() {
    let dir = setup("push_retry");
    // Pyroscope busy twice, then taking the profile.
    let busy = http_answer(
        "503 Service Unavailable",
        "text/plain",
        b"ingester not ready\n",
    );
    let (url, rx) = serve(vec![
        busy.clone(),
        busy,
        http_answer("200 OK", "text/plain", b""),
    ]);
    let out = push(&dir, &url, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("after 3 attempts"), "{err}");
    assert_eq!(rx.try_iter().count(), 3);

    // Parca unavailable, then taking it.
    let (url, rx) = serve(vec![
        grpc_web_answer(14, "starting"),
        grpc_web_answer(0, ""),
    ]);
    let out = push(&dir, &url, &["--api", "parca"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(rx.try_iter().count(), 2);

    // A refusal is not retried, and says why in one line.
    let (url, rx) = serve(vec![http_answer(
        "400 Bad Request",
        "text/plain",
        b"invalid profile\n",
    )]);
    fails_with(
        &dir,
        &["push", "-i", "small.data", "--url", &url],
        "HTTP 400 invalid profile",
    );
    assert_eq!(rx.try_iter().count(), 1);
    let (url, rx) = serve(vec![grpc_web_answer(3, "bad labels")]);
    fails_with(
        &dir,
        &["push", "-i", "small.data", "--url", &url, "--api", "parca"],
        "gRPC status 3 bad labels",
    );
    assert_eq!(rx.try_iter().count(), 1);
}

#[test]
fn push_to_a_server_that_is_down_fails_in_bounded_time_and_keeps_the_trace() {
    let dir = setup("push_down");
    let before = std::fs::read(dir.join("small.data")).unwrap();
    let url = closed_port_url();
    let start = std::time::Instant::now();
    fails_with(
        &dir,
        &[
            "push",
            "-i",
            "small.data",
            "--url",
            &url,
            "--push-timeout",
            "2",
        ],
        "gave up after",
    );
    let took = start.elapsed().as_secs_f64();
    assert!(
        (1.5..4.0).contains(&took),
        "took {took:.2} s for a 2 s budget"
    );
    assert_eq!(std::fs::read(dir.join("small.data")).unwrap(), before);
}

#[test]
fn push_bad_input_gives_one_clear_line() {
    let dir = setup("push_bad");
    let url = closed_port_url();
    fails_with(
        &dir,
        &["push", "-i", "small.data", "--url", &url, "--label", "1x=y"],
        "not a label name",
    );
    fails_with(
        &dir,
        &["push", "-i", "small.data", "--url", &url, "--label", "env"],
        "not NAME=VALUE",
    );
    fails_with(
        &dir,
        &[
            "push",
            "-i",
            "small.data",
            "--url",
            &url,
            "--service",
            "a,b",
        ],
        "cannot be a service name",
    );
    fails_with(
        &dir,
        &["push", "-i", "small.data", "--url", "ftp://example.com"],
        "not an http:// URL",
    );
    fails_with(
        &dir,
        &["push", "-i", "small.data", "--url", "pyroscope:4040"],
        "not an http:// URL",
    );
    fails_with(
        &dir,
        &["push", "-i", "missing.data", "--url", &url],
        "missing.data",
    );
    // record checks the URL before it runs anything.
    fails_with(
        &dir,
        &[
            "record",
            "-o",
            "r.data",
            "--push",
            "pyroscope:4040",
            "--",
            "true",
        ],
        "not an http:// URL",
    );
    assert!(!dir.join("r.data").exists());
}

/// Pushing over https to a server whose certificate is trusted through
/// `--ca-cert`, with each way of giving credentials: the server gets the
/// profile and the headers; no message shows a secret, not even one the
/// server echoes back.
#[test]
fn push_over_https_sends_credentials_and_never_shows_them() {
    let dir = setup("push_https");
    let cert = dir.join("ca.pem");
    let (url, rx) = serve_tls(vec![http_answer("200 OK", "text/plain", b"")], &cert);
    let ca = cert.to_str().unwrap();
    std::fs::write(dir.join("token"), "tok-3e1f9a\n").unwrap();
    let pushed = |args: &[&str], envs: &[(&str, &str)]| {
        let mut cmd = holdup();
        cmd.current_dir(&dir)
            .env_remove("HOLDUP_PUSH_TOKEN")
            .env_remove("HOLDUP_PUSH_BASIC_AUTH")
            .args(["push", "-i", "small.data", "--ca-cert", ca])
            .args(args);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let out = cmd.bounded_output();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{args:?}: {err}");
        let got = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        (got, err)
    };

    let (got, err) = pushed(
        &[
            "--url",
            &url,
            "--bearer-token-file",
            "token",
            "--tenant",
            "team-a",
            "--header",
            "X-Extra=42",
        ],
        &[],
    );
    assert!(got.target.starts_with("/ingest?"), "{}", got.target);
    assert_eq!(got.headers["authorization"], "Bearer tok-3e1f9a");
    assert_eq!(got.headers["x-scope-orgid"], "team-a");
    assert_eq!(got.headers["x-extra"], "42");
    let exported = decode(&export(&dir, "pprof", "p.pb.gz"));
    assert_eq!(decode_gz(&got.body).listing(), exported.listing());
    assert!(
        err.contains(&format!("to {url}")) && !err.contains("tok-3e1f9a"),
        "{err}"
    );

    // Written into the URL (percent-encoded), or from the environment.
    let with_user = url.replace("https://", "https://alice:pa%40ss-9x7@");
    let (got, err) = pushed(&["--url", &with_user], &[]);
    // base64("alice:pa@ss-9x7")
    assert_eq!(got.headers["authorization"], "Basic YWxpY2U6cGFAc3MtOXg3");
    assert!(err.contains(&format!("to {url}")), "{err}");
    assert!(!err.contains("alice") && !err.contains("9x7"), "{err}");
    let (got, _) = pushed(&["--url", &url], &[("HOLDUP_PUSH_TOKEN", "env-tok-77")]);
    assert_eq!(got.headers["authorization"], "Bearer env-tok-77");
    let (got, _) = pushed(
        &["--url", &url, "--basic-auth", "bob:hunter22"],
        &[("HOLDUP_PUSH_TOKEN", "env-tok-77")],
    );
    assert_eq!(got.headers["authorization"], "Basic Ym9iOmh1bnRlcjIy");

    // A server that echoes the token in its refusal: shown as ***.
    let (url, rx) = serve_tls(
        vec![http_answer(
            "401 Unauthorized",
            "text/plain",
            b"bad token tok-3e1f9a\n",
        )],
        &cert,
    );
    let ca = cert.to_str().unwrap();
    fails_with(
        &dir,
        &[
            "push",
            "-i",
            "small.data",
            "--url",
            &url,
            "--ca-cert",
            ca,
            "--bearer-token-file",
            "token",
        ],
        "HTTP 401 bad token ***",
    );
    assert_eq!(rx.try_iter().count(), 1);
    // Without the CA the certificate is refused at once, not retried.
    let start = std::time::Instant::now();
    let with_user = url.replace("https://", "https://alice:pw-5k2q@");
    let out = holdup()
        .current_dir(&dir)
        .args(["push", "-i", "small.data", "--url", &with_user])
        .args(["--push-timeout", "10"])
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("refused the profile") && err.contains("certificate"),
        "{err}"
    );
    assert!(!err.contains("pw-5k2q") && !err.contains("alice"), "{err}");
    assert!(start.elapsed().as_secs_f64() < 5.0, "retried: {err}");
    // A server that is down: the give-up line names the URL bare.
    let down = closed_port_url().replace("http://", "https://alice:pw-5k2q@");
    let out = holdup()
        .current_dir(&dir)
        .args([
            "push",
            "-i",
            "small.data",
            "--url",
            &down,
            "--push-timeout",
            "1",
        ])
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gave up after"), "{err}");
    assert!(!err.contains("pw-5k2q") && !err.contains("alice"), "{err}");
}

#[test]
fn push_credentials_given_twice_or_missing_are_one_clear_line() {
    let dir = setup("push_credentials_bad");
    let url = closed_port_url();
    let with_user = url.replace("http://", "http://u:sekrit-1@");
    for (args, says) in [
        (
            vec!["--url", &with_user, "--basic-auth", "v:sekrit-2"],
            "credentials given more than once",
        ),
        (
            vec!["--url", &url, "--bearer-token-file", "missing.token"],
            "cannot read missing.token",
        ),
        (
            vec!["--url", &url, "--basic-auth", "no-colon"],
            "not USER:PASS",
        ),
        (
            vec!["--url", &url, "--ca-cert", "small.data"],
            "for https:// URLs",
        ),
        (
            vec![
                "--url",
                &url.replace("http:", "https:"),
                "--ca-cert",
                "small.data",
            ],
            "no PEM certificate",
        ),
        (
            vec!["--url", &url, "--header", "X Y=1"],
            "not a header name",
        ),
    ] {
        let mut all = vec!["push", "-i", "small.data"];
        all.extend(args);
        let out = holdup().current_dir(&dir).args(&all).bounded_output();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {err}");
        assert!(err.contains(says), "{all:?}: {err}");
        assert!(!err.contains("sekrit"), "{all:?}: {err}");
    }
    // record checks them before it runs anything.
    fails_with(
        &dir,
        &[
            "record",
            "-o",
            "r.data",
            "--push",
            &with_user,
            "--bearer-token",
            "sekrit-3",
            "--",
            "true",
        ],
        "credentials given more than once",
    );
    assert!(!dir.join("r.data").exists());
}
