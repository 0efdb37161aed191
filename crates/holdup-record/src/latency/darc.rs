//! DARC's parts of the latency recorder: the call tree below the `--func`
//! roots (planned by [`holdup_symbolize::callgraph::plan`]), the calls a
//! recording's samples add to it, and the decision point that ends a
//! recording once every peak has enough calls.

use holdup_analysis::latency as analysis;
use holdup_bpf::latency::{FNode, HistRow, UfuncRole, UserFunc, KIND_UFUNC, MAX_FNODES};
use holdup_symbolize::callgraph::plan::{self, Descent};
use holdup_symbolize::callgraph::Func;
use holdup_trace::latency::CallPath;
use holdup_trace::Trace;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// DARC's ftree below each root in `funcs` (see
/// [`holdup_symbolize::callgraph::plan`]): the callees are appended to
/// `funcs`. Returns the tree for the recorder and its description for the
/// file.
pub fn call_paths(
    funcs: &mut Vec<UserFunc>,
    descent: &Descent<'_>,
) -> anyhow::Result<(Vec<FNode>, Vec<CallPath>)> {
    let roots: Vec<Func> = funcs
        .iter()
        .map(|u| Func {
            binary: u.binary.clone(),
            symbol: u.symbol.clone(),
        })
        .collect();
    let plan = plan::plan(&roots, descent, MAX_FNODES).map_err(anyhow::Error::msg)?;
    funcs.extend(plan.funcs[roots.len()..].iter().map(|f| UserFunc {
        binary: f.binary.clone(),
        symbol: f.symbol.clone(),
        role: UfuncRole::Callee,
        offset: None,
    }));
    let tree = plan
        .nodes
        .iter()
        .map(|n| FNode {
            id: n.id,
            parent: n.parent,
            func: n.func as u32,
        })
        .collect();
    let paths = plan
        .nodes
        .iter()
        .map(|n| CallPath {
            op: format!("func:{}", roots[n.root].symbol),
            id: n.id,
            parent: n.parent,
            func: plan.funcs[n.func].symbol.clone(),
        })
        .collect();
    Ok((tree, paths))
}

/// The calls a recording's samples show below the roots in `funcs`,
/// `depth` levels down, as edges between functions that have a symbol in
/// their file (a uprobe needs one); the others are counted in a warning.
pub fn sampled_edges(trace: &Trace, funcs: &[UserFunc], depth: usize) -> Vec<(Func, Func)> {
    let same_file = |a: &Path, b: &Path| {
        a == b
            || a.canonicalize()
                .ok()
                .is_some_and(|a| b.canonicalize().ok() == Some(a))
    };
    let edges = holdup_analysis::latency::sampled_calls::sampled_callees(
        trace,
        |path, name| {
            funcs
                .iter()
                .any(|f| f.symbol == name && same_file(&f.binary, Path::new(path)))
        },
        depth,
    );
    // One path per file, as the static call graph names it: the roots'
    // files as given, the others resolved (a library may be mapped by
    // another path of the same file).
    let as_func = |(path, symbol): (String, String)| {
        let path = PathBuf::from(path);
        let binary = match funcs.iter().find(|u| same_file(&u.binary, &path)) {
            Some(u) => u.binary.clone(),
            None => path.canonicalize().unwrap_or(path),
        };
        Func { binary, symbol }
    };
    let (mut kept, mut dropped) = (Vec::new(), 0);
    for (caller, callee) in edges {
        let (caller, callee) = (as_func(caller), as_func(callee));
        if holdup_symbolize::callgraph::defines_function(&callee.binary, &callee.symbol) {
            kept.push((caller, callee));
        } else {
            dropped += 1;
        }
    }
    if dropped > 0 {
        eprintln!(
            "holdup: warning: --callees-from: {dropped} sampled callees have no symbol in their file and are not timed"
        );
    }
    kept
}

/// DARC's decision point over the histograms recorded so far: each root
/// (a `--func` function, not a callee) was called in some process, and in
/// every process its peaks have `n` calls each.
pub fn roots_decided<'a>(
    rows: impl Iterator<Item = &'a HistRow>,
    ufuncs: &[UserFunc],
    n: u64,
) -> bool {
    let mut hists: HashMap<(u32, u32), analysis::Histogram> = HashMap::new();
    for r in rows.filter(|r| r.kind == KIND_UFUNC) {
        hists
            .entry((r.id, r.tgid))
            .or_default()
            .add(&r.count, &r.ns);
    }
    let called = |id: usize| hists.keys().any(|k| k.0 as usize == id);
    (0..ufuncs.len())
        .filter(|&i| ufuncs[i].role != UfuncRole::Callee)
        .all(called)
        && hists.values().all(|h| analysis::peaks_decided(h, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdup_bpf::latency::{CAUSES, KIND_SYSCALL, SLOTS};

    fn func(symbol: &str, role: UfuncRole) -> UserFunc {
        UserFunc {
            binary: "/bin/app".into(),
            symbol: symbol.into(),
            role,
            offset: None,
        }
    }

    /// A histogram row of user function `id` in process `tgid`, with
    /// `calls` per bucket.
    fn row(tgid: u32, kind: u16, id: u32, calls: &[(usize, u64)]) -> HistRow {
        let mut r = HistRow {
            tgid,
            kind,
            id,
            interval: 0,
            count: [0; SLOTS],
            ns: [0; SLOTS],
            cause_ns: [[0; SLOTS]; CAUSES],
        };
        for &(slot, n) in calls {
            r.count[slot] = n;
            r.ns[slot] = n << slot;
        }
        r
    }

    #[test]
    fn the_decision_point_waits_for_every_root_and_every_peak() {
        let funcs = [
            func("handle", UfuncRole::Root),
            func("parse", UfuncRole::Callee),
        ];
        // Two peaks, 1 µs and 1 ms: 150 and 40 calls.
        let two = row(7, KIND_UFUNC, 0, &[(10, 150), (20, 40)]);
        assert!(!roots_decided([&two].into_iter(), &funcs, 50));
        assert!(roots_decided([&two].into_iter(), &funcs, 40));
        // A root never called is not decided; a callee need not be.
        let both = [
            func("handle", UfuncRole::Root),
            func("flush", UfuncRole::Root),
        ];
        assert!(!roots_decided([&two].into_iter(), &both, 40));
        let flush = row(7, KIND_UFUNC, 1, &[(12, 200)]);
        assert!(roots_decided([&two, &flush].into_iter(), &both, 40));
        // Every process's peaks count; other operations do not.
        let few = row(8, KIND_UFUNC, 0, &[(10, 120), (20, 30)]);
        let read = row(7, KIND_SYSCALL, 0, &[(3, 1)]);
        assert!(!roots_decided([&two, &few].into_iter(), &funcs, 40));
        assert!(roots_decided([&two, &read].into_iter(), &funcs, 40));
    }
}
