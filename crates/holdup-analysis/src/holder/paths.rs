//! Chains of waits, interned: a path is the threads passed on the way to
//! the one whose activity a piece names, each with the subclass it waited
//! in (`relay [L] → feeder [B] → …`). Paths share their prefixes (a trie).

use crate::fxhash::FxHashMap;
use holdup_trace::Class;

pub type PathId = u32;

/// The path with no hop: the thread that ended the wait itself.
pub const DIRECT: PathId = 0;

/// One hop: `tid` was waiting in `class` for the next thread of the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hop {
    pub tid: u32,
    pub class: Class,
}

/// When a path was first asked for: the number of the wait being split,
/// and how many paths were asked for before in its split.
type Seen = (u32, u32);

pub struct Paths {
    /// Parent and last hop of every path; entry 0 is [`DIRECT`].
    nodes: Vec<(PathId, Option<Hop>)>,
    ids: FxHashMap<(PathId, Hop), PathId>,
    /// When each path was first asked for, and the clock.
    seen: Vec<Seen>,
    now: Seen,
}

impl Default for Paths {
    fn default() -> Self {
        Paths {
            nodes: vec![(DIRECT, None)],
            ids: FxHashMap::default(),
            seen: vec![(0, 0)],
            now: (0, 0),
        }
    }
}

impl Paths {
    /// `parent` followed by one more hop.
    pub fn child(&mut self, parent: PathId, tid: u32, class: Class) -> PathId {
        let hop = Hop { tid, class };
        self.now.1 += 1;
        if let Some(&id) = self.ids.get(&(parent, hop)) {
            let seen = &mut self.seen[id as usize];
            *seen = (*seen).min(self.now);
            return id;
        }
        let id = self.nodes.len() as PathId;
        self.nodes.push((parent, Some(hop)));
        self.ids.insert((parent, hop), id);
        self.seen.push(self.now);
        id
    }

    /// The paths asked for from now on are asked for splitting wait
    /// number `wait`.
    pub fn splitting(&mut self, wait: u32) {
        self.now = (wait, 0);
    }

    /// Number the paths in the order the waits that first asked for them
    /// come in (and within one wait, in the order asked for), whatever
    /// the order the waits were split in: the numbers do not depend on
    /// it. Returns the new number of each old one.
    pub fn renumber(&mut self) -> Vec<PathId> {
        let mut order: Vec<PathId> = (0..self.nodes.len() as PathId).collect();
        // A parent is asked for before its children, in the same split or
        // an earlier one: it keeps coming first.
        order.sort_by_key(|&id| (id != DIRECT, self.seen[id as usize]));
        let mut new = vec![DIRECT; order.len()];
        for (n, &old) in order.iter().enumerate() {
            new[old as usize] = n as PathId;
        }
        let nodes: Vec<_> = order
            .iter()
            .map(|&old| {
                let (parent, hop) = self.nodes[old as usize];
                (new[parent as usize], hop)
            })
            .collect();
        self.seen = order.iter().map(|&old| self.seen[old as usize]).collect();
        self.ids = nodes
            .iter()
            .enumerate()
            .filter_map(|(id, &(parent, hop))| Some(((parent, hop?), id as PathId)))
            .collect();
        self.nodes = nodes;
        new
    }

    /// The first hop of a path (none for [`DIRECT`]), without building
    /// the others.
    pub fn first(&self, mut id: PathId) -> Option<Hop> {
        let mut first = None;
        while let Some(&(parent, Some(hop))) = self.nodes.get(id as usize) {
            first = Some(hop);
            id = parent;
        }
        first
    }

    /// The hops of a path, first first.
    pub fn hops(&self, mut id: PathId) -> Vec<Hop> {
        let mut out = Vec::new();
        while let Some(&(parent, Some(hop))) = self.nodes.get(id as usize) {
            out.push(hop);
            id = parent;
        }
        out.reverse();
        out
    }
}
