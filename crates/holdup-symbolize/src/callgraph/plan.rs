//! DARC's call tree ("ftree") below the functions whose latency is
//! measured: which call paths to time, so that `explain` can follow a
//! peak down into the callees that make it.
//!
//! The tree is planned from call edges (the binaries' static call graph,
//! and calls a recording's samples showed); a function already on a path,
//! or a root, is not entered again, so recursion ends.

use super::{callees, Follow, Func};
use std::collections::VecDeque;

/// How far, and along what, the tree goes below each root.
#[derive(Clone, Copy, Debug)]
pub struct Descent<'a> {
    /// Calls timed below the resume path.
    pub depth: usize,
    pub follow: Follow,
    /// Calls a recording's samples showed.
    pub sampled: &'a [(Func, Func)],
    /// Callees to go down through first, one per level, the others left
    /// out (DARC's resume from a previous point).
    pub resume: &'a [String],
}

/// One call path: the path of `parent` and then a call of `func` (an
/// index into [`Plan::funcs`]); a root's path has no parent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub id: u32,
    pub parent: Option<u32>,
    pub func: usize,
    /// The index of the root below which it lies.
    pub root: usize,
}

/// The tree below every root.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The roots, as given, then each callee once (whatever its number of
    /// paths).
    pub funcs: Vec<Func>,
    /// Breadth first below each root, roots in order.
    pub nodes: Vec<Node>,
}

/// The tree below `roots` from their binaries' static call graphs and
/// `descent.sampled`, at most `max_nodes` paths. `Err` says why in one line.
pub fn plan(roots: &[Func], descent: &Descent<'_>, max_nodes: usize) -> Result<Plan, String> {
    plan_with(roots, descent, max_nodes, |root, levels| {
        callees(&root.binary, &root.symbol, levels, descent.follow)
            .map_err(|e| format!("--callees: {e}"))
    })
}

/// [`plan`] with the edges below a root (`levels` calls down) from
/// `edges_of`.
pub fn plan_with(
    roots: &[Func],
    descent: &Descent<'_>,
    max_nodes: usize,
    mut edges_of: impl FnMut(&Func, usize) -> Result<Vec<(Func, Func)>, String>,
) -> Result<Plan, String> {
    let Descent {
        depth,
        sampled,
        resume,
        ..
    } = *descent;
    let levels = resume.len() + depth;
    let mut plan = Plan {
        funcs: roots.to_vec(),
        nodes: Vec::new(),
    };
    for (root_idx, root) in roots.iter().enumerate() {
        let mut edges = edges_of(root, levels)?;
        for e in sampled {
            if !edges.contains(e) {
                edges.push(e.clone());
            }
        }
        let add = |nodes: &mut Vec<Node>, parent: Option<u32>, func: usize| {
            if nodes.len() >= max_nodes {
                return Err(format!("--callees {depth}: more than {max_nodes} call paths below {}; give a smaller depth", root.symbol));
            }
            let id = nodes.len() as u32;
            nodes.push(Node {
                id,
                parent,
                func,
                root: root_idx,
            });
            Ok(id)
        };
        let top = add(&mut plan.nodes, None, root_idx)?;
        let mut queue = VecDeque::from([(top, vec![root.clone()])]);
        let mut resumed = 0;
        while let Some((parent, ancestors)) = queue.pop_front() {
            if ancestors.len() > levels {
                continue;
            }
            let caller = ancestors.last().expect("a path starts at its root");
            // On the resume path, its next callee only.
            let next = resume.get(ancestors.len() - 1);
            for (_, callee) in edges.iter().filter(|(c, _)| c == caller) {
                if ancestors.contains(callee)
                    || roots.contains(callee)
                    || next.is_some_and(|n| *n != callee.symbol)
                {
                    continue;
                }
                resumed = resumed.max(ancestors.len().min(resume.len()));
                let idx = match plan.funcs.iter().position(|f| f == callee) {
                    Some(i) => i,
                    None => {
                        plan.funcs.push(callee.clone());
                        plan.funcs.len() - 1
                    }
                };
                let id = add(&mut plan.nodes, Some(parent), idx)?;
                let mut path = ancestors.clone();
                path.push(callee.clone());
                queue.push_back((id, path));
            }
        }
        if resumed < resume.len() {
            let caller = if resumed == 0 {
                &root.symbol
            } else {
                &resume[resumed - 1]
            };
            return Err(format!(
                "--resume: '{}' is not called by '{caller}' (in the code{})",
                resume[resumed],
                if sampled.is_empty() {
                    ""
                } else {
                    " or the samples"
                }
            ));
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(symbol: &str) -> Func {
        Func {
            binary: "/bin/app".into(),
            symbol: symbol.into(),
        }
    }

    /// The call graph: main → a, b; a → c, a (recursion); b → c, main.
    fn graph() -> Vec<(Func, Func)> {
        [
            ("main", "a"),
            ("main", "b"),
            ("a", "c"),
            ("a", "a"),
            ("b", "c"),
            ("b", "main"),
            ("c", "d"),
        ]
        .map(|(x, y)| (f(x), f(y)))
        .to_vec()
    }

    fn descent<'a>(depth: usize, sampled: &'a [(Func, Func)], resume: &'a [String]) -> Descent<'a> {
        Descent {
            depth,
            follow: Follow::SameFile,
            sampled,
            resume,
        }
    }

    /// Each path as its functions' names, root first.
    fn paths(p: &Plan) -> Vec<String> {
        p.nodes
            .iter()
            .map(|n| {
                let mut names = vec![p.funcs[n.func].symbol.as_str()];
                let mut up = n.parent;
                while let Some(id) = up {
                    let parent = &p.nodes[id as usize];
                    names.push(&p.funcs[parent.func].symbol);
                    up = parent.parent;
                }
                names.reverse();
                names.join(">")
            })
            .collect()
    }

    fn planned(roots: &[Func], d: &Descent<'_>, max: usize) -> Result<Plan, String> {
        // The graph's edges whatever the depth: the planner cuts them.
        plan_with(roots, d, max, |_, _| Ok(graph()))
    }

    #[test]
    fn paths_go_depth_calls_down_without_reentering_a_path_or_a_root() {
        let p = planned(&[f("main")], &descent(2, &[], &[]), 128).unwrap();
        assert_eq!(
            paths(&p),
            ["main", "main>a", "main>b", "main>a>c", "main>b>c"]
        );
        // c has two paths but is timed once.
        let names: Vec<&str> = p.funcs.iter().map(|f| f.symbol.as_str()).collect();
        assert_eq!(names, ["main", "a", "b", "c"]);
        assert!(p.nodes.iter().all(|n| n.root == 0));
        let deeper = planned(&[f("main")], &descent(3, &[], &[]), 128).unwrap();
        assert_eq!(paths(&deeper).len(), 7, "{:?}", paths(&deeper));
    }

    #[test]
    fn a_resume_path_is_followed_alone_then_depth_further() {
        let resume = vec!["b".to_string()];
        let p = planned(&[f("main")], &descent(2, &[], &resume), 128).unwrap();
        assert_eq!(paths(&p), ["main", "main>b", "main>b>c", "main>b>c>d"]);
        let wrong = vec!["c".to_string()];
        let e = planned(&[f("main")], &descent(1, &[], &wrong), 128).unwrap_err();
        assert_eq!(e, "--resume: 'c' is not called by 'main' (in the code)");
    }

    #[test]
    fn sampled_calls_add_edges_the_code_does_not_name() {
        let sampled = vec![(f("b"), f("e"))];
        let p = planned(&[f("main")], &descent(2, &sampled, &[]), 128).unwrap();
        assert!(
            paths(&p).contains(&"main>b>e".to_string()),
            "{:?}",
            paths(&p)
        );
        let resume = vec!["x".to_string()];
        let e = planned(&[f("main")], &descent(1, &sampled, &resume), 128).unwrap_err();
        assert!(e.ends_with("(in the code or the samples)"), "{e}");
    }

    #[test]
    fn several_roots_and_the_node_limit() {
        let p = planned(&[f("main"), f("b")], &descent(1, &[], &[]), 128).unwrap();
        // b is a root: not entered below main; main is one: not below b.
        assert_eq!(paths(&p), ["main", "main>a", "b", "b>c"]);
        assert_eq!(p.nodes[3].root, 1);
        let e = planned(&[f("main")], &descent(3, &[], &[]), 4).unwrap_err();
        assert_eq!(
            e,
            "--callees 3: more than 4 call paths below main; give a smaller depth"
        );
    }
}
