//! Knots and their refinement (wPerf §3.2): strongly connected components
//! with no way out, then trimming the lightest edges of a complex knot
//! until it breaks apart, and looking again.

/// A directed graph: `edges[i] = (from, to, weight)`.
#[derive(Clone, Debug, Default)]
pub struct KnotGraph {
    pub n: usize,
    pub edges: Vec<(usize, usize, u64)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawKnot {
    /// Sorted.
    pub nodes: Vec<usize>,
    /// Edges among `nodes` still present (self-loops included), sorted.
    pub edges: Vec<usize>,
    /// Edges trimmed on the way from the original knot, sorted.
    pub trimmed: Vec<usize>,
    /// The original knot's nodes, when refinement changed it.
    pub refined_from: Option<Vec<usize>>,
    /// Set aside by the caller's predicate (background, unrecorded).
    pub aside: bool,
}

impl RawKnot {
    /// One vertex and no self-loop: a sink rather than a knot.
    pub fn is_sink(&self, g: &KnotGraph) -> bool {
        self.nodes.len() == 1 && !self.edges.iter().any(|&e| g.edges[e].0 == g.edges[e].1)
    }
}

/// Strongly connected components (Tarjan, iterative) of the vertices in
/// `alive_v` using the edges in `alive_e`; returns a component id per
/// vertex (`usize::MAX` for dead vertices) and the number of components.
fn sccs(g: &KnotGraph, alive_v: &[bool], alive_e: &[bool]) -> (Vec<usize>, usize) {
    let n = g.n;
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, &(a, b, _)) in g.edges.iter().enumerate() {
        if alive_e[i] && alive_v[a] && alive_v[b] {
            adj[a].push(b);
        }
    }
    const UNSEEN: usize = usize::MAX;
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut comp = vec![usize::MAX; n];
    let mut stack = Vec::new();
    let mut ncomp = 0;
    let mut next = 0;
    for root in 0..n {
        if !alive_v[root] || index[root] != UNSEEN {
            continue;
        }
        // (vertex, next neighbour position)
        let mut call = vec![(root, 0usize)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut pos)) = call.last_mut() {
            if let Some(&w) = adj[v].get(*pos) {
                *pos += 1;
                if index[w] == UNSEEN {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    call.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(u, _)) = call.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] == index[v] {
                    loop {
                        let w = stack.pop().unwrap();
                        on_stack[w] = false;
                        comp[w] = ncomp;
                        if w == v {
                            break;
                        }
                    }
                    ncomp += 1;
                }
            }
        }
    }
    (comp, ncomp)
}

/// Components with no edge to another live component, as sorted vertex
/// lists.
fn bottom_components(g: &KnotGraph, alive_v: &[bool], alive_e: &[bool]) -> Vec<Vec<usize>> {
    let (comp, ncomp) = sccs(g, alive_v, alive_e);
    let mut exits = vec![false; ncomp];
    for (i, &(a, b, _)) in g.edges.iter().enumerate() {
        if alive_e[i] && alive_v[a] && alive_v[b] && comp[a] != comp[b] {
            exits[comp[a]] = true;
        }
    }
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); ncomp];
    for v in 0..g.n {
        if alive_v[v] {
            members[comp[v]].push(v);
        }
    }
    (0..ncomp)
        .filter(|&c| !exits[c])
        .map(|c| std::mem::take(&mut members[c]))
        .collect()
}

fn edges_within(g: &KnotGraph, inside: &[bool], alive_e: &[bool]) -> Vec<usize> {
    (0..g.edges.len())
        .filter(|&i| alive_e[i] && inside[g.edges[i].0] && inside[g.edges[i].1])
        .collect()
}

/// Find the knots and sinks of `g`. Bottom components for which `aside`
/// returns true are reported unrefined, removed, and the search goes on
/// (vertices that only waited on them may form new knots). The others are
/// refined until each is one vertex, a simple cycle, or has no edge
/// lighter than `threshold`.
pub fn find_knots(
    g: &KnotGraph,
    threshold: u64,
    aside: &dyn Fn(&[usize], &[usize]) -> bool,
) -> Vec<RawKnot> {
    let mut alive_v = vec![true; g.n];
    let alive_e = vec![true; g.edges.len()];
    let mut out = Vec::new();
    let mut kept: Vec<Vec<usize>> = Vec::new();
    loop {
        let mut changed = false;
        for comp in bottom_components(g, &alive_v, &alive_e) {
            if kept.contains(&comp) {
                continue;
            }
            let mut inside = vec![false; g.n];
            for &v in &comp {
                inside[v] = true;
            }
            let edges = edges_within(g, &inside, &alive_e);
            if aside(&comp, &edges) {
                for &v in &comp {
                    alive_v[v] = false;
                }
                out.push(RawKnot {
                    nodes: comp,
                    edges,
                    trimmed: Vec::new(),
                    refined_from: None,
                    aside: true,
                });
                changed = true;
            } else {
                kept.push(comp);
            }
        }
        if !changed {
            break;
        }
    }
    for comp in kept {
        refine(g, &comp, alive_e.clone(), threshold, &mut out, &comp);
    }
    out
}

fn is_simple_cycle(g: &KnotGraph, nodes: &[usize], internal: &[usize]) -> bool {
    let mut outs = std::collections::HashMap::new();
    let mut ins = std::collections::HashMap::new();
    for &e in internal {
        *outs.entry(g.edges[e].0).or_insert(0) += 1;
        *ins.entry(g.edges[e].1).or_insert(0) += 1;
    }
    nodes
        .iter()
        .all(|v| outs.get(v) == Some(&1) && ins.get(v) == Some(&1))
}

/// Split knot `nodes` at its lightest edges into the sub-knots that stand
/// out (wPerf's refinement), into `out`. Sub-knots go on a work list, not
/// down a recursion, whose depth a crafted trace's threads would set; they
/// are refined in the order the recursion took.
fn refine(
    g: &KnotGraph,
    nodes: &[usize],
    alive_e: Vec<bool>,
    threshold: u64,
    out: &mut Vec<RawKnot>,
    original: &[usize],
) {
    let mut work = vec![(nodes.to_vec(), alive_e)];
    while let Some((nodes, alive_e)) = work.pop() {
        let subs = refine_one(g, &nodes, alive_e, threshold, out, original);
        work.extend(subs.into_iter().rev());
    }
}

/// One step of [`refine`]: `nodes` is a knot to keep whole (written to
/// `out`, nothing returned), or splits into the returned sub-knots, each
/// with the edges left alive in it.
fn refine_one(
    g: &KnotGraph,
    nodes: &[usize],
    mut alive_e: Vec<bool>,
    threshold: u64,
    out: &mut Vec<RawKnot>,
    original: &[usize],
) -> Vec<(Vec<usize>, Vec<bool>)> {
    let mut inside = vec![false; g.n];
    for &v in nodes {
        inside[v] = true;
    }
    let all = edges_within(g, &inside, &alive_e);
    let internal: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&e| g.edges[e].0 != g.edges[e].1)
        .collect();
    let lightest = internal
        .iter()
        .map(|&e| g.edges[e].2)
        .min()
        .unwrap_or(u64::MAX);
    if nodes.len() == 1 || is_simple_cycle(g, nodes, &internal) || lightest >= threshold {
        refine_stop(g, nodes, &inside, &alive_e, out, original);
        return Vec::new();
    }
    let mut order = internal.clone();
    order.sort_by_key(|&e| (g.edges[e].2, e));
    let before = alive_e.clone();
    let alive_v = inside.clone();
    for e in order {
        alive_e[e] = false;
        let (_, ncomp) = sccs(g, &alive_v, &alive_e);
        if ncomp > 1 {
            let subs = bottom_components(g, &alive_v, &alive_e);
            let self_loop = |v: usize| {
                edges_within(g, &inside, &alive_e)
                    .iter()
                    .any(|&e| g.edges[e].0 == v && g.edges[e].1 == v)
            };
            if subs.iter().all(|c| c.len() == 1 && !self_loop(c[0])) {
                // Trimming would leave lone vertices that wait for nobody:
                // no edge stands out, the knot as a whole is the answer.
                refine_stop(g, nodes, &inside, &before, out, original);
                return Vec::new();
            }
            // Lone vertices next to real sub-knots are artefacts of the
            // trimming, not sinks.
            return subs
                .into_iter()
                .filter(|c| c.len() > 1 || self_loop(c[0]))
                .map(|sub| (sub, alive_e.clone()))
                .collect();
        }
    }
    unreachable!("removing every internal edge disconnects a knot of several vertices");
}

fn refine_stop(
    g: &KnotGraph,
    nodes: &[usize],
    inside: &[bool],
    alive_e: &[bool],
    out: &mut Vec<RawKnot>,
    original: &[usize],
) {
    let trimmed: Vec<usize> = (0..g.edges.len())
        .filter(|&e| !alive_e[e] && (inside[g.edges[e].0] || inside[g.edges[e].1]))
        .collect();
    out.push(RawKnot {
        nodes: nodes.to_vec(),
        edges: edges_within(g, inside, alive_e),
        refined_from: (nodes != original).then(|| original.to_vec()),
        trimmed,
        aside: false,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(n: usize, edges: &[(usize, usize, u64)]) -> KnotGraph {
        KnotGraph {
            n,
            edges: edges.to_vec(),
        }
    }

    fn never(_: &[usize], _: &[usize]) -> bool {
        false
    }

    fn nodes(k: &[RawKnot]) -> Vec<Vec<usize>> {
        let mut v: Vec<Vec<usize>> = k.iter().map(|k| k.nodes.clone()).collect();
        v.sort();
        v
    }

    #[test]
    fn figure_2_producer_outside_the_knot() {
        // 0 = A (producer), 1 = B, 2 = disk: A → B, B ⇄ disk.
        let g = graph(3, &[(0, 1, 80), (1, 2, 50), (2, 1, 50)]);
        let k = find_knots(&g, 1000, &never);
        assert_eq!(nodes(&k), vec![vec![1, 2]]);
        assert_eq!(k[0].edges, vec![1, 2]);
        assert_eq!(k[0].refined_from, None);
    }

    #[test]
    fn sinks_and_self_loops() {
        // 0 → 1 (sink); 2 has only a self-loop: a knot.
        let g = graph(3, &[(0, 1, 5), (2, 2, 9)]);
        let k = find_knots(&g, 1000, &never);
        assert_eq!(nodes(&k), vec![vec![1], vec![2]]);
        let sink = k.iter().find(|k| k.nodes == [1]).unwrap();
        assert!(sink.is_sink(&g));
        let knot = k.iter().find(|k| k.nodes == [2]).unwrap();
        assert!(!knot.is_sink(&g));
    }

    #[test]
    fn refinement_trims_the_lightest_edges_until_it_breaks() {
        // A knot of four: 0 ⇄ 1 heavy (60/50); 1 → 2 (3), 2 → 0 (40),
        // 2 ⇄ 3 (30/20), 3 → 0 (2). Trim 3→0 (2): still one SCC? 0→1→2→0
        // and 2⇄3 → yes. Trim 1→2 (3): now {0,1} has no way to 2: {0,1}
        // is a bottom component, {2,3} waits on it. Result: {0,1}, a
        // simple cycle.
        let e = [
            (0, 1, 60),
            (1, 0, 50),
            (1, 2, 3),
            (2, 0, 40),
            (2, 3, 30),
            (3, 2, 20),
            (3, 0, 2),
        ];
        let g = graph(4, &e);
        let k = find_knots(&g, 1000, &never);
        assert_eq!(nodes(&k), vec![vec![0, 1]]);
        assert_eq!(k[0].trimmed, vec![2, 6]);
        assert_eq!(k[0].refined_from, Some(vec![0, 1, 2, 3]));
        assert_eq!(k[0].edges, vec![0, 1]);
    }

    #[test]
    fn refinement_stops_at_the_threshold() {
        let e = [(0, 1, 60), (1, 0, 50), (1, 2, 30), (2, 0, 40), (2, 1, 45)];
        let g = graph(3, &e);
        // Every edge ≥ 30: not trimmed.
        let k = find_knots(&g, 30, &never);
        assert_eq!(nodes(&k), vec![vec![0, 1, 2]]);
        assert!(k[0].trimmed.is_empty());
        // Threshold 31: 1→2 (30) goes; {0,1} is then the bottom.
        let k = find_knots(&g, 31, &never);
        assert_eq!(nodes(&k), vec![vec![0, 1]]);
        assert_eq!(k[0].trimmed, vec![2]);
    }

    #[test]
    fn a_simple_cycle_is_not_refined() {
        let g = graph(3, &[(0, 1, 1), (1, 2, 100), (2, 0, 100)]);
        let k = find_knots(&g, 1000, &never);
        assert_eq!(nodes(&k), vec![vec![0, 1, 2]]);
        assert!(k[0].trimmed.is_empty());
    }

    #[test]
    fn a_knot_is_not_refined_into_lone_sinks() {
        // Three threads passing a lock around, every edge light: trimming
        // would leave one vertex that waits for nobody. Keep the knot.
        let e = [
            (0, 1, 10),
            (1, 2, 11),
            (2, 0, 12),
            (1, 0, 13),
            (2, 1, 14),
            (0, 2, 15),
        ];
        let g = graph(3, &e);
        let k = find_knots(&g, 1000, &never);
        assert_eq!(nodes(&k), vec![vec![0, 1, 2]]);
        assert!(k[0].trimmed.is_empty());
        assert_eq!(k[0].refined_from, None);
    }

    #[test]
    fn a_knot_can_split_into_two() {
        // Two cycles {0,1} and {2,3} joined by light edges both ways.
        let e = [
            (0, 1, 50),
            (1, 0, 50),
            (2, 3, 50),
            (3, 2, 50),
            (1, 2, 1),
            (3, 0, 2),
        ];
        let g = graph(4, &e);
        let k = find_knots(&g, 1000, &never);
        // 1→2 trimmed: {2,3} → {0,1} remains, {0,1} is the bottom.
        assert_eq!(nodes(&k), vec![vec![0, 1]]);
        let e = [
            (0, 1, 50),
            (1, 0, 50),
            (2, 3, 50),
            (3, 2, 50),
            (1, 2, 2),
            (3, 0, 1),
        ];
        let k = find_knots(&graph(4, &e), 1000, &never);
        assert_eq!(nodes(&k), vec![vec![2, 3]]);
    }

    #[test]
    fn set_aside_components_are_removed_and_the_search_goes_on() {
        // 0 → 1 → 2 ⇄ 3; {2,3} is set aside (say, background): then 1 has
        // no way out any more and becomes a sink.
        let g = graph(4, &[(0, 1, 10), (1, 2, 10), (2, 3, 10), (3, 2, 10)]);
        let aside = |c: &[usize], _: &[usize]| c == [2, 3];
        let k = find_knots(&g, 1000, &aside);
        assert_eq!(nodes(&k), vec![vec![1], vec![2, 3]]);
        assert!(k.iter().find(|k| k.nodes == [2, 3]).unwrap().aside);
        assert!(!k.iter().find(|k| k.nodes == [1]).unwrap().aside);
    }

    /// Vertices 0 → 1 → … → n-1 (heavy), and n-1 → i back to each (light,
    /// lightest to 0): each refinement step cuts the lightest back edge,
    /// and the rest of the chain is the sub-knot to refine next, n - 2
    /// steps down. Those steps were a recursion, one frame each.
    #[test]
    fn a_knot_refined_step_by_step_down_a_long_chain_needs_no_recursion() {
        let n = 2_000;
        let mut e: Vec<(usize, usize, u64)> = (0..n - 1).map(|i| (i, i + 1, 1_000_000)).collect();
        e.extend((0..n - 1).map(|i| (n - 1, i, i as u64 + 1)));
        let g = graph(n, &e);
        let k = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || find_knots(&g, 100_000, &never))
            .unwrap()
            .join()
            .expect("no stack overflow");
        assert_eq!(nodes(&k), vec![vec![n - 2, n - 1]]);
        assert_eq!(k[0].refined_from.as_ref().map(Vec::len), Some(n));
    }

    #[test]
    fn sccs_handle_a_long_chain_without_recursion() {
        let n = 200_000;
        let mut e: Vec<(usize, usize, u64)> = (0..n - 1).map(|i| (i, i + 1, 1)).collect();
        e.push((n - 1, 0, 1));
        let g = graph(n, &e);
        let (_, ncomp) = sccs(&g, &vec![true; n], &vec![true; e.len()]);
        assert_eq!(ncomp, 1);
    }
}
