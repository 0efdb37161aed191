//! Command-line syntax. Arguments are turned into plain config structs in
//! each subcommand module, so nothing below the CLI sees clap.

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "holdup",
    version,
    about = "What really holds this program up — on the CPU or off it — and which fix will pay"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Record on-CPU samples, blocked samples and wait events into a trace.
    Record(crate::cmd::record::Args),
    /// Per-thread profile of on-CPU and blocked samples, perf-style.
    Report(crate::cmd::report::Args),
    /// One flame graph of on-CPU and off-CPU time, coloured by subclass.
    Flame(crate::cmd::flame::Args),
    /// Folded stacks, for inferno, FlameGraph or speedscope.
    Script(crate::cmd::script::Args),
    /// The profile for pprof, the Firefox Profiler, Perfetto, speedscope or as folded stacks.
    Export(crate::cmd::export::Args),
    /// One self-contained HTML page: report, flame graph, wait-for graph.
    Html(crate::cmd::html::Args),
    /// Send a trace's profile, as pprof, to Pyroscope or Parca.
    Push(crate::cmd::push::Args),
    /// The wait-for graph: which waits limit throughput (knots).
    Waitgraph(crate::cmd::waitgraph::Args),
    /// Record the machine continuously and send OTLP profiles to an OpenTelemetry Collector.
    Agent(crate::cmd::agent::Args),
    /// Causal profiling: what would a faster line, disk or more cores buy.
    Causal(crate::cmd::causal::Args),
    /// System calls per process, call and call site; the slowest whole (DeBox).
    Syscalls(crate::cmd::syscalls::Args),
    /// Latency histograms of system calls and functions, with their peaks.
    Latency(crate::cmd::latency::Args),
    /// Shell completions (bash, zsh, fish, elvish, PowerShell) on standard output.
    Completions(crate::cmd::generate::CompletionsArgs),
    /// Write the man pages into a directory.
    #[command(hide = true)]
    Man(crate::cmd::generate::ManArgs),
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }
}
