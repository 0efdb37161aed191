//! What `record` and `latency` record: a command (the default), existing
//! processes or the whole system, and for how long.

use anyhow::bail;
use holdup_bpf::Target;
use std::time::Duration;

/// What to record, for `record` and `latency`: a command (the default),
/// existing processes or the whole system, and for how long.
#[derive(clap::Args, Debug)]
pub struct TargetArgs {
    /// Existing processes (comma-separated pids) instead of a command.
    #[arg(short, long, value_delimiter = ',', conflicts_with = "all")]
    pub pid: Vec<u32>,
    /// Every process on the system.
    #[arg(short, long)]
    pub all: bool,
    /// Stop after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
}

impl TargetArgs {
    /// The target and the duration; `verb` and `subcommand` word the error
    /// when there is nothing to record.
    pub fn resolve(
        &self,
        has_command: bool,
        words: (&str, &str),
    ) -> anyhow::Result<(Target, Option<Duration>)> {
        let duration = self.duration()?;
        Ok((
            choose_target(self.all, &self.pid, has_command, words)?,
            duration,
        ))
    }

    /// `--duration`, checked.
    pub fn duration(&self) -> anyhow::Result<Option<Duration>> {
        Ok(match self.duration {
            Some(s) if !(s > 0.0 && s.is_finite()) => {
                bail!("--duration must be a positive number of seconds")
            }
            Some(s) => Some(Duration::from_secs_f64(s)),
            None => None,
        })
    }
}

/// What `-a`, `-p PID,…` and a command ask to record (a command starts
/// with no pid: it is added once launched). For none of them the error
/// says there is nothing to `verb` and shows `holdup SUBCOMMAND -- CMD`.
fn choose_target(
    all: bool,
    pids: &[u32],
    has_command: bool,
    (verb, subcommand): (&str, &str),
) -> anyhow::Result<Target> {
    Ok(match (all, pids.is_empty(), has_command) {
        (true, _, false) => Target::All,
        (false, false, false) => {
            for &pid in pids {
                if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    bail!("no process with pid {pid}");
                }
            }
            Target::Pids(pids.to_vec())
        }
        (false, true, true) => Target::Pids(Vec::new()),
        (false, true, false) => {
            bail!("nothing to {verb}: give a command (holdup {subcommand} -- CMD), -p PID or -a")
        }
        _ => bail!("give either a command, -p PID or -a, not several"),
    })
}
