//! Separate debug files of stripped binaries, found by build-id, as perf
//! and gdb find them:
//!
//! - `/usr/lib/debug/.build-id/xx/rest.debug`, where Debian's `-dbgsym`
//!   packages (and `libc6-dbg`) put them;
//! - debuginfod servers named in `DEBUGINFOD_URLS` (space-separated):
//!   `GET URL/buildid/HEX/debuginfo`, each answer kept in the user's cache
//!   directory under its build-id, so it is fetched once.
//!
//! Asking servers is bounded in time: each request by `DEBUGINFOD_TIMEOUT`
//! seconds (10 by default), all of a recording's requests by
//! [`TOTAL_BUDGET`]. A server that fails (cannot be reached, answers with a
//! server error, serves a file of another build-id) is asked nothing more
//! and said once; one that does not have a file (404) is no failure.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where distributions install debug files by build-id.
pub const BUILD_ID_DIR: &str = "/usr/lib/debug";

/// The most a recording waits for debuginfod servers in all.
pub const TOTAL_BUDGET: Duration = Duration::from_secs(30);

/// The largest debug file fetched (what the symbolizer copies at most).
const MAX_DOWNLOAD: u64 = crate::traced::MAX_COPY;

fn hex(build_id: &[u8]) -> String {
    holdup_trace::build_id_hex(build_id)
}

/// `DIR/.build-id/xx/rest.debug` of `build_id` (None for ids too short to
/// be real).
fn build_id_path(dir: &Path, build_id: &[u8]) -> Option<PathBuf> {
    let hex = hex(build_id);
    (hex.len() > 2).then(|| {
        dir.join(".build-id")
            .join(&hex[..2])
            .join(format!("{}.debug", &hex[2..]))
    })
}

/// The installed debug file of `build_id` under `/usr/lib/debug`, if there
/// is one: for code that cannot ask servers (line tables of the causal
/// profiler).
pub fn debug_file_for(build_id: &[u8]) -> Option<PathBuf> {
    build_id_path(Path::new(BUILD_ID_DIR), build_id).filter(|p| p.is_file())
}

/// Debug files by build-id: in directories, then from servers.
#[derive(Debug)]
pub struct DebugFiles {
    dirs: Vec<PathBuf>,
    /// Where files fetched from servers are kept (and found again, with
    /// or without servers to ask).
    fetched: Option<PathBuf>,
    server: Option<Debuginfod>,
    found: HashMap<Vec<u8>, Option<PathBuf>>,
}

impl Default for DebugFiles {
    fn default() -> Self {
        Self::in_dirs(vec![PathBuf::from(BUILD_ID_DIR)])
    }
}

impl DebugFiles {
    /// Only the debug files under these directories' `.build-id`.
    pub fn in_dirs(dirs: Vec<PathBuf>) -> Self {
        Self {
            dirs,
            fetched: None,
            server: None,
            found: HashMap::new(),
        }
    }

    /// Also the files fetched before into `cache`, and ask the debuginfod
    /// servers of `urls` (space-separated, as `DEBUGINFOD_URLS`; none if
    /// empty), keeping what they send there.
    pub fn with_servers(mut self, urls: &str, cache: PathBuf) -> Self {
        self.server = Debuginfod::new(urls);
        self.fetched = Some(cache);
        self
    }

    /// `/usr/lib/debug`, the files fetched before into `cache`, and the
    /// servers of `DEBUGINFOD_URLS` (none without a cache: a file fetched
    /// would be fetched again at every recording).
    pub fn from_env(cache: Option<PathBuf>) -> Self {
        let urls = std::env::var("DEBUGINFOD_URLS").unwrap_or_default();
        match cache {
            Some(cache) => Self::default().with_servers(&urls, cache),
            None => Self::default(),
        }
    }

    /// The servers asked, as given (part of what a symbol cache key means).
    pub fn servers(&self) -> Option<String> {
        self.server.as_ref().map(|s| s.urls.join(" "))
    }

    /// A debug file of `build_id` already on this machine: in the
    /// directories or fetched before. Asks no server.
    pub fn local(&self, build_id: &[u8]) -> Option<PathBuf> {
        let installed = self
            .dirs
            .iter()
            .filter_map(|d| build_id_path(d, build_id))
            .find(|p| p.is_file());
        installed.or_else(|| {
            let p = fetched_path(self.fetched.as_ref()?, build_id);
            p.is_file().then_some(p)
        })
    }

    /// The debug file of `build_id`, from a server if none is here.
    pub fn find(&mut self, build_id: &[u8]) -> Option<PathBuf> {
        if let Some(known) = self.found.get(build_id) {
            return known.clone();
        }
        let found = self.local(build_id).or_else(|| {
            let cache = self.fetched.as_ref()?;
            self.server.as_mut()?.fetch(build_id, cache)
        });
        self.found.insert(build_id.to_vec(), found.clone());
        found
    }

    /// Servers that failed, each once with why.
    pub fn problems(&self) -> Vec<String> {
        let Some(s) = &self.server else {
            return Vec::new();
        };
        let mut out: Vec<String> = s
            .failed
            .iter()
            .map(|(url, why)| format!("debuginfod server {url}: {why}"))
            .collect();
        if s.out_of_time {
            out.push(format!(
                "debuginfod: stopped asking after {} s; files not fetched are looked for next time",
                TOTAL_BUDGET.as_secs()
            ));
        }
        out
    }
}

/// Where a file fetched for `build_id` is kept in `cache`.
fn fetched_path(cache: &Path, build_id: &[u8]) -> PathBuf {
    cache.join(format!("{}.debug", hex(build_id)))
}

#[derive(Debug)]
struct Debuginfod {
    urls: Vec<String>,
    per_request: Duration,
    spent: Duration,
    out_of_time: bool,
    /// Servers asked nothing more, with why.
    failed: BTreeMap<String, String>,
    agent: ureq::Agent,
}

/// What one server said of one build-id.
enum Answer {
    Fetched(PathBuf),
    NotThere,
    Failed(String),
}

impl Debuginfod {
    fn new(urls: &str) -> Option<Self> {
        let urls: Vec<String> = urls
            .split_ascii_whitespace()
            .map(|u| u.trim_end_matches('/').to_string())
            .collect();
        if urls.is_empty() {
            return None;
        }
        let per_request = std::env::var("DEBUGINFOD_TIMEOUT")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .filter(|&s| s > 0)
            .map_or(Duration::from_secs(10), Duration::from_secs);
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        Some(Self {
            urls,
            per_request,
            spent: Duration::ZERO,
            out_of_time: false,
            failed: BTreeMap::new(),
            agent,
        })
    }

    /// Ask each server in turn, keeping the answer in `cache`.
    fn fetch(&mut self, build_id: &[u8], cache: &Path) -> Option<PathBuf> {
        for i in 0..self.urls.len() {
            let url = self.urls[i].clone();
            if self.failed.contains_key(&url) {
                continue;
            }
            let Some(left) = TOTAL_BUDGET
                .checked_sub(self.spent)
                .filter(|l| !l.is_zero())
            else {
                self.out_of_time = true;
                return None;
            };
            let began = Instant::now();
            let answer = self.ask(&url, build_id, left.min(self.per_request), cache);
            self.spent += began.elapsed();
            match answer {
                Answer::Fetched(p) => return Some(p),
                Answer::NotThere => {}
                Answer::Failed(why) => {
                    self.failed.insert(url, why);
                }
            }
        }
        None
    }

    fn ask(&self, url: &str, build_id: &[u8], timeout: Duration, cache: &Path) -> Answer {
        let hex = hex(build_id);
        let call = self
            .agent
            .get(format!("{url}/buildid/{hex}/debuginfo"))
            .config()
            .timeout_global(Some(timeout))
            .build();
        let mut resp = match call.call() {
            Ok(r) => r,
            Err(e) => return Answer::Failed(e.to_string()),
        };
        match resp.status().as_u16() {
            200 => {}
            404 => return Answer::NotThere,
            s => return Answer::Failed(format!("HTTP {s}")),
        }
        let mut body = resp.body_mut().with_config().limit(MAX_DOWNLOAD).reader();
        match keep(&mut body, build_id, cache) {
            Ok(p) => Answer::Fetched(p),
            Err(why) => Answer::Failed(why),
        }
    }
}

/// Write an answer into `cache`, and keep it if it is the debug file asked
/// for: an ELF file of the same build-id.
fn keep(body: &mut dyn Read, build_id: &[u8], cache: &Path) -> Result<PathBuf, String> {
    private_dir(cache).map_err(|e| format!("cannot use {}: {e}", cache.display()))?;
    let hex = hex(build_id);
    let part = cache.join(format!("{hex}.part{}", std::process::id()));
    let mut write = || -> std::io::Result<()> {
        let mut f = new_private_file(&part)?;
        std::io::copy(body, &mut f)?;
        f.flush()
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&part);
        return Err(format!("download failed: {e}"));
    }
    let served = crate::elf::read_build_id(&part);
    if served.as_deref() != Some(build_id) {
        let _ = std::fs::remove_file(&part);
        return Err(format!("served a file that is not the debug file of {hex}"));
    }
    let path = fetched_path(cache, build_id);
    std::fs::rename(&part, &path).map_err(|e| e.to_string())?;
    Ok(path)
}

/// A directory of ours that no one else can enter (made if missing);
/// refused if it is a link or someone else's.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    let md = std::fs::symlink_metadata(dir)?;
    let ours = md.is_dir() && md.uid() == unsafe { libc::geteuid() } && md.mode() & 0o077 == 0;
    if !ours {
        return Err(std::io::Error::other("not a private directory of ours"));
    }
    Ok(())
}

fn new_private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_by_build_id() {
        let id = [0xab, 0xcd, 0xef, 0x01];
        assert_eq!(
            build_id_path(Path::new("/usr/lib/debug"), &id).unwrap(),
            Path::new("/usr/lib/debug/.build-id/ab/cdef01.debug")
        );
        assert!(build_id_path(Path::new("/d"), &[0xab]).is_none());
    }

    /// A one-request HTTP server on a free port that answers `status`
    /// with `body`; returns its URL.
    fn serve_once(status: &'static str, body: Vec<u8>) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = listener.accept() {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let head = format!(
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes());
                let _ = s.write_all(&body);
            }
        });
        url
    }

    #[test]
    fn a_failing_server_is_said_once_and_asked_no_more() {
        let dir = holdup_testkit::scratch("debuginfo-failing");
        // Nothing listens on a port just closed: refused at once.
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}", l.local_addr().unwrap())
        };
        let mut files = DebugFiles::in_dirs(vec![]).with_servers(&closed, dir.join("cache"));
        assert_eq!(files.find(&[1, 2, 3, 4]), None);
        assert_eq!(files.find(&[5, 6, 7, 8]), None);
        let problems = files.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains(&closed), "{problems:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_file_is_no_failure_and_a_wrong_one_is_not_kept() {
        let dir = holdup_testkit::scratch("debuginfo-answers");
        let missing = serve_once("404 Not Found", b"not here".to_vec());
        let mut files = DebugFiles::in_dirs(vec![]).with_servers(&missing, dir.join("cache"));
        assert_eq!(files.find(&[1, 2, 3, 4]), None);
        assert!(files.problems().is_empty());
        // An answer that is no ELF file of that build-id.
        let wrong = serve_once("200 OK", b"\x7fELF garbage".to_vec());
        let mut files = DebugFiles::in_dirs(vec![]).with_servers(&wrong, dir.join("cache"));
        assert_eq!(files.find(&[1, 2, 3, 4]), None);
        let problems = files.problems();
        assert!(problems[0].contains("not the debug file"), "{problems:?}");
        let left: Vec<_> = std::fs::read_dir(dir.join("cache")).unwrap().collect();
        assert!(left.is_empty(), "nothing kept: {left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_right_file_is_fetched_once_and_then_found_here() {
        let dir = holdup_testkit::scratch("debuginfo-fetched");
        // This test binary is an ELF file with a build-id: serve it.
        let me = std::env::current_exe().unwrap();
        let id = crate::elf::read_build_id(&me).expect("a build-id");
        let url = serve_once("200 OK", std::fs::read(&me).unwrap());
        let cache = dir.join("cache");
        let mut files = DebugFiles::in_dirs(vec![]).with_servers(&url, cache.clone());
        let got = files.find(&id).expect("fetched");
        assert_eq!(crate::elf::read_build_id(&got).as_deref(), Some(&id[..]));
        // The server answers once only: the next lookups are local, with
        // servers to ask or none.
        let files = DebugFiles::in_dirs(vec![]).with_servers(&url, cache.clone());
        assert_eq!(files.local(&id), Some(got.clone()));
        let files = DebugFiles::in_dirs(vec![]).with_servers("", cache);
        assert_eq!(files.servers(), None);
        assert_eq!(files.local(&id), Some(got));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
