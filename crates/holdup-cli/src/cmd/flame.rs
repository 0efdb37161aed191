//! `holdup flame`: one flame graph of on-CPU and blocked time.

use super::script::StackArgs;
use anyhow::Context;
use holdup_render::flame::{self, FlameOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub stacks: StackArgs,
    /// SVG file to write (`-` for standard output).
    #[arg(short, long, default_value = "flame.svg")]
    pub output: PathBuf,
    /// Title of the graph.
    #[arg(long)]
    pub title: Option<String>,
    /// Each wait another thread ended replaced by what the chain behind it
    /// did, the wait a frame naming its subclass and the thread waited for.
    #[arg(long)]
    pub critical_path: bool,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let (trace, stacks) = if a.critical_path {
        a.stacks.load_with(super::critical::folded)?
    } else {
        a.stacks.load()?
    };
    let title = a.title.unwrap_or_else(|| {
        let what = if trace.header.command.is_empty() {
            trace.header.target.clone()
        } else {
            trace.header.command.join(" ")
        };
        format!(
            "holdup: {what} — on- and off-CPU, {} ms samples",
            trace.header.period_ns as f64 / 1e6
        )
    });
    let mut out = crate::output::create(&a.output)?;
    flame::render(&stacks, &FlameOptions { title }, &mut out)
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    crate::output::done(&a.output, out)?;
    Ok(ExitCode::SUCCESS)
}
