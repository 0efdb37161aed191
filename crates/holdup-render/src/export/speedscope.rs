//! speedscope's file format (https://www.speedscope.app/file-format-schema.json):
//! one sampled profile per thread, samples in time order, weights in
//! milliseconds. Blocked stacks end in the subclass's pseudo frame
//! (`[I] io wait`), as in `holdup flame`, so the subclass shows as the leaf.

use super::StackSample;
use holdup_analysis::folded::leaf_name;
use holdup_trace::Trace;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

/// One thread's profile: its name, stacks (frame indices, root first) and
/// their weights in milliseconds.
type ThreadSamples = (String, Vec<Vec<usize>>, Vec<f64>);

/// The speedscope document.
pub fn document(trace: &Trace, samples: &[StackSample], name: &str) -> Value {
    let period_ms = trace.header.period_ns as f64 / 1e6;
    let mut frames: Vec<Value> = Vec::new();
    let mut frame_index: HashMap<(String, Option<String>, u32), usize> = HashMap::new();
    let mut index_of = |name: &str, file: Option<&str>, line: u32| -> usize {
        let key = (name.to_string(), file.map(str::to_string), line);
        *frame_index.entry(key).or_insert_with(|| {
            let mut f = json!({ "name": name });
            if let Some(file) = file {
                f["file"] = json!(file);
            }
            if line > 0 {
                f["line"] = json!(line);
            }
            frames.push(f);
            frames.len() - 1
        })
    };
    let mut threads: BTreeMap<(u32, u32), ThreadSamples> = BTreeMap::new();
    for s in samples {
        let mut stack: Vec<usize> = Vec::new();
        for f in s.frames.iter().rev() {
            for func in f.funcs.iter().rev() {
                let file = func.file.as_deref().or(Some(&*func.dso));
                stack.push(index_of(&func.name, file, func.line));
            }
        }
        if let Some(leaf) = leaf_name(s.class) {
            stack.push(index_of(leaf, None, 0));
        }
        let t = threads
            .entry((s.pid, s.tid))
            .or_insert_with(|| (format!("{}-{}", s.thread, s.tid), Vec::new(), Vec::new()));
        t.1.push(stack);
        t.2.push(s.points as f64 * period_ms);
    }
    let profiles: Vec<Value> = threads
        .into_values()
        .map(|(name, stacks, weights)| {
            let total: f64 = weights.iter().sum();
            json!({
                "type": "sampled",
                "name": name,
                "unit": "milliseconds",
                "startValue": 0,
                "endValue": total,
                "samples": stacks,
                "weights": weights,
            })
        })
        .collect();
    json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "name": name,
        "exporter": format!("holdup {}", env!("CARGO_PKG_VERSION")),
        "activeProfileIndex": 0,
        "shared": { "frames": frames },
        "profiles": profiles,
    })
}
