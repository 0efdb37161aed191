//! What one input goes through: everything a `holdup` command does with a
//! file it is given, minus the terminal.

use holdup_analysis::causal;
use holdup_analysis::folded::{folded, FoldOptions};
use holdup_analysis::profile::{self, Filter, Section};
use holdup_analysis::waitgraph::{self, InMemory};
use holdup_render::flame::{self, FlameOptions};
use holdup_render::report::{self as text, ReportOptions};
use holdup_render::waitgraph as wg_render;
use holdup_trace::{Reader, Trace};
use std::io::sink;

/// Read `input` as a trace and as a causal profile, and run every analysis
/// and renderer on what it holds. Errors are fine; panics are the bugs.
pub fn run_one(input: &[u8]) {
    causal_profile(input);
    if input.starts_with(holdup_trace::file::MAGIC) {
        trace(input);
    }
}

/// `holdup causal report`: the COZ-format profile parser, analysis and
/// both renderings.
fn causal_profile(input: &[u8]) {
    if let Ok(p) = causal::CozProfile::parse(input) {
        let c = causal::analyze(&p);
        let _ = holdup_render::causal::write_text(&c, sink());
        let _ = holdup_render::causal::write_json(&c, sink());
    }
}

/// `holdup report`, `script`, `flame` and `waitgraph` on a trace.
fn trace(input: &[u8]) {
    let Ok(mut reader) = Reader::new(input, "fuzz") else {
        return;
    };
    let Ok(trace) = Trace::read(&mut reader) else {
        return;
    };
    let p = profile::profile(&trace, &Filter::default());
    let _ = holdup_render::report::write_json(&p, sink());
    for section in [
        Section::Thread,
        Section::Process,
        Section::Comm,
        Section::All,
    ] {
        let mut grouped = p.clone();
        grouped.threads = profile::group(std::mem::take(&mut grouped.threads), section);
        let o = ReportOptions {
            children: section == Section::Thread,
            ..Default::default()
        };
        let _ = text::render(&mut sink(), &grouped, &o);
    }
    for per_thread in [false, true] {
        let stacks = folded(
            &trace,
            &FoldOptions {
                per_thread,
                ..Default::default()
            },
        );
        let _ = holdup_analysis::folded::write_folded(&mut sink(), &stacks);
        if !stacks.is_empty() && !per_thread {
            let o = FlameOptions {
                title: "fuzz".into(),
            };
            let _ = flame::render(&stacks, &o, &mut sink());
        }
    }
    waitgraph_of(input);
}

/// `holdup waitgraph`: text, JSON and DOT.
fn waitgraph_of(input: &[u8]) {
    let Ok(mut reader) = Reader::new(input, "fuzz") else {
        return;
    };
    let mut records = Vec::new();
    if reader.for_each(|r| records.push(r)).is_err() {
        return;
    }
    let mut src = InMemory {
        header: reader.header.clone(),
        features: reader.features,
        records: &records,
    };
    if let Ok(g) = waitgraph::analyze(&mut src, &waitgraph::Options::default()) {
        let _ = wg_render::render(&mut sink(), &g, &wg_render::TextOptions::default());
        let _ = wg_render::to_json(&g);
        let _ = wg_render::to_dot(&g, &wg_render::DotOptions::default());
    }
}
