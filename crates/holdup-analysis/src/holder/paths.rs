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

pub struct Paths {
    /// Parent and last hop of every path; entry 0 is [`DIRECT`].
    nodes: Vec<(PathId, Option<Hop>)>,
    ids: FxHashMap<(PathId, Hop), PathId>,
}

impl Default for Paths {
    fn default() -> Self {
        Paths {
            nodes: vec![(DIRECT, None)],
            ids: FxHashMap::default(),
        }
    }
}

impl Paths {
    /// `parent` followed by one more hop.
    pub fn child(&mut self, parent: PathId, tid: u32, class: Class) -> PathId {
        let hop = Hop { tid, class };
        if let Some(&id) = self.ids.get(&(parent, hop)) {
            return id;
        }
        let id = self.nodes.len() as PathId;
        self.nodes.push((parent, Some(hop)));
        self.ids.insert((parent, hop), id);
        id
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
