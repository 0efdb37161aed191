//! Merging threads into vertices (wPerf §3.3, §4.2): threads that do the
//! same work become one group (a self-loop then means they wait for each
//! other: contention), and short-lived threads become one virtual
//! long-lived thread per creator.

/// The name without a trailing instance number: `worker-12` → `worker`,
/// `kworker/u4:2` → `kworker/u`.
pub fn base_name(comm: &str) -> &str {
    let t = comm.trim_end_matches(|c: char| c.is_ascii_digit() || "-_:./# ".contains(c));
    if t.is_empty() {
        comm
    } else {
        t
    }
}

/// A thread's distribution over (user) stacks: sorted keys, fractions
/// summing to 1.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dist(pub Vec<(u64, f64)>);

impl Dist {
    pub fn from_counts(mut v: Vec<(u64, u64)>) -> Dist {
        v.sort_unstable();
        // Equal keys (different stacks with the same user part) add up.
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(v.len());
        for (k, n) in v {
            match merged.last_mut() {
                Some(last) if last.0 == k => last.1 += n,
                _ => merged.push((k, n)),
            }
        }
        let total: u64 = merged.iter().map(|p| p.1).sum();
        if total == 0 {
            return Dist::default();
        }
        Dist(
            merged
                .into_iter()
                .map(|(k, n)| (k, n as f64 / total as f64))
                .collect(),
        )
    }

    /// Overlap of two distributions, in [0, 1]: Σ min(p, q), i.e.
    /// 1 − total variation distance.
    pub fn similarity(&self, other: &Dist) -> f64 {
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j, mut s) = (0, 0, 0.0);
        while i < a.len() && j < b.len() {
            match a[i].0.cmp(&b[j].0) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    s += a[i].1.min(b[j].1);
                    i += 1;
                    j += 1;
                }
            }
        }
        s
    }
}

/// One candidate for grouping.
pub struct Candidate<'a> {
    pub name: &'a str,
    pub dist: &'a Dist,
    /// Samples behind `dist`; too few and the thread is left alone.
    pub samples: u64,
}

/// Threads with fewer samples than this are never grouped: their stack
/// distribution says too little.
pub const MIN_SAMPLES: u64 = 10;

/// Cluster id per candidate (`None`: alone). Threads are grouped when they
/// have the same base name and their stack distributions overlap by at
/// least `min_similarity`, compared with the group's first (busiest) member.
pub fn group_similar(c: &[Candidate], min_similarity: f64) -> Vec<Option<usize>> {
    let mut order: Vec<usize> = (0..c.len())
        .filter(|&i| c[i].samples >= MIN_SAMPLES)
        .collect();
    order.sort_by_key(|&i| (base_name(c[i].name), std::cmp::Reverse(c[i].samples), i));
    let mut cluster = vec![None; c.len()];
    // (representative, cluster id)
    let mut reps: Vec<(usize, usize)> = Vec::new();
    let mut next = 0;
    for &i in &order {
        let name = base_name(c[i].name);
        let found = reps.iter().find(|&&(r, _)| {
            base_name(c[r].name) == name && c[r].dist.similarity(c[i].dist) >= min_similarity
        });
        match found {
            Some(&(_, id)) => cluster[i] = Some(id),
            None => {
                reps.push((i, next));
                cluster[i] = Some(next);
                next += 1;
            }
        }
    }
    // Clusters of one are not groups.
    let mut size = vec![0; next];
    for id in cluster.iter().flatten() {
        size[*id] += 1;
    }
    cluster
        .iter()
        .map(|c| c.filter(|&id| size[id] > 1))
        .collect()
}

/// What merging short-lived threads needs to know about a thread.
#[derive(Clone, Copy, Debug)]
pub struct Life {
    pub tid: u32,
    pub creator: u32,
    pub start: u64,
    pub end: u64,
    /// Created and exited while recording.
    pub born_and_died: bool,
}

/// A thread is short-lived if it was created and exited while recording and
/// lived less than a tenth of it. Creators with at least two of them get a
/// virtual thread: `(creator, members)`.
pub fn short_lived(lives: &[Life], duration: u64) -> Vec<(u32, Vec<u32>)> {
    let mut by_creator: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
    for l in lives {
        if l.born_and_died
            && l.creator != 0
            && l.creator != l.tid
            && (l.end.saturating_sub(l.start) as u128) * 10 < duration as u128
        {
            by_creator.entry(l.creator).or_default().push(l.tid);
        }
    }
    by_creator
        .into_iter()
        .filter(|(_, m)| m.len() >= 2)
        .collect()
}

/// The parts of `[from, to)` covered by none of `spans`.
pub fn gaps(mut spans: Vec<(u64, u64)>, from: u64, to: u64) -> Vec<(u64, u64)> {
    spans.sort_unstable();
    let mut out = Vec::new();
    let mut at = from;
    for (s, e) in spans {
        if s > at && at < to {
            out.push((at, s.min(to)));
        }
        at = at.max(e);
    }
    if at < to {
        out.push((at, to));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_names() {
        assert_eq!(base_name("worker-12"), "worker");
        assert_eq!(base_name("kworker/u4:2"), "kworker/u");
        assert_eq!(base_name("postgres"), "postgres");
        assert_eq!(base_name("1234"), "1234");
        assert_eq!(base_name("pool_3"), "pool");
    }

    #[test]
    fn similarity_is_overlap() {
        let a = Dist::from_counts(vec![(1, 50), (2, 50)]);
        let b = Dist::from_counts(vec![(2, 25), (3, 75)]);
        assert!((a.similarity(&b) - 0.25).abs() < 1e-9);
        assert!((a.similarity(&a) - 1.0).abs() < 1e-9);
        let c = Dist::from_counts(vec![(1, 10), (1, 10)]);
        assert_eq!(c.0, vec![(1, 1.0)]);
    }

    #[test]
    fn same_name_same_stacks_are_grouped_others_not() {
        let work = Dist::from_counts(vec![(1, 70), (2, 30)]);
        let work2 = Dist::from_counts(vec![(1, 60), (2, 35), (9, 5)]);
        let other = Dist::from_counts(vec![(5, 100)]);
        let c = [
            Candidate {
                name: "w-1",
                dist: &work,
                samples: 100,
            },
            Candidate {
                name: "w-2",
                dist: &work2,
                samples: 100,
            },
            Candidate {
                name: "w-3",
                dist: &other,
                samples: 100,
            },
            Candidate {
                name: "x",
                dist: &work,
                samples: 100,
            },
            Candidate {
                name: "w-4",
                dist: &work,
                samples: 3,
            },
        ];
        let g = group_similar(&c, 0.5);
        assert_eq!(g[0], g[1]);
        assert!(g[0].is_some());
        assert_eq!(g[2], None, "different stacks");
        assert_eq!(g[3], None, "different name");
        assert_eq!(g[4], None, "too few samples");
    }

    #[test]
    fn short_lived_need_two_per_creator() {
        let l = |tid, creator, start, end, bd| Life {
            tid,
            creator,
            start,
            end,
            born_and_died: bd,
        };
        let lives = [
            l(10, 1, 0, 5, true),
            l(11, 1, 10, 15, true),
            l(12, 1, 0, 1000, true), // lives too long
            l(20, 2, 0, 5, true),    // alone
            l(30, 3, 0, 5, false),   // existed before
            l(31, 3, 0, 5, true),
        ];
        assert_eq!(short_lived(&lives, 1000), vec![(1, vec![10, 11])]);
    }

    #[test]
    fn gaps_between_spans() {
        assert_eq!(
            gaps(vec![(10, 20), (15, 30), (50, 60)], 0, 100),
            vec![(0, 10), (30, 50), (60, 100)]
        );
        assert_eq!(gaps(vec![(0, 100)], 0, 100), vec![]);
        assert_eq!(gaps(vec![], 5, 10), vec![(5, 10)]);
    }
}
