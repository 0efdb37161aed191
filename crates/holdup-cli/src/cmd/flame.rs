//! `holdup flame`: one flame graph of on-CPU and blocked time.

use super::input::load_trace;
use super::report::FilterArgs;
use anyhow::Context;
use holdup_analysis::folded::{self, FoldOptions};
use holdup_render::flame::{self, FlameOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace to read.
    #[arg(short, long, default_value = "holdup.data")]
    pub input: PathBuf,
    /// SVG file to write.
    #[arg(short, long, default_value = "flame.svg")]
    pub output: PathBuf,
    /// One tower per thread (`comm-tid`) instead of per process name.
    #[arg(long)]
    pub per_thread: bool,
    /// Title of the graph.
    #[arg(long)]
    pub title: Option<String>,
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
    if stacks.is_empty() {
        anyhow::bail!("no samples match the --tid/--pid/--comm filter");
    }
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
    let file = std::fs::File::create(&a.output)
        .with_context(|| format!("cannot create {}", a.output.display()))?;
    let mut out = std::io::BufWriter::new(file);
    flame::render(&stacks, &FlameOptions { title }, &mut out)?;
    eprintln!("holdup: wrote {}", a.output.display());
    Ok(ExitCode::SUCCESS)
}
