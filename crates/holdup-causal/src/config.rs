//! Settings passed by `holdup causal run` through the environment.

/// The environment `holdup causal run` sets.
pub use holdup_coz::env;

use holdup_coz::handoff::Inherited;
use holdup_coz::probe_list::{self, ProbePoint};
use holdup_coz::target::Subclass;
use holdup_symbolize::lines::Granularity;

#[derive(Clone, Debug)]
pub struct Config {
    pub ring_fd: i32,
    pub ring_bytes: u64,
    pub period_ns: u64,
    /// The profile `holdup causal run` opened (one process; -1 with
    /// `--system`, whose processes send their records over their socket).
    pub output_fd: i32,
    pub scope: Option<String>,
    pub granularity: Granularity,
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
    pub probes: Vec<ProbePoint>,
    /// `--system`: the domain shared by all processes (then there is no
    /// ring: samples come through this process's socket).
    pub system: Option<Inherited>,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn number<T: std::str::FromStr>(name: &str) -> Option<T> {
    var(name).and_then(|v| v.parse().ok())
}

impl Config {
    /// The settings, if this process is the one `holdup causal run` started.
    pub fn from_env() -> Option<Config> {
        let system = Inherited::from_env(var);
        // Thread-level: only the command itself, not what it starts.
        if system.is_none() {
            let parent: i32 = number(env::PARENT)?;
            if unsafe { libc::getppid() } != parent {
                return None;
            }
        }
        Some(Config {
            ring_fd: match number(env::RING_FD) {
                Some(fd) => fd,
                None if system.is_some() => -1,
                None => return None,
            },
            ring_bytes: number(env::RING_BYTES).unwrap_or(0),
            period_ns: number(env::PERIOD_NS).unwrap_or(1_000_000),
            output_fd: number(env::OUTPUT_FD).unwrap_or(-1),
            scope: var(env::SCOPE),
            granularity: match var(env::GRANULARITY).as_deref() {
                Some("function") => Granularity::Function,
                _ => Granularity::Line,
            },
            line: var(env::LINE),
            speedup: number(env::SPEEDUP).filter(|&s| s <= 100),
            subclass: var(env::SUBCLASS).as_deref().and_then(Subclass::parse),
            process: var(env::PROCESS),
            end_to_end: var(env::END_TO_END).is_some(),
            experiment_ns: number::<u64>(env::EXPERIMENT_MS)
                .unwrap_or(200)
                .max(10)
                .saturating_mul(1_000_000),
            verbose: var(env::VERBOSE).is_some(),
            probes: var(env::PROBES)
                .as_deref()
                .map_or_else(Vec::new, probe_list::decode),
            system,
        })
    }
}
