//! `holdup html`: everything holdup knows about a trace in one
//! self-contained page.

use super::input::load_trace;
use super::report::FilterArgs;
use anyhow::Context;
use holdup_analysis::causal::{analyze, CozProfile};
use holdup_analysis::profile;
use holdup_analysis::waitgraph::{self, Options, Source, TraceFile};
use holdup_render::html::{self, Page, WaitGraph};
use holdup_render::{export, waitgraph as wg};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace to read.
    #[arg(short, long, default_value = "holdup.data")]
    pub input: PathBuf,
    /// Page to write (`-` for standard output).
    #[arg(short, long, default_value = "holdup.html")]
    pub output: PathBuf,
    /// A causal profile (`holdup causal run`'s output) whose curves to add.
    #[arg(long, value_name = "PROFILE")]
    pub causal: Option<PathBuf>,
    #[command(flatten)]
    pub filter: FilterArgs,
}

/// GraphViz's picture of the wait-for graph; its text rendering without
/// GraphViz; why there is none for a trace without wait segments.
fn wait_graph(path: &Path, trace: &holdup_trace::Trace) -> WaitGraph {
    let mut g = match TraceFile::open(path)
        .map_err(|e| e.to_string())
        .and_then(|mut src| {
            let opts = Options {
                device_names: holdup_trace::devices::block_devices_of(src.header()),
                ..Default::default()
            };
            waitgraph::analyze(&mut src, &opts).map_err(|e| e.to_string())
        }) {
        Ok(g) => g,
        Err(e) => return WaitGraph::Missing(e),
    };
    waitgraph::add_holders(trace, &mut g);
    let dot = wg::to_dot(
        &g,
        &wg::DotOptions {
            title: format!("holdup waitgraph {}", path.display()),
            ..Default::default()
        },
    );
    match wg::to_svg(&dot) {
        Ok(svg) => WaitGraph::Svg(svg),
        Err(_) => {
            let mut text = Vec::new();
            let o = wg::TextOptions {
                source: path.display().to_string(),
                ..Default::default()
            };
            match wg::render(&mut text, &g, &o) {
                Ok(()) => WaitGraph::Text(String::from_utf8_lossy(&text).into_owned()),
                Err(e) => WaitGraph::Missing(e.to_string()),
            }
        }
    }
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let trace = load_trace(&a.input)?;
    let filter = a.filter.clone().into();
    let samples = export::stack_samples(&trace, &filter);
    let profile = profile::profile(&trace, &filter);
    if samples.is_empty() || profile.threads.is_empty() {
        return Err(a.filter.nothing_left(&trace));
    }
    let causal = match &a.causal {
        Some(p) => {
            let file =
                std::fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
            let coz = CozProfile::parse(BufReader::new(file))
                .with_context(|| format!("{} is not a causal profile", p.display()))?;
            Some(analyze(&coz))
        }
        None => None,
    };
    // As `flame --critical-path` draws it, for the threads the filter keeps.
    let critical = super::critical::folded(&trace, &filter).map_err(|e| e.to_string());
    let title = a.input.display().to_string();
    let page = html::render(&Page {
        title: &title,
        trace: &trace,
        profile: &profile,
        samples: &samples,
        waitgraph: wait_graph(&a.input, &trace),
        critical: critical.as_deref().map_err(Clone::clone),
        causal: causal.as_ref(),
    });
    crate::output::write(&a.output, page.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
