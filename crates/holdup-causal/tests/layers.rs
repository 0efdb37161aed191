//! The runtime's modules form layers: none calls back into one that uses
//! it (the lifecycle in `runtime` uses the state, the sampling and the
//! profiler; they never reach back to it).

use std::collections::{BTreeMap, BTreeSet};

/// Each module of `src/` and the modules of this crate it names.
fn uses() -> BTreeMap<String, BTreeSet<String>> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut deps = BTreeSet::new();
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let dep = &rest[..end];
            if !dep.is_empty() && dep != name {
                deps.insert(dep.to_string());
            }
        }
        graph.insert(name, deps);
    }
    graph
}

/// A cycle through `node`, if any (depth-first).
fn cycle(
    graph: &BTreeMap<String, BTreeSet<String>>,
    node: &str,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
    if let Some(at) = path.iter().position(|n| n == node) {
        let mut c = path[at..].to_vec();
        c.push(node.to_string());
        return Some(c);
    }
    path.push(node.to_string());
    for dep in graph.get(node).into_iter().flatten() {
        if let Some(c) = cycle(graph, dep, path) {
            return Some(c);
        }
    }
    path.pop();
    None
}

#[test]
fn no_module_of_the_runtime_calls_back_into_one_that_uses_it() {
    let graph = uses();
    assert!(graph.contains_key("runtime") && graph.contains_key("state"));
    for node in graph.keys() {
        if let Some(c) = cycle(&graph, node, &mut Vec::new()) {
            panic!("modules in a cycle: {}", c.join(" -> "));
        }
    }
    // The hub's parts: the state and the profiler know nothing of the
    // lifecycle.
    for lower in ["state", "processor", "profiler", "progress", "sink"] {
        assert!(!graph[lower].contains("runtime"), "{lower} uses runtime");
    }
}
