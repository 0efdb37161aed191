//! `holdup syscalls`: system-call performance per process, call and call
//! site, and the slowest invocations (DeBox).

use super::input::load_trace;
use holdup_analysis::syscalls::{self, Options};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace to read (recorded with `holdup record --syscalls`).
    #[arg(short, long, default_value = "holdup.data")]
    pub input: PathBuf,
    /// JSON, schema holdup.syscalls/1.
    #[arg(long)]
    pub json: bool,
    /// Also list the N slowest invocations, each broken down.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub slowest: usize,
    /// Only these processes (comma-separated pids).
    #[arg(long, value_delimiter = ',')]
    pub pid: Vec<u32>,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let trace = load_trace(&a.input)?;
    let report = syscalls::analyze(
        &trace,
        &Options {
            pids: a.pid.clone(),
            slowest: a.slowest,
        },
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", a.input.display()))?;
    if report.processes.is_empty() && !a.pid.is_empty() {
        anyhow::bail!("no system calls of the processes given with --pid");
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if a.json {
        holdup_render::syscalls::write_json(&report, &mut out)?;
        writeln!(out)?;
    } else {
        holdup_render::syscalls::render(&mut out, &report)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
