//! The wait-for graph (wPerf, OSDI '18): which waits limit throughput.
//!
//! Threads and devices are vertices; "A waits for B" is an edge, weighted by
//! the time A spent waiting to be woken by B plus, by cascaded
//! re-distribution, the time other threads spent waiting on A meanwhile.
//! Every knot (a strongly connected component with no way out) contains a
//! bottleneck; complex knots are refined by trimming their lightest edges.
//!
//! The analysis streams the trace twice (see [`sweep`] for why): memory
//! grows with threads, edges and distinct stacks, not with events.
//!
//! ```no_run
//! use holdup_analysis::waitgraph::{analyze, Options, TraceFile};
//! let mut src = TraceFile::open(std::path::Path::new("holdup.data"))?;
//! let g = analyze(&mut src, &Options::default())?;
//! for k in &g.knots {
//!     let names: Vec<&str> = k.nodes.iter().map(|&n| g.nodes[n].label.as_str()).collect();
//!     println!("{:?}: {}", k.kind, names.join(" + "));
//! }
//! # Ok::<(), holdup_analysis::waitgraph::Error>(())
//! ```

mod held;
#[cfg(test)]
mod held_tests;
mod knots;
mod merge;
mod passes;
mod ranking;
mod source;
pub mod sweep;
#[cfg(test)]
mod tests;

pub use held::add_holders;
pub use knots::{find_knots, KnotGraph, RawKnot};
pub use source::{Decoded, InMemory, Item, Source, TraceFile};

use serde::Serialize;
use std::collections::HashMap;

/// When knot refinement stops trimming edges.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Threshold {
    /// A fraction of the recording (wPerf's default is 0.2).
    Fraction(f64),
    Ns(u64),
}

#[derive(Clone, Debug)]
pub struct Options {
    /// Refinement stops when a knot's lightest edge weighs at least this.
    pub threshold: Threshold,
    /// Merge threads with the same name and similar stacks into a group.
    pub merge_similar: bool,
    /// Merge short-lived threads into one virtual thread per creator.
    pub merge_short: bool,
    /// Stacks kept per edge.
    pub stacks: usize,
    /// Names for block devices by dev_t (`major << 20 | minor`), e.g. "vda".
    pub device_names: HashMap<u32, String>,
    /// Segments whose off-CPU interval is longer than this are found by the
    /// first pass; the sweep buffers `long_ns + slack` of the rest.
    #[doc(hidden)]
    pub long_ns: u64,
    /// At most this many long segments are kept from the first pass; past
    /// it, `long_ns` doubles (and the sweep buffers longer).
    #[doc(hidden)]
    pub long_budget: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threshold: Threshold::Fraction(0.2),
            merge_similar: true,
            merge_short: true,
            stacks: 5,
            device_names: HashMap::new(),
            long_ns: 100_000_000,
            long_budget: 1 << 16,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(transparent)]
    Trace(#[from] holdup_trace::Error),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("the trace was recorded without wait segments (--no-segments); record again without that flag to build the wait-for graph")]
    NoSegments,
    #[error("the trace holds no wait segments: nothing was switched out while recording (empty or too short a recording)")]
    Empty,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    Thread,
    Device,
    Irq,
    Softirq,
    Group,
}

/// A vertex: a thread, a group of merged threads, a device pseudo-thread,
/// or an interrupt context that could not be tied to a device.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub id: String,
    pub kind: NodeKind,
    pub label: String,
    /// Thread name (groups: the shared name).
    pub comm: String,
    pub tids: Vec<u32>,
    pub pids: Vec<u32>,
    /// On-CPU time; for a device, the time it had requests in flight.
    pub cpu_ns: u64,
    /// Runnable but not running (waiting for a core).
    pub runnable_ns: u64,
    /// Waiting; for a device, its idle time.
    pub wait_ns: u64,
    /// False for threads seen only as wakers or I/O issuers: what they wait
    /// for is not in the trace.
    pub recorded: bool,
    /// A virtual thread standing for short-lived threads (wPerf M-SHORT).
    pub short_lived: bool,
    /// Block device: requests and bytes issued.
    pub requests: u64,
    pub bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// Built from wait segments: `from` was woken by `to`.
    Wait,
    /// A device's idle time, spread over the threads that issue to it.
    DeviceIdle,
    /// A virtual thread waiting for its creator while none of its
    /// short-lived threads exists.
    Creator,
}

/// A stack with its weight in sampling points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackInfo {
    /// `root;…;leaf`, kernel frames suffixed `_[k]`.
    pub folded: String,
    /// Innermost user functions, leaf first: `pwrite64 ← consume ← worker`.
    pub short: String,
    /// Where the application waited: its innermost frames outside the
    /// system runtime, outer first, and the runtime function they called
    /// (`LruCache::Release → Mutex::Lock → pthread_mutex_lock`).
    pub site: Option<String>,
    /// First kernel function below the scheduler (`futex_wait`, …).
    pub reason: Option<String>,
    pub samples: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Edge {
    pub from: usize,
    pub to: usize,
    pub kind: EdgeKind,
    /// After cascaded re-distribution.
    pub weight_ns: u64,
    /// Raw waiting time.
    pub wait_ns: u64,
    /// Waits (or, for a device edge, requests).
    pub count: u64,
    /// Raw waiting time by subclass of the wait (indexed by `Class`).
    pub class_ns: [u64; 5],
    /// For a device edge: the issuer's share of the device's requests.
    pub share: f64,
    /// Where `from` was blocked (blocked samples of these waits).
    pub stacks: Vec<StackInfo>,
    /// What `to` was running within one sampling period before a wakeup.
    pub waker_stacks: Vec<StackInfo>,
    /// What the waited-for side did over these waits, down the chain
    /// ([`add_holders`]; none until it ran, or when no thread ended them).
    pub held: Option<crate::holder::RowHeld>,
}

impl Edge {
    /// The subclass with most raw waiting time.
    pub fn main_class(&self) -> holdup_trace::Class {
        let i = (0..5).max_by_key(|&i| self.class_ns[i]).unwrap_or(0);
        holdup_trace::Class::ALL[i]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KnotKind {
    Knot,
    Sink,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Knot {
    pub kind: KnotKind,
    pub nodes: Vec<usize>,
    /// Edges among its nodes (self-loops included).
    pub edges: Vec<usize>,
    /// No device and less than one core of CPU: background threads,
    /// reported and set aside (wPerf §3.3).
    pub background: bool,
    /// A vertex whose own waits are not in the trace.
    pub unrecorded: bool,
    /// A thread saturated on its CPU (running or runnable nearly all its
    /// life): a sink whether or not it has stray waits, reported first.
    pub cpu_bound: bool,
    /// The knot it was refined from (its nodes), if refinement trimmed it.
    pub refined_from: Option<Vec<usize>>,
    /// Edges trimmed during refinement.
    pub trimmed: Vec<usize>,
    pub cpu_ns: u64,
    pub runnable_ns: u64,
    pub wait_ns: u64,
    /// Sum of the weights of its edges.
    pub weight_ns: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Wait segments analysed: each is one off-CPU interval, ended by one
    /// context switch.
    pub segments: u64,
    /// Segments that ended a wait with a wakeup.
    pub wakeups: u64,
    pub samples: u64,
    pub bio: u64,
    /// Waits whose waker could not be named (still blocked at the end, …).
    pub waits_without_waker: u64,
    /// Segments found by the first pass (off-CPU longer than `long_ns`).
    pub long_segments: u64,
    /// The threshold for long segments that kept them within budget.
    pub long_ns: u64,
    /// Events that arrived later than the sweep's horizon (clamped).
    pub late_events: u64,
    /// Waits that would have closed a cycle (direct weight only).
    pub cycles: u64,
    /// Events lost to a full ring buffer (or not parsed).
    pub lost_events: u64,
    /// What the recorder saw but dropped, by name (its cause in parentheses).
    pub dropped: Vec<(String, u64)>,
    /// Lock (futex) waits ended by a wakeup, and those the recorder saw in
    /// timer context.
    pub lock_wakeups: u64,
    pub lock_wakeups_by_timer: u64,
    /// Edges too light to matter, left out when finding knots.
    pub light_edges: u64,
}

/// The result: vertices, edges, knots (most important first) and notes.
#[derive(Clone, Debug, PartialEq)]
pub struct WaitGraph {
    pub start_ns: u64,
    pub duration_ns: u64,
    pub period_ns: u64,
    pub threshold_ns: u64,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    pub knots: Vec<Knot>,
    /// Things a user should know (unknown devices, lost events, …).
    pub notes: Vec<String>,
    pub stats: Stats,
}

impl WaitGraph {
    /// Scheduler events analysed: a context switch per segment plus its
    /// wakeup, if it had one (what `perf sched record` would count as
    /// `sched_switch` + `sched_waking`).
    pub fn events(&self) -> u64 {
        self.stats.segments + self.stats.wakeups
    }

    pub fn node(&self, id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    pub fn edge(&self, from: usize, to: usize) -> Option<&Edge> {
        self.edges.iter().find(|e| e.from == from && e.to == to)
    }

    /// Edges out of `n`, heaviest first.
    pub fn out_edges(&self, n: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.edges.len())
            .filter(|&i| self.edges[i].from == n)
            .collect();
        v.sort_by_key(|&i| std::cmp::Reverse(self.edges[i].weight_ns));
        v
    }
}

/// Build the wait-for graph of a trace and find its knots.
pub fn analyze(src: &mut dyn Source, opts: &Options) -> Result<WaitGraph, Error> {
    passes::run(src, opts)
}
