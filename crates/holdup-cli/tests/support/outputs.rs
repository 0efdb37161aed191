//! Helpers shared by the `outputs` end-to-end tests with and without root.

use crate::support::*;
use std::path::Path;

/// Every writer, with the output path it is given.
pub fn writers(out: &str) -> Vec<Vec<String>> {
    let mut v: Vec<Vec<&str>> = vec![
        vec!["html", "-o"],
        vec!["flame", "-o"],
        vec!["waitgraph", "--svg"],
    ];
    for f in ["pprof", "firefox", "perfetto", "speedscope", "folded"] {
        v.push(vec!["export", "-f", f, "-o"]);
    }
    v.into_iter()
        .map(|mut args| {
            args.push(out);
            args.extend(["-i", "small.data"]);
            args.into_iter().map(String::from).collect()
        })
        .collect()
}

pub fn run_in(dir: &Path, args: &[String]) -> std::process::Output {
    holdup().current_dir(dir).args(args).bounded_output()
}
