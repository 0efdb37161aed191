//! `holdup report`: the perf-style table of on-CPU and blocked samples.

use super::input::load_trace;
use holdup_analysis::profile::{self, Filter, Section};
use holdup_render::report::{self as text, ReportOptions};
use holdup_trace::Class;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Which threads to look at, shared by the commands that read samples.
#[derive(clap::Args, Debug, Clone)]
pub struct FilterArgs {
    /// Only these threads (comma-separated tids).
    #[arg(long, value_delimiter = ',')]
    pub tid: Vec<u32>,
    /// Only these processes (comma-separated pids).
    #[arg(long, value_delimiter = ',')]
    pub pid: Vec<u32>,
    /// Only threads with these names (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub comm: Vec<String>,
}

impl FilterArgs {
    /// The error for a profile with nothing in it: an empty recording and
    /// a filter that matches nothing need different fixes.
    pub fn nothing_left(&self, trace: &holdup_trace::Trace) -> anyhow::Error {
        if trace.samples.is_empty() {
            anyhow::anyhow!(
                "no samples in the trace: the program ran for less than one sampling period \
                 (raise -F, or profile something that runs longer)"
            )
        } else {
            anyhow::anyhow!("no samples match the --tid/--pid/--comm filter")
        }
    }
}

impl From<FilterArgs> for Filter {
    fn from(a: FilterArgs) -> Filter {
        Filter {
            tids: a.tid,
            pids: a.pid,
            comms: a.comm,
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace to read.
    #[arg(short, long, default_value = "holdup.data")]
    pub input: PathBuf,
    /// Text table (the default).
    #[arg(long, conflicts_with = "json")]
    pub stdio: bool,
    /// JSON, schema holdup.report/1.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Callers view: inclusive (children) and self share of every function.
    #[arg(long)]
    pub children: bool,
    /// Sections and their order, perf-style: `tid` (default), `pid` or
    /// `comm` make one section per thread, process or thread name (`none`:
    /// one for everything); a class (cpu, io, lock, sched, other) puts the
    /// sections that spend most there first, `samples` (or `overhead`) the
    /// sections with the most samples of any class. E.g. `--sort pid,io`.
    /// JSON output is always per thread.
    #[arg(long, value_delimiter = ',', default_value = "tid")]
    pub sort: Vec<String>,
    /// Hide rows below this share of their thread, in percent.
    #[arg(long, default_value_t = 0.5)]
    pub percent_limit: f64,
    /// Per thread, where its time went once each wait another thread ended
    /// is followed down the chain of waits (JSON: holdup.critical_path/1).
    #[arg(long, conflicts_with = "children")]
    pub critical_path: bool,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let trace = load_trace(&a.input)?;
    let mut p = profile::profile(&trace, &a.filter.clone().into());
    if p.threads.is_empty() {
        return Err(a.filter.nothing_left(&trace));
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if a.critical_path {
        let filter = a.filter.clone().into();
        if !super::critical::report(&trace, &filter, a.json, a.percent_limit, &mut out)? {
            return Err(a.filter.nothing_left(&trace));
        }
    } else if a.json {
        holdup_analysis::holder::annotate(&trace, &mut p);
        holdup_render::report::write_json(&p, &mut out)?;
        writeln!(out)?;
    } else {
        let (section, order) = parse_sort(&a.sort)?;
        p.threads = profile::group(std::mem::take(&mut p.threads), section);
        holdup_analysis::holder::annotate(&trace, &mut p);
        match order {
            Some(Order::Class(class)) => p
                .threads
                .sort_by_key(|t| std::cmp::Reverse(t.samples.get(class))),
            Some(Order::Samples) => p
                .threads
                .sort_by_key(|t| std::cmp::Reverse(t.samples.total())),
            None => {}
        }
        let o = ReportOptions {
            percent_limit: a.percent_limit,
            children: a.children,
            source: a.input.display().to_string(),
            ..Default::default()
        };
        text::render(&mut out, &p, &o)?;
    }
    out.flush()?;
    // The process ends here: freeing a million samples one by one would
    // only delay the exit.
    std::mem::forget((trace, p));
    Ok(ExitCode::SUCCESS)
}

/// The order of the sections.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Order {
    /// Most samples of one class first.
    Class(Class),
    /// Most samples of any class first.
    Samples,
}

fn parse_sort(keys: &[String]) -> anyhow::Result<(Section, Option<Order>)> {
    let mut section = Section::Thread;
    let mut order = None;
    for k in keys {
        match k.as_str() {
            "tid" => section = Section::Thread,
            "pid" => section = Section::Process,
            "comm" => section = Section::Comm,
            "none" => section = Section::All,
            "samples" | "overhead" => order = Some(Order::Samples),
            // perf's row keys: rows are always by symbol and object here.
            "dso" | "sym" => {}
            k => {
                let class = Class::ALL.into_iter().find(|c| c.name() == k);
                order = Some(Order::Class(class.ok_or_else(|| {
                    anyhow::anyhow!(
                        "unknown --sort key '{k}' (tid, pid, comm, none; cpu, io, lock, sched, other; samples)"
                    )
                })?))
            }
        }
    }
    Ok((section, order))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(s: &str) -> Vec<String> {
        s.split(',').map(str::to_string).collect()
    }

    #[test]
    fn sort_keys_pick_sections_and_their_order() {
        assert_eq!(
            parse_sort(&keys("pid,io")).unwrap(),
            (Section::Process, Some(Order::Class(Class::Io)))
        );
        assert_eq!(
            parse_sort(&keys("comm,samples")).unwrap(),
            (Section::Comm, Some(Order::Samples))
        );
        assert_eq!(
            parse_sort(&keys("tid,sym,dso")).unwrap(),
            (Section::Thread, None)
        );
        let err = parse_sort(&keys("cycles")).unwrap_err().to_string();
        assert!(err.contains("unknown --sort key 'cycles'"), "{err}");
    }
}
