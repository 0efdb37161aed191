//! `holdup script`: folded stacks of on-CPU and blocked samples.

use super::input::load_trace;
use super::report::FilterArgs;
use holdup_analysis::folded::{self, FoldOptions};
use holdup_analysis::profile::Filter;
use holdup_trace::Trace;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// What folded stacks are made of; shared with `holdup flame`.
#[derive(clap::Args, Debug)]
pub struct StackArgs {
    /// Trace to read.
    #[arg(short, long, default_value = "holdup.data")]
    pub input: PathBuf,
    /// Root every stack at its thread (`comm-tid`) instead of its name.
    #[arg(long)]
    pub per_thread: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
}

impl StackArgs {
    /// The trace and its folded stacks; an error if no sample is left.
    pub fn load(self) -> anyhow::Result<(Trace, Vec<(String, u64)>)> {
        let per_thread = self.per_thread;
        self.load_with(|trace, filter| {
            Ok(folded::folded(
                trace,
                &FoldOptions {
                    per_thread,
                    filter: filter.clone(),
                },
            ))
        })
    }

    /// The trace and the stacks `fold` makes of it (with the filter).
    pub fn load_with(
        self,
        fold: impl FnOnce(&Trace, &Filter) -> anyhow::Result<Vec<(String, u64)>>,
    ) -> anyhow::Result<(Trace, Vec<(String, u64)>)> {
        let trace = load_trace(&self.input)?;
        let stacks = fold(&trace, &self.filter.clone().into())?;
        if stacks.is_empty() {
            return Err(self.filter.nothing_left(&trace));
        }
        Ok((trace, stacks))
    }
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub stacks: StackArgs,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let (_, stacks) = a.stacks.load()?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    folded::write_folded(&mut out, &stacks)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
