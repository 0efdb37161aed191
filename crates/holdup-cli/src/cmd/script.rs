//! `holdup script`: folded stacks of on-CPU and blocked samples.

use super::input::load_trace;
use super::report::FilterArgs;
use holdup_analysis::folded::{self, FoldOptions};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace to read.
    #[arg(short, long, default_value = "holdup.data")]
    pub input: PathBuf,
    /// Root every stack at its thread (`comm-tid`) instead of its process name.
    #[arg(long)]
    pub per_thread: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let trace = load_trace(&a.input)?;
    let stacks = folded::folded(
        &trace,
        &FoldOptions {
            per_thread: a.per_thread,
            filter: a.filter.into(),
        },
    );
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    folded::write_folded(&mut out, &stacks)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
