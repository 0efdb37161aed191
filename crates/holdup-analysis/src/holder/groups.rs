//! The pieces of the chains, summed per waiter, path, thread and state (a
//! group), with the stacks that name them.
//!
//! Every piece of every chain is added to its group, so this is the hot
//! spot of the attribution. A waiter's groups are its own, kept with it,
//! and most waiters have a handful: they are searched in place, and only
//! past [`IN_PLACE`] through a map, instead of hashing a key per piece in
//! one large table whose every lookup misses the cache.

use super::{End, PathId};
use crate::fxhash::FxHashMap;
use holdup_trace::StackId;
use std::hash::Hash;

/// Up to this many entries are searched one by one; past it, by a map.
const IN_PLACE: usize = 8;

/// A small map: its entries in the order they were first met.
#[derive(Debug)]
pub(super) struct Few<K, V> {
    pub v: Vec<(K, V)>,
    /// Where each key is in `v`, once it outgrows [`IN_PLACE`].
    at: FxHashMap<K, usize>,
}

impl<K, V> Default for Few<K, V> {
    fn default() -> Self {
        Few {
            v: Vec::new(),
            at: FxHashMap::default(),
        }
    }
}

impl<K: Copy + Eq + Hash, V: Default> Few<K, V> {
    fn find(&self, k: K) -> Option<usize> {
        if self.v.len() <= IN_PLACE {
            self.v.iter().position(|e| e.0 == k)
        } else {
            self.at.get(&k).copied()
        }
    }

    /// Where `k` is in `v`, added with a default value if it was not.
    pub fn position(&mut self, k: K) -> usize {
        if let Some(i) = self.find(k) {
            return i;
        }
        self.v.push((k, V::default()));
        let i = self.v.len() - 1;
        if i == IN_PLACE {
            self.at = self.v.iter().enumerate().map(|(i, e)| (e.0, i)).collect();
        } else if i > IN_PLACE {
            self.at.insert(k, i);
        }
        i
    }

    pub fn entry(&mut self, k: K) -> &mut V {
        let i = self.position(k);
        &mut self.v[i].1
    }

    pub fn get(&self, k: K) -> Option<&V> {
        self.find(k).map(|i| &self.v[i].1)
    }
}

/// Weights by stack.
pub(super) type ByStack = Few<StackId, f64>;

impl ByStack {
    /// The entries in the order a hash map fed the same stacks in the same
    /// order iterates them, as the groups' maps once did: a part's weight
    /// is a share of a sum over them, and a sum of floats depends on its
    /// order, so this keeps every weight what it was, to the last bit. Up
    /// to two entries sum the same either way.
    pub fn in_map_order(&self) -> Vec<(StackId, f64)> {
        if self.v.len() <= 2 {
            return self.v.clone();
        }
        // One insert at a time, as the map grew: collecting would size it
        // at once, and a table filled in another order may iterate in one.
        let mut map: FxHashMap<StackId, f64> = FxHashMap::default();
        for &(st, w) in &self.v {
            map.insert(st, w);
        }
        map.into_iter().collect()
    }
}

/// Pieces of one (waiter, path, thread, state), before stacks are placed.
#[derive(Debug, Default)]
pub(super) struct Group {
    pub points: f64,
    /// Off-CPU pieces named by their own blocked sample, exactly.
    pub known: ByStack,
    /// On-CPU samples found inside on-CPU pieces: how to split the rest.
    pub hints: ByStack,
}

/// One waiter's groups: by path and thread, then by state. The pieces of
/// one stretch of a chain share their path and thread, so that part of the
/// search is done once per stretch ([`Groups::of`]), and the states of a
/// thread are few enough to search in place.
#[derive(Debug, Default)]
pub(super) struct Groups {
    pub by_thread: Few<(PathId, u32), Vec<(End, Group)>>,
}

impl Groups {
    /// Where the groups of `tid` reached through `path` are.
    pub fn of(&mut self, path: PathId, tid: u32) -> usize {
        self.by_thread.position((path, tid))
    }

    /// The group of state `end` among those found by [`Groups::of`].
    pub fn get(&mut self, at: usize, end: End) -> &mut Group {
        let ends = &mut self.by_thread.v[at].1;
        let i = match ends.iter().position(|e| e.0 == end) {
            Some(i) => i,
            None => {
                ends.push((end, Group::default()));
                ends.len() - 1
            }
        };
        &mut ends[i].1
    }

    /// All the groups, with their path, thread and state.
    pub fn into_all(self) -> impl Iterator<Item = (GroupKey, Group)> {
        self.by_thread
            .v
            .into_iter()
            .flat_map(|((path, tid), ends)| {
                ends.into_iter().map(move |(end, g)| ((path, tid, end), g))
            })
    }
}

/// What tells a waiter's groups apart: path, thread and state.
pub(super) type GroupKey = (PathId, u32, End);

#[cfg(test)]
mod tests {
    use super::*;

    /// Past the in-place search, stacks are found by the map, and their
    /// order and sums stay those of a hash map fed the same way.
    #[test]
    fn weights_by_stack_keep_the_order_and_sums_of_a_map() {
        for kinds in [3, 8, 9, 23, 200] {
            let mut b = ByStack::default();
            let mut map: FxHashMap<StackId, f64> = FxHashMap::default();
            for i in 0..400u32 {
                let st = (i * 7919) % kinds;
                let w = 0.1 * f64::from(i % 13) + 1.0 / 3.0;
                *b.entry(st) += w;
                *map.entry(st).or_default() += w;
            }
            let theirs: Vec<(StackId, f64)> = map.iter().map(|(&s, &w)| (s, w)).collect();
            assert_eq!(b.in_map_order(), theirs, "{kinds} stacks");
            assert_eq!(b.get(5).copied(), map.get(&5).copied());
            assert_eq!(b.get(kinds + 1), None);
        }
    }

    /// Groups found in place and by the map are the same groups, kept in
    /// the order first met.
    #[test]
    fn groups_are_found_again_past_the_in_place_search() {
        let mut g = Groups::default();
        for round in 0..3 {
            for tid in 0..20 {
                for end in [End::Cpu, End::Runnable, End::Cpu] {
                    let at = g.of(0, tid);
                    g.get(at, end).points += 1.0;
                }
            }
            assert_eq!(g.by_thread.v.len(), 20, "round {round}");
        }
        let all: Vec<(GroupKey, Group)> = g.into_all().collect();
        assert_eq!(all.len(), 40);
        assert!(all
            .iter()
            .all(|(k, grp)| grp.points == if k.2 == End::Cpu { 6.0 } else { 3.0 }));
        assert_eq!(all[14].0, (0, 7, End::Cpu), "kept in the order first met");
    }
}
