//! Helpers shared by the `waitgraph` end-to-end tests with and without root.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

pub fn waitgraph(data: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["waitgraph", "--json", "-i", data.to_str().unwrap()];
    args.extend_from_slice(extra);
    let g = json(&args);
    assert_eq!(g["schema"], "holdup.waitgraph/1");
    g
}

pub fn nodes(g: &Value) -> &Vec<Value> {
    g["nodes"].as_array().unwrap()
}

pub fn node<'a>(g: &'a Value, pred: impl Fn(&Value) -> bool, what: &str) -> &'a Value {
    nodes(g).iter().find(|n| pred(n)).unwrap_or_else(|| {
        panic!(
            "no {what} vertex in {}",
            serde_json::to_string_pretty(&g["nodes"]).unwrap()
        )
    })
}

pub fn disk(g: &Value) -> &Value {
    node(
        g,
        |n| n["kind"] == "device" && n["id"].as_str().unwrap().starts_with("disk:"),
        "disk",
    )
}

/// The knots that matter: not background, not outside the recording.
pub fn main_knots(g: &Value) -> Vec<&Value> {
    for n in g["notes"].as_array().unwrap() {
        let n = n.as_str().unwrap();
        assert!(
            !n.contains("lost track of interrupt context"),
            "the recording is wrong, not the analysis: {n}"
        );
    }
    g["knots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["background"] == false && k["unrecorded"] == false)
        .collect()
}

pub fn ids(k: &Value) -> BTreeSet<String> {
    k["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}
