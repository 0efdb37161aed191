//! Helpers shared by the `export` end-to-end tests with and without root.

use crate::support::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[path = "../../../holdup-render/tests/decode/mod.rs"]
pub mod decode;

pub fn export(dir: &Path, format: &str, out: &str) -> PathBuf {
    let o = holdup()
        .current_dir(dir)
        .args(["export", "-f", format, "-i", "small.data", "-o", out])
        .bounded_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    dir.join(out)
}

pub fn chromium() -> &'static str {
    if std::process::Command::new("chromium")
        .arg("--version")
        .output()
        .is_ok()
    {
        return "chromium";
    }
    panic!("Chromium is needed to check holdup html (apt install chromium)");
}

// ---- holdup push, against a server in the test -----------------------------

/// One request as a server received it.
pub struct Received {
    /// `/path?query`, percent-decoded.
    pub target: String,
    /// Lower-case names.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(if b[i] == b'+' { b' ' } else { b[i] });
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// Read one POST request from `conn`; None if the client went away first
/// (a TLS client that refused the certificate).
pub fn read_request<S: std::io::Read>(conn: S) -> Option<(std::io::BufReader<S>, Received)> {
    use std::io::{BufRead, BufReader, Read};
    let mut conn = BufReader::new(conn);
    let mut line = String::new();
    conn.read_line(&mut line).ok()?;
    if line.is_empty() {
        return None;
    }
    let target = line.split(' ').nth(1).unwrap_or("").to_string();
    assert!(line.starts_with("POST "), "{line}");
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        conn.read_line(&mut h).ok()?;
        if h.trim().is_empty() {
            break;
        }
        let (k, v) = h.split_once(':').unwrap();
        headers.insert(k.trim().to_lowercase(), v.trim().to_string());
    }
    let len: usize = headers["content-length"].parse().unwrap();
    let mut body = vec![0; len];
    conn.read_exact(&mut body).ok()?;
    let got = Received {
        target: percent_decode(&target),
        headers,
        body,
    };
    Some((conn, got))
}

/// An HTTP/1.1 server on 127.0.0.1 that answers the n-th request with
/// `answers[n]` (the last one repeats) and passes on what it received.
pub fn serve(answers: Vec<Vec<u8>>) -> (String, std::sync::mpsc::Receiver<Received>) {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for (n, conn) in listener.incoming().enumerate() {
            let Some((mut conn, got)) = read_request(conn.unwrap()) else {
                continue;
            };
            // Told before answered: the client may count the requests as
            // soon as it has its answer.
            let _ = tx.send(got);
            let answer = &answers[n.min(answers.len() - 1)];
            conn.get_mut().write_all(answer).unwrap();
        }
    });
    (url, rx)
}

pub fn http_answer(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut a = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    a.extend_from_slice(body);
    a
}

/// A port on which nothing listens.
pub fn closed_port_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", l.local_addr().unwrap())
}
