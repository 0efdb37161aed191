//! One module per subcommand.

pub mod agent;
pub mod causal;
pub mod critical;
pub mod export;
pub mod flame;
pub mod generate;
pub mod html;
pub mod input;
pub mod latency;
pub mod push;
pub mod record;
pub mod report;
pub mod script;
pub mod syscalls;
pub mod target;
pub mod waitgraph;

use crate::cli::{Cli, Command};
use std::process::ExitCode;

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Record(a) => record::run(a),
        Command::Report(a) => report::run(a),
        Command::Flame(a) => flame::run(a),
        Command::Script(a) => script::run(a),
        Command::Export(a) => export::run(a),
        Command::Html(a) => html::run(a),
        Command::Push(a) => push::run(a),
        Command::Waitgraph(a) => waitgraph::run(a),
        Command::Causal(a) => causal::run(a),
        Command::Agent(a) => agent::run(a),
        Command::Syscalls(a) => syscalls::run(a),
        Command::Latency(a) => latency::run(a),
        Command::Completions(a) => generate::completions(a),
        Command::Man(a) => generate::man(a),
    }
}
