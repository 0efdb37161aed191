//! `holdup export`: the profile in the formats of other tools (pprof,
//! Firefox Profiler, Perfetto, speedscope, folded stacks, OpenTelemetry).

use super::input::load_trace;
use super::script::StackArgs;
use holdup_analysis::folded;
use holdup_record::session;
use holdup_render::export::{self, firefox, otlp, perfetto, pprof, speedscope};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Format {
    /// profile.proto, gzipped: go tool pprof, Pyroscope, Parca.
    Pprof,
    /// The Firefox Profiler's processed format (profiler.firefox.com).
    Firefox,
    /// A Perfetto trace (ui.perfetto.dev): thread states, wakeups, samples.
    Perfetto,
    /// speedscope's JSON file format, one profile per thread.
    Speedscope,
    /// Folded stacks, as `holdup script` writes them.
    Folded,
    /// OpenTelemetry profiles: an OTLP ExportProfilesServiceRequest (the
    /// same bytes as a ProfilesData file), as `holdup agent` sends them.
    Otlp,
}

impl Format {
    fn default_file(self) -> &'static str {
        match self {
            Format::Pprof => "holdup.pb.gz",
            Format::Firefox => "holdup.firefox.json",
            Format::Perfetto => "holdup.pftrace",
            Format::Speedscope => "holdup.speedscope.json",
            Format::Folded => "holdup.folded",
            Format::Otlp => "holdup.otlp.pb",
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output format.
    #[arg(short, long, value_enum)]
    pub format: Format,
    /// File to write (`-` for standard output); holdup.pb.gz,
    /// holdup.firefox.json, holdup.pftrace, holdup.speedscope.json or
    /// holdup.folded or holdup.otlp.pb by default.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub stacks: StackArgs,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let path = a
        .output
        .clone()
        .unwrap_or_else(|| a.format.default_file().into());
    // Build everything before creating the file, so that bad input leaves
    // no empty output behind.
    let bytes = render(a)?;
    crate::output::write(&path, &bytes)?;
    Ok(ExitCode::SUCCESS)
}

fn render(a: Args) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    match a.format {
        Format::Folded => {
            let (_, stacks) = a.stacks.load()?;
            folded::write_folded(&mut out, &stacks)?;
        }
        Format::Pprof | Format::Firefox | Format::Perfetto | Format::Speedscope | Format::Otlp => {
            let trace = load_trace(&a.stacks.input)?;
            let filter = a.stacks.filter.clone().into();
            let samples = export::stack_samples(&trace, &filter);
            if samples.is_empty() {
                return Err(a.stacks.filter.nothing_left(&trace));
            }
            let name = a.stacks.input.display().to_string();
            match a.format {
                Format::Pprof => pprof::write(&trace, &samples, &mut out)?,
                Format::Firefox => {
                    let profile = firefox::profile(&trace, &samples, &filter, &name);
                    serde_json::to_writer(&mut out, &profile)?;
                    out.push(b'\n');
                }
                Format::Perfetto => out = perfetto::encode(&trace, &samples, &filter),
                Format::Otlp => {
                    let common = super::agent::resource_attributes()?;
                    out = otlp::encode(&otlp::Request {
                        trace: &trace,
                        samples: &samples,
                        start_unix_ns: trace.header.start_unix_ns,
                        duration_ns: trace.duration_ns(),
                        processes: &super::agent::processes_of_trace(&trace),
                        common: &common,
                        stack_sampling_ratio: session::stack_budget_ratio(&trace.notes)
                            .unwrap_or(1.0),
                    });
                }
                Format::Speedscope | Format::Folded => {
                    let doc = speedscope::document(&trace, &samples, &name);
                    serde_json::to_writer(&mut out, &doc)?;
                    out.push(b'\n');
                }
            }
        }
    }
    Ok(out)
}
