//! Settings passed by `holdup causal run` through the environment.

use std::path::PathBuf;

/// The environment `holdup causal run` sets.
pub use holdup_coz::env;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subclass {
    Io,
    Sched,
}

impl Subclass {
    pub fn name(self) -> &'static str {
        match self {
            Subclass::Io => "subclass:io",
            Subclass::Sched => "subclass:sched",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    pub ring_fd: i32,
    pub ring_bytes: u64,
    pub period_ns: u64,
    pub output: PathBuf,
    pub scope: Option<String>,
    pub line: Option<String>,
    /// Fixed speedup in percent.
    pub speedup: Option<u32>,
    pub subclass: Option<Subclass>,
    /// `--process NAME` (with `--system`): the only target is that process.
    pub process: Option<String>,
    pub end_to_end: bool,
    pub experiment_ns: u64,
    pub verbose: bool,
    /// Uprobe progress points opened by `holdup causal run`.
    pub probes: Option<String>,
    /// `--system`: the directory of the domain shared by all processes
    /// (then there is no ring: samples come through its socket).
    pub system: Option<PathBuf>,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Config {
    /// The settings, if this process is the one `holdup causal run` started.
    pub fn from_env() -> Option<Config> {
        let system = var(env::SYSTEM).map(PathBuf::from);
        // Thread-level: only the command itself, not what it starts.
        if system.is_none() {
            let parent: i32 = var(env::PARENT)?.parse().ok()?;
            if unsafe { libc::getppid() } != parent {
                return None;
            }
        }
        Some(Config {
            ring_fd: match var(env::RING_FD).and_then(|v| v.parse().ok()) {
                Some(fd) => fd,
                None if system.is_some() => -1,
                None => return None,
            },
            ring_bytes: var(env::RING_BYTES)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            period_ns: var(env::PERIOD_NS)
                .and_then(|v| v.parse().ok())
                .unwrap_or(1_000_000),
            output: var(env::OUTPUT)
                .unwrap_or_else(|| "profile.coz".into())
                .into(),
            scope: var(env::SCOPE),
            line: var(env::LINE),
            speedup: var(env::SPEEDUP)
                .and_then(|v| v.parse().ok())
                .filter(|&s| s <= 100),
            subclass: match var(env::SUBCLASS).as_deref() {
                Some("io") => Some(Subclass::Io),
                Some("sched") => Some(Subclass::Sched),
                _ => None,
            },
            process: var(env::PROCESS),
            end_to_end: var(env::END_TO_END).is_some(),
            experiment_ns: var(env::EXPERIMENT_MS)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(200)
                .max(10)
                * 1_000_000,
            verbose: var(env::VERBOSE).is_some(),
            probes: var(env::PROBES),
            system,
        })
    }
}
