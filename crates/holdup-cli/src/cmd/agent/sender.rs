//! Sending the agent's requests: a bounded buffer of unsent requests and
//! one thread that posts them in order with the push's HTTP client. A
//! request that finds the buffer full is dropped and counted. Connection
//! failures and the statuses OTLP calls transient (429, 502, 503, 504) are
//! retried with exponential backoff, or after the server's Retry-After;
//! any other refusal is final (sending it again would be refused again)
//! and counted. At the end, what is pending gets until a deadline (tried
//! again at once, whatever the backoff), and what is left then is counted
//! as dropped.

use crate::upload::{self, Endpoint, Request};
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Counts since the agent started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub sent: u64,
    pub sent_bytes: u64,
    /// Attempts that failed and were tried again.
    pub retried: u64,
    /// Requests dropped: the buffer was full, or the end came first.
    pub dropped: u64,
    /// Requests the receiver refused for good.
    pub refused: u64,
    /// Profiles the receiver said it rejected in an accepted request.
    pub rejected_profiles: u64,
    /// In the buffer, being sent or waiting.
    pub pending: u64,
}

/// How sending is done.
#[derive(Clone, Debug)]
pub struct Options {
    pub gzip: bool,
    /// Requests the buffer holds at most.
    pub buffer: usize,
    /// One attempt's time limit.
    pub timeout: Duration,
}

struct State {
    queue: VecDeque<Vec<u8>>,
    stats: Stats,
    /// Set at the end: send what is pending until then, then stop.
    deadline: Option<Instant>,
    /// The last failure, said once per kind in a row.
    last_error: Option<String>,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

pub struct Sender {
    shared: Shared,
    buffer: usize,
    thread: Option<JoinHandle<()>>,
}

/// How one attempt ended.
enum Outcome {
    Sent {
        rejected: u64,
    },
    /// Worth trying again, after this pause if the server said one.
    Retry(String, Option<Duration>),
    Refused(String),
}

/// `Retry-After`: seconds (an HTTP date is not worth a date parser here:
/// the backoff applies instead).
fn retry_after(headers: &ureq::http::HeaderMap) -> Option<Duration> {
    let v = headers.get("retry-after")?.to_str().ok()?;
    v.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// `ExportProfilesServiceResponse.partial_success.rejected_profiles`.
fn rejected_profiles(body: &[u8]) -> u64 {
    // field 1 (partial_success, a message) holding field 1 (a varint).
    fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *b.get(*i)?;
            *i += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }
    let mut i = 0;
    if body.first() != Some(&0x0a) {
        return 0;
    }
    i += 1;
    let Some(len) = varint(body, &mut i) else {
        return 0;
    };
    let inner = body.get(i..i + len as usize).unwrap_or(&[]);
    let mut j = 0;
    if inner.first() == Some(&0x08) {
        j += 1;
        return varint(inner, &mut j).unwrap_or(0);
    }
    0
}

fn attempt(agent: &ureq::Agent, req: &Request, timeout: Duration) -> Outcome {
    let answer = match upload::post(agent, req, timeout) {
        Ok(a) => a,
        Err(e) if upload::permanent(&e) => return Outcome::Refused(e.to_string()),
        Err(e) => return Outcome::Retry(e.to_string(), None),
    };
    let why = || {
        format!(
            "HTTP {} {}",
            answer.status,
            upload::first_line(&answer.body)
        )
    };
    match answer.status {
        200..=299 => Outcome::Sent {
            rejected: rejected_profiles(&answer.body),
        },
        429 | 502 | 503 | 504 => Outcome::Retry(why(), retry_after(&answer.headers)),
        _ => Outcome::Refused(why()),
    }
}

impl Sender {
    pub fn start(endpoint: Arc<Endpoint>, opts: Options) -> Sender {
        let shared: Shared = Arc::new((
            Mutex::new(State {
                queue: VecDeque::new(),
                stats: Stats::default(),
                deadline: None,
                last_error: None,
            }),
            Condvar::new(),
        ));
        let buffer = opts.buffer;
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("holdup-send".into())
                .spawn(move || run(&shared, &endpoint, &opts))
                .expect("a thread")
        };
        Sender {
            shared,
            buffer,
            thread: Some(thread),
        }
    }

    /// Queue a request; false if the buffer was full (it is counted).
    pub fn push(&self, body: Vec<u8>) -> bool {
        let (lock, cv) = &*self.shared;
        let mut st = lock.lock().unwrap();
        if st.queue.len() >= self.buffer {
            st.stats.dropped += 1;
            return false;
        }
        st.queue.push_back(body);
        st.stats.pending = st.queue.len() as u64;
        cv.notify_all();
        true
    }

    pub fn stats(&self) -> Stats {
        self.shared.0.lock().unwrap().stats
    }

    /// Send what is pending for at most `grace`, then stop; the final
    /// counts.
    pub fn finish(mut self, grace: Duration) -> Stats {
        {
            let (lock, cv) = &*self.shared;
            lock.lock().unwrap().deadline = Some(Instant::now() + grace);
            cv.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.stats()
    }
}

/// A failure, said when it differs from the last one (a receiver that is
/// down would otherwise fill the log).
fn say_once(st: &mut State, what: String, to: &Endpoint) {
    let line = to.redact(&what);
    if st.last_error.as_deref() != Some(line.as_str()) {
        eprintln!("holdup agent: {line}");
        st.last_error = Some(line);
    }
}

fn run(shared: &Shared, to: &Endpoint, opts: &Options) {
    let (lock, cv) = &**shared;
    let agent = to.agent();
    let mut pause = Duration::from_millis(500);
    loop {
        let body = {
            let mut st = lock.lock().unwrap();
            while st.queue.is_empty() && st.deadline.is_none() {
                st = cv.wait(st).unwrap();
            }
            if st.queue.is_empty() || st.deadline.is_some_and(|d| Instant::now() >= d) {
                // The end: what was not sent is lost.
                st.stats.dropped += st.queue.len() as u64;
                st.queue.clear();
                st.stats.pending = 0;
                return;
            }
            st.queue.front().cloned().unwrap_or_default()
        };
        let len = body.len() as u64;
        let req = request(to, opts, body);
        let outcome = attempt(&agent, &req, opts.timeout);
        let mut st = lock.lock().unwrap();
        match outcome {
            Outcome::Sent { rejected } => {
                st.queue.pop_front();
                st.stats.sent += 1;
                st.stats.sent_bytes += len;
                st.stats.rejected_profiles += rejected;
                st.last_error = None;
                pause = Duration::from_millis(500);
            }
            Outcome::Refused(why) => {
                st.queue.pop_front();
                st.stats.refused += 1;
                say_once(&mut st, format!("{} refused a request: {why}", to.url), to);
            }
            Outcome::Retry(why, after) => {
                st.stats.retried += 1;
                say_once(&mut st, format!("{}: {why} (trying again)", to.url), to);
                let wait = after.unwrap_or(pause);
                pause = (pause * 2).min(Duration::from_secs(30));
                let until = Instant::now() + wait;
                // Sleep, but not past the end's deadline; the end itself
                // cuts a long backoff short: what is pending gets another
                // attempt at once.
                let flushing = st.deadline.is_some();
                loop {
                    let now = Instant::now();
                    let limit = st.deadline.map_or(until, |d| d.min(until));
                    if now >= limit || (!flushing && st.deadline.is_some()) {
                        break;
                    }
                    st = cv.wait_timeout(st, limit - now).unwrap().0;
                }
            }
        }
        st.stats.pending = st.queue.len() as u64;
    }
}

/// The POST of one request body.
fn request(to: &Endpoint, opts: &Options, body: Vec<u8>) -> Request {
    let mut headers = to.headers.clone();
    let body = if opts.gzip {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let _ = gz.write_all(&body);
        headers.push(("content-encoding".into(), "gzip".into()));
        gz.finish().unwrap_or_default()
    } else {
        body
    };
    Request {
        url: to.url.clone(),
        query: Vec::new(),
        content_type: "application/x-protobuf",
        headers,
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// Answer one HTTP request with 200 and an empty body.
    fn answer_once(listener: TcpListener) {
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        // The headers, then as many bytes as Content-Length says.
        loop {
            let n = conn.read(&mut buf).unwrap();
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).to_lowercase();
            if let Some(end) = text.find("\r\n\r\n") {
                let len: usize = text
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if got.len() >= end + 4 + len {
                    break;
                }
            }
            assert!(n > 0, "the request ended early");
        }
        conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .unwrap();
    }

    #[test]
    fn the_end_tries_what_is_pending_at_once_whatever_the_backoff() {
        // Nothing listens there at first: the attempts fail, the backoff
        // grows (tries at 0, 0.5, 1.5 and 3.5 s; the next at 7.5 s).
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let connect = upload::ConnectArgs {
            ca_cert: None,
            basic_auth: None,
            basic_auth_file: None,
            bearer_token: None,
            bearer_token_file: None,
            tenant: None,
            headers: Vec::new(),
        };
        let to = Endpoint::new(&format!("http://127.0.0.1:{port}/p"), &connect).unwrap();
        let sender = Sender::start(
            Arc::new(to),
            Options {
                gzip: false,
                buffer: 2,
                timeout: Duration::from_secs(2),
            },
        );
        assert!(sender.push(b"profile".to_vec()));
        std::thread::sleep(Duration::from_millis(3800));
        assert!(sender.stats().retried >= 4, "{:?}", sender.stats());
        // The receiver is back; the end allows 2 s, less than the backoff
        // left: what is pending goes now, not dropped at the deadline.
        let receiver = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let server = std::thread::spawn(move || answer_once(receiver));
        let st = sender.finish(Duration::from_secs(2));
        assert_eq!((st.sent, st.dropped), (1, 0), "{st:?}");
        server.join().unwrap();
    }

    #[test]
    fn a_partial_success_says_how_many_profiles_were_rejected() {
        assert_eq!(rejected_profiles(&[]), 0);
        // The Collector's answer: an empty partial_success.
        assert_eq!(rejected_profiles(&[0x0a, 0x00]), 0);
        assert_eq!(rejected_profiles(&[0x0a, 0x02, 0x08, 0x07]), 7);
    }
}
