//! Building the graph: two passes over the records, then vertices, edges,
//! knots.
//!
//! Pass 1 learns thread lifetimes (for merging short-lived threads) and the
//! waits too long for the sweep's reordering window. Pass 2 feeds every
//! other wait to the sweep and accumulates per-thread times, raw waits,
//! stacks and device activity. Waits are first kept against raw targets
//! (a thread, a disk, an irq number, …) and mapped to vertices at the end,
//! when it is known which irq serves which disk and which threads merge.

use super::merge::{self, Candidate, Dist, Life};
use super::ranking::knots_of;
use super::sweep::{Sweep, WaitSeg};
use super::*;
use crate::stacks::{wait_reason, Resolver};
use holdup_trace::{
    features, Bio, Class, Record, Sample, Segment, StackId, Trace, Waker, SOFTIRQ_NAMES,
};
use std::collections::{BTreeMap, VecDeque};
use std::hash::Hasher;

mod assemble;
mod retried;
use assemble::assemble;

/// A request completion wakes its waiter within this long (same interrupt).
const COMPLETION_TO_WAKE_NS: u64 = 200_000;
/// Reordering between CPUs allowed on top of `long_ns`.
const SLACK_NS: u64 = 50_000_000;
/// On-CPU samples remembered per thread, to find what a waker was doing.
const RING: usize = 16;

const SOFTIRQ_TIMER: u32 = 1;
const SOFTIRQ_NET_TX: u32 = 2;
const SOFTIRQ_NET_RX: u32 = 3;
const SOFTIRQ_BLOCK: u32 = 4;
const SOFTIRQ_HRTIMER: u32 = 8;

use crate::fxhash::{FxHashMap as FxMap, FxHasher};

/// Counts by a small key: a few pairs kept inline (in the thread's or
/// edge's own cache lines, searched linearly: most threads and edges see few
/// distinct keys), a hash map past that.
#[derive(Default)]
struct Counts {
    few: [(u32, u64); Counts::FEW],
    len: u8,
    many: FxMap<u32, u64>,
}

impl Counts {
    const FEW: usize = 6;

    #[inline]
    fn add(&mut self, k: u32, n: u64) {
        if self.many.is_empty() {
            let few = &mut self.few[..self.len as usize];
            if let Some(i) = few.iter().position(|p| p.0 == k) {
                few[i].1 = few[i].1.saturating_add(n);
                // Move towards the front: frequent keys are found first.
                if i > 0 {
                    few.swap(i, i - 1);
                }
                return;
            }
            if (self.len as usize) < Self::FEW {
                self.few[self.len as usize] = (k, n);
                self.len += 1;
                return;
            }
            self.many.extend(self.few);
            self.len = 0;
        }
        *self.many.entry(k).or_default() += n;
    }

    fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.few[..self.len as usize]
            .iter()
            .copied()
            .chain(self.many.iter().map(|(&k, &v)| (k, v)))
    }
}

/// Stacks whose Stack record has not been seen yet get a class of their
/// own: their id with this bit set.
const UNCLASSED: u32 = 1 << 31;

/// What a wait is on, before mapping to vertices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Thread(u32),
    Disk(u32),
    Irq(u32),
    Softirq(u32),
    Timer,
    /// An interrupt that left no name (a wakeup from the idle task).
    Interrupt,
    /// The virtual thread of a creator's short-lived threads, while none of
    /// them exists.
    Creator(u32),
    /// Everything outside the recording that issued requests to a disk.
    Outside(u32),
}

/// Recent request completions, to tie interrupt wakeups to a disk.
#[derive(Default)]
struct Completions {
    ring: VecDeque<(u64, u32)>,
}

impl Completions {
    const CAP: usize = 4096;

    fn push(&mut self, t: u64, dev: u32) {
        if self.ring.len() == Self::CAP {
            self.ring.pop_front();
        }
        self.ring.push_back((t, dev));
    }

    /// The disk whose request completed just before `wake`, if any.
    fn before(&self, wake: u64) -> Option<u32> {
        for &(t, dev) in self.ring.iter().rev().take(512) {
            if t <= wake {
                return (wake - t <= COMPLETION_TO_WAKE_NS).then_some(dev);
            }
        }
        None
    }
}

/// What `tid` waited on, when woken by `waker` at `wake` after a wait of
/// subclass `class`.
fn target(tid: u32, class: Class, waker: Waker, wake: u64, comps: &Completions) -> Option<Key> {
    // An I/O wait that ends right after a request completed waited for
    // that disk, whatever context the wakeup was seen in: completions on
    // another CPU arrive by IPI, which has no irq number, so the thread it
    // interrupted looks like the waker.
    let io_disk = if class == Class::Io {
        comps.before(wake)
    } else {
        None
    };
    Some(match waker {
        Waker::None => return None,
        _ if io_disk.is_some() => Key::Disk(io_disk.unwrap_or_default()),
        Waker::Thread(t) if t != 0 && t != tid => Key::Thread(t),
        // The idle task (or the thread itself) cannot wake a sleeper: an
        // interrupt did, without the recorder seeing its name.
        Waker::Thread(_) => Key::Interrupt,
        Waker::Irq(n) => Key::Irq(n),
        Waker::Softirq(SOFTIRQ_BLOCK) => match comps.before(wake) {
            Some(dev) => Key::Disk(dev),
            None => Key::Softirq(SOFTIRQ_BLOCK),
        },
        Waker::Softirq(SOFTIRQ_TIMER | SOFTIRQ_HRTIMER) | Waker::Timer => Key::Timer,
        Waker::Softirq(v) => Key::Softirq(v),
    })
}

#[derive(Clone, Debug, Default)]
struct Info {
    pid: u32,
    comm: String,
    start: Option<u64>,
    end: Option<u64>,
    creator: u32,
    recorded: bool,
}

#[derive(Default)]
struct ThreadAcc {
    off: u64,
    wait: u64,
    runnable: u64,
    samples: u64,
    /// Samples by class of user stack.
    dist: Counts,
    ring: [(u64, StackId); RING],
    ring_at: usize,
    /// Recent target → edge: a thread usually waits on the same few.
    cache: [(u32, u32); 2],
}

struct EdgeAcc {
    from: u32,
    to: u32,
    kind: EdgeKind,
    wait: u64,
    weight: u64,
    count: u64,
    class_ns: [u64; 5],
    share: f64,
    stacks: Counts,
    waker_stacks: Counts,
}

/// A disk's activity, from its request issues and completions.
#[derive(Default)]
struct DevAcc {
    inflight: u32,
    busy_since: u64,
    busy: u64,
    /// Start of the current idle period (0: the recording's start).
    idle_since: u64,
    requests: u64,
    bytes: u64,
    /// tid → (requests, bytes, in the recorded target)
    issuers: BTreeMap<u32, (u64, u64, bool)>,
}

impl DevAcc {
    /// A request issued; returns the idle period it ends, if it ends one.
    fn issue(&mut self, b: &Bio, start_ns: u64) -> Option<(u64, u64)> {
        let mut idle = None;
        if self.inflight == 0 {
            let from = self.idle_since.max(start_ns);
            if b.time > from {
                idle = Some((from, b.time));
            }
            self.busy_since = b.time;
        }
        self.inflight += 1;
        self.requests += 1;
        self.bytes = self.bytes.saturating_add(b.bytes as u64);
        let e = self.issuers.entry(b.tid).or_default();
        e.0 += 1;
        e.1 = e.1.saturating_add(b.bytes as u64);
        e.2 |= b.tracked;
        idle
    }

    fn done(&mut self, t: u64) {
        // A completion of a request issued before the recording: ignored.
        if self.inflight > 0 {
            self.inflight -= 1;
            if self.inflight == 0 {
                self.busy += t.saturating_sub(self.busy_since);
                self.idle_since = t;
            }
        }
    }

    fn busy_until(&self, end: u64) -> u64 {
        self.busy
            + if self.inflight > 0 {
                end.saturating_sub(self.busy_since)
            } else {
                0
            }
    }
}

struct Build<'o> {
    opts: &'o Options,
    /// Off-CPU intervals longer than this go through the first pass.
    long_ns: u64,
    start_ns: u64,
    end_ns: u64,
    keys: Vec<Key>,
    index: FxMap<Key, u32>,
    /// tid → node, the hot path of `index`, and the last one looked up.
    tnodes: FxMap<u32, u32>,
    /// The last thread looked up and its node (tids are any u32 in a
    /// crafted trace, so no tid can stand for "none").
    last_tid: Option<(u32, u32)>,
    /// The last thread marked as recorded in pass 1.
    last_info: Option<u32>,
    /// Stack id → class of its user part (threads doing the same work run
    /// the same user code paths), and user part → class.
    class_of: Vec<u32>,
    classes: FxMap<u64, u32>,
    acc: Vec<ThreadAcc>,
    edges: Vec<EdgeAcc>,
    edge_index: FxMap<u64, u32>,
    threads: FxMap<u32, Info>,
    comps: Completions,
    /// irq → (wakeups, disk → wakeups right after its completion)
    votes: BTreeMap<u32, (u64, BTreeMap<u32, u64>)>,
    devs: BTreeMap<u32, DevAcc>,
    /// Disks some wait was tied to directly.
    waited_disks: std::collections::BTreeSet<u32>,
    /// Stacks, symbols, dsos and irq names, for naming stacks at the end.
    names: Trace,
    lost: BTreeMap<String, u64>,
    stats: Stats,
    max_time: u64,
    finish: Option<u64>,
    /// Pass 1: chains of timed re-checks of a lock, and the long waits
    /// they may credit, kept until the chains are settled.
    chains: retried::Chains,
    long_retries: Vec<Segment>,
    /// Pass 2: the waker each timer-ended re-check is credited with.
    credited: retried::Credited,
}

impl<'o> Build<'o> {
    fn new(opts: &'o Options, start_ns: u64) -> Self {
        Build {
            opts,
            long_ns: opts.long_ns,
            start_ns,
            end_ns: start_ns,
            keys: Vec::new(),
            index: FxMap::default(),
            tnodes: FxMap::default(),
            last_tid: None,
            last_info: None,
            class_of: Vec::new(),
            classes: FxMap::default(),
            acc: Vec::new(),
            edges: Vec::new(),
            edge_index: FxMap::default(),
            threads: FxMap::default(),
            comps: Completions::default(),
            votes: BTreeMap::new(),
            devs: BTreeMap::new(),
            waited_disks: Default::default(),
            names: Trace::default(),
            lost: BTreeMap::new(),
            stats: Stats::default(),
            max_time: start_ns,
            finish: None,
            chains: Default::default(),
            long_retries: Vec::new(),
            credited: Default::default(),
        }
    }

    fn node(&mut self, k: Key) -> u32 {
        if let Key::Thread(tid) = k {
            return self.thread_node(tid);
        }
        self.new_node(k)
    }

    #[inline]
    fn thread_node(&mut self, tid: u32) -> u32 {
        if let Some((last, n)) = self.last_tid {
            if last == tid {
                return n;
            }
        }
        let n = match self.tnodes.get(&tid) {
            Some(&n) => n,
            None => {
                let n = self.new_node(Key::Thread(tid));
                self.tnodes.insert(tid, n);
                n
            }
        };
        self.last_tid = Some((tid, n));
        n
    }

    fn new_node(&mut self, k: Key) -> u32 {
        if let Some(&n) = self.index.get(&k) {
            return n;
        }
        let n = self.keys.len() as u32;
        self.keys.push(k);
        self.acc.push(ThreadAcc {
            cache: [(u32::MAX, u32::MAX); 2],
            ..Default::default()
        });
        self.index.insert(k, n);
        n
    }

    #[inline]
    /// The wait of `node` for `parent` from `start` to `wake`, on their edge.
    fn wait_seg(
        &mut self,
        node: u32,
        parent: u32,
        kind: EdgeKind,
        start: u64,
        wake: u64,
    ) -> WaitSeg {
        let edge = self.edge(node, parent, kind);
        WaitSeg {
            node,
            parent,
            edge,
            start,
            wake,
        }
    }

    fn edge(&mut self, from: u32, to: u32, kind: EdgeKind) -> u32 {
        let c = &mut self.acc[from as usize].cache;
        if c[0].0 == to {
            return c[0].1;
        }
        if c[1].0 == to {
            c.swap(0, 1);
            return c[0].1;
        }
        let next = self.edges.len() as u32;
        let e = *self
            .edge_index
            .entry((from as u64) << 32 | to as u64)
            .or_insert(next);
        if e == next {
            self.edges.push(EdgeAcc {
                from,
                to,
                kind,
                wait: 0,
                weight: 0,
                count: 0,
                class_ns: [0; 5],
                share: 0.0,
                stacks: Counts::default(),
                waker_stacks: Counts::default(),
            });
        }
        let c = &mut self.acc[from as usize].cache;
        c[1] = c[0];
        c[0] = (to, e);
        e
    }

    /// The class of a stack's user part.
    #[inline]
    fn class(&self, stack: StackId) -> u32 {
        match self.class_of.get(stack as usize) {
            Some(&c) if c != u32::MAX => c,
            _ => UNCLASSED | stack,
        }
    }

    fn add_stack(&mut self, id: StackId, frames: &[holdup_trace::Frame]) {
        // Ids are small and dense (deduplicated in order): index a vector.
        if id < 1 << 24 {
            let next = self.classes.len() as u32;
            let c = *self.classes.entry(user_key(frames)).or_insert(next);
            if self.class_of.len() <= id as usize {
                self.class_of.resize(id as usize + 1, u32::MAX);
            }
            self.class_of[id as usize] = c;
        }
    }

    fn info(&mut self, pid: u32, tid: u32) -> &mut Info {
        let i = self.threads.entry(tid).or_default();
        if i.pid == 0 {
            i.pid = pid;
        }
        i
    }

    /// A disk waits for the thread whose request ends its idle period (the
    /// device's "waker"): that is what it was waiting for.
    fn bio_issue(&mut self, b: &Bio) -> Option<(WaitSeg, bool)> {
        let (start, wake) = self
            .devs
            .entry(b.dev)
            .or_default()
            .issue(b, self.start_ns)?;
        let node = self.node(Key::Disk(b.dev));
        let parent = if b.tracked && b.tid != 0 {
            self.node(Key::Thread(b.tid))
        } else {
            self.node(Key::Outside(b.dev))
        };
        let seg = self.wait_seg(node, parent, EdgeKind::DeviceIdle, start, wake);
        Some((seg, wake - start > self.long_ns))
    }

    fn is_long(&self, s: &Segment) -> bool {
        s.end.saturating_sub(s.start) > self.long_ns
    }

    /// Keep a long segment; past the budget, double the threshold and drop
    /// those no longer long, so that memory stays bounded.
    fn keep_long(&mut self, long: &mut Vec<(WaitSeg, u64)>, seg: WaitSeg, len: u64) {
        long.push((seg, len));
        while long.len() > self.opts.long_budget.max(1) {
            self.long_ns = self.long_ns.max(1) * 2;
            let l = self.long_ns;
            long.retain(|&(_, len)| len > l);
        }
    }

    /// Keep the wait of a long segment, if it has a waker.
    fn keep_long_wait(&mut self, long: &mut Vec<(WaitSeg, u64)>, s: &Segment) {
        if let Some((k, start, wake)) = self.wait_of(s) {
            let node = self.node(Key::Thread(s.tid));
            let parent = self.node(k);
            let seg = self.wait_seg(node, parent, EdgeKind::Wait, start, wake);
            self.keep_long(long, seg, s.end - s.start);
        }
    }

    /// The wait of a segment: `(target, start, wake)`.
    fn wait_of(&self, s: &Segment) -> Option<(Key, u64, u64)> {
        if s.class == Class::Sched || s.wake <= s.start {
            return None;
        }
        let waker = self.credited_waker(s.tid, s.start, s.waker);
        target(s.tid, s.class, waker, s.wake, &self.comps).map(|k| (k, s.start, s.wake))
    }

    /// The waker of a wait of `tid` that began at `start`: a timed
    /// re-check of a contended lock takes that of its chain.
    fn credited_waker(&self, tid: u32, start: u64, waker: Waker) -> Waker {
        match waker {
            Waker::Timer => self.credited.get(&(tid, start)).copied().unwrap_or(waker),
            _ => waker,
        }
    }

    // ---- pass 1 -------------------------------------------------------

    fn learn(&mut self, batch: &[Item<'_>], long: &mut Vec<(WaitSeg, u64)>) {
        for &item in batch {
            let r = match item {
                Item::Segment(s) => {
                    if self.last_info != Some(s.tid) {
                        self.info(s.pid, s.tid).recorded = true;
                        self.last_info = Some(s.tid);
                    }
                    self.max_time = self.max_time.max(s.end);
                    if self.is_long(s) && s.class == Class::Lock && s.waker == Waker::Timer {
                        // Its waker is known once the chains are settled.
                        self.long_retries.push(s.clone());
                    } else if self.is_long(s) {
                        self.keep_long_wait(long, s);
                    }
                    continue;
                }
                Item::Sample(s) => {
                    if self.last_info != Some(s.tid) {
                        self.info(s.pid, s.tid).recorded = true;
                        self.last_info = Some(s.tid);
                    }
                    self.max_time = self.max_time.max(s.end);
                    self.chains.sample(s);
                    continue;
                }
                Item::Other(r) => r,
            };
            match r {
                // Names, for the lock kinds of the chains' stacks.
                Record::Stack(s) => {
                    self.names.stacks.insert(s.id, s.frames.clone());
                }
                Record::Symbol(s) => {
                    self.names.symbols.insert(s.frame, s.frames.clone());
                }
                Record::Dso(d) => {
                    self.names.dsos.insert(d.id, d.clone());
                }
                Record::Fork {
                    time,
                    parent_tid,
                    pid,
                    tid,
                    ..
                } => {
                    let parent_comm = self.threads.get(parent_tid).map(|p| p.comm.clone());
                    let i = self.info(*pid, *tid);
                    i.start = Some(*time);
                    i.creator = *parent_tid;
                    if i.comm.is_empty() {
                        i.comm = parent_comm.unwrap_or_default();
                    }
                    self.max_time = self.max_time.max(*time);
                }
                Record::Comm { pid, tid, comm, .. } => self.info(*pid, *tid).comm = comm.clone(),
                Record::Exit { time, pid, tid } => {
                    self.info(*pid, *tid).end = Some(*time);
                    self.max_time = self.max_time.max(*time);
                }
                Record::BioIssue(b) => {
                    if let Some((seg, true)) = self.bio_issue(b) {
                        self.keep_long(long, seg, seg.wake - seg.start);
                    }
                    self.max_time = self.max_time.max(b.time);
                }
                Record::BioDone(b) => {
                    self.comps.push(b.time, b.dev);
                    self.devs.entry(b.dev).or_default().done(b.time);
                    self.max_time = self.max_time.max(b.time);
                }
                Record::Finish(f) => self.finish = Some(f.time),
                other => {
                    if let Some(t) = other.time() {
                        self.max_time = self.max_time.max(t);
                    }
                }
            }
        }
    }

    // ---- pass 2 -------------------------------------------------------

    fn segment(&mut self, s: &Segment, sweep: &mut Sweep) {
        self.stats.segments += 1;
        let node = self.thread_node(s.tid);
        let len = s.end.saturating_sub(s.start);
        let wait = self.wait_of(s);
        let long = self.is_long(s);
        let a = &mut self.acc[node as usize];
        a.off = a.off.saturating_add(len);
        if s.class == Class::Sched {
            a.runnable = a.runnable.saturating_add(len);
        } else if s.wake > s.start {
            self.stats.wakeups += 1;
            if s.class == Class::Lock {
                self.stats.lock_wakeups += 1;
                self.stats.lock_wakeups_by_timer += (s.waker == Waker::Timer) as u64;
            }
            a.wait = a.wait.saturating_add(s.wake - s.start);
            a.runnable += s.end.saturating_sub(s.wake);
        } else {
            // Still blocked at the end, or no wakeup seen.
            a.wait = a.wait.saturating_add(len);
        }
        match wait {
            Some((k, start, wake)) => {
                if let Key::Disk(d) = k {
                    self.waited_disks.insert(d);
                }
                if let Key::Irq(n) = k {
                    let v = self.votes.entry(n).or_default();
                    v.0 += 1;
                    if let Some(dev) = self.comps.before(wake) {
                        *v.1.entry(dev).or_default() += 1;
                    }
                }
                let parent = self.node(k);
                let edge = self.edge(node, parent, EdgeKind::Wait);
                let e = &mut self.edges[edge as usize];
                e.wait = e.wait.saturating_add(wake - start);
                e.count += 1;
                e.class_ns[s.class.index()] =
                    e.class_ns[s.class.index()].saturating_add(wake - start);
                if !long {
                    sweep.add(WaitSeg {
                        node,
                        parent,
                        edge,
                        start,
                        wake,
                    });
                }
            }
            None if s.class != Class::Sched && s.wake.max(s.end) > s.start => {
                self.stats.waits_without_waker += 1
            }
            None => {}
        }
        if s.end > self.max_time {
            self.max_time = s.end;
            sweep.advance(s.end);
        }
    }

    fn sample(&mut self, s: &Sample) {
        self.stats.samples += 1;
        let node = self.thread_node(s.tid);
        let w = if s.class == Class::Cpu {
            1
        } else {
            s.weight as u64 + s.sched_weight as u64
        };
        let class = self.class(s.stack);
        let a = &mut self.acc[node as usize];
        a.samples += w;
        a.dist.add(class, w);
        if s.class == Class::Cpu {
            a.ring[a.ring_at % RING] = (s.time, s.stack);
            a.ring_at += 1;
            return;
        }
        if s.class == Class::Sched || s.weight == 0 || s.wake <= s.time {
            return;
        }
        let waker = self.credited_waker(s.tid, s.time, s.waker);
        let Some(k) = target(s.tid, s.class, waker, s.wake, &self.comps) else {
            return;
        };
        let parent = self.node(k);
        let edge = self.edge(node, parent, EdgeKind::Wait);
        self.edges[edge as usize]
            .stacks
            .add(s.stack, s.weight as u64);
        if let Key::Thread(w) = k {
            // What the waker ran last before the wakeup, if it was sampled
            // within one period of it.
            let Some(&wn) = self.tnodes.get(&w) else {
                return;
            };
            let period = self.period();
            let ring = &self.acc[wn as usize].ring;
            let best = ring
                .iter()
                .filter(|(t, _)| *t != 0 && *t <= s.wake && t.saturating_add(period) >= s.wake)
                .max_by_key(|(t, _)| *t);
            if let Some(&(_, stack)) = best {
                self.edges[edge as usize]
                    .waker_stacks
                    .add(stack, s.weight as u64);
            }
        }
    }

    fn period(&self) -> u64 {
        self.names.header.period_ns.max(1)
    }

    fn record(&mut self, item: Item<'_>, sweep: &mut Sweep) {
        let r = match item {
            Item::Segment(s) => return self.segment(s, sweep),
            Item::Sample(s) => return self.sample(s),
            Item::Other(r) => r,
        };
        match r {
            Record::BioIssue(b) => {
                self.stats.bio += 1;
                if let Some((seg, long)) = self.bio_issue(b) {
                    let e = &mut self.edges[seg.edge as usize];
                    e.wait = e.wait.saturating_add(seg.wake - seg.start);
                    e.count += 1;
                    if !long {
                        sweep.add(seg);
                    }
                }
                if b.time > self.max_time {
                    self.max_time = b.time;
                    sweep.advance(b.time);
                }
            }
            Record::BioDone(b) => {
                self.comps.push(b.time, b.dev);
                self.devs.entry(b.dev).or_default().done(b.time);
            }
            Record::Stack(s) => self.add_stack(s.id, &s.frames),
            Record::IrqName { irq, name } => {
                self.names.irq_names.insert(*irq, name.clone());
            }
            Record::Lost(l) => {
                let n = self.lost.entry(l.what.clone()).or_default();
                *n = (*n).max(l.count);
            }
            _ => {}
        }
    }
}

pub fn run(src: &mut dyn Source, opts: &Options) -> Result<WaitGraph, Error> {
    if src.features() & features::SEGMENTS == 0 {
        return Err(Error::NoSegments);
    }
    let header = src.header().clone();
    let mut b = Build::new(opts, header.start_ns);
    b.names.header = header.clone();

    // Pass 1.
    let mut kept = Vec::new();
    src.pass(&mut |batch| b.learn(batch, &mut kept))?;
    b.credited = std::mem::take(&mut b.chains).settle(&b.names);
    for s in std::mem::take(&mut b.long_retries) {
        if b.is_long(&s) {
            b.keep_long_wait(&mut kept, &s);
        }
    }
    let mut long: Vec<WaitSeg> = kept.into_iter().map(|(s, _)| s).collect();
    b.stats.long_ns = b.long_ns;
    b.end_ns = b.finish.unwrap_or(b.max_time).max(b.start_ns);
    let duration = b.end_ns - b.start_ns;
    b.stats.long_segments = long.len() as u64;

    // Short-lived threads: their virtual thread waits for the creator
    // whenever none of them exists.
    let mut virtual_of: FxMap<u32, u32> = FxMap::default();
    let mut virtuals: Vec<(u32, Vec<u32>)> = Vec::new();
    if opts.merge_short {
        let lives: Vec<Life> = b
            .threads
            .iter()
            .filter(|(_, i)| i.recorded)
            .map(|(&tid, i)| Life {
                tid,
                creator: i.creator,
                start: i.start.unwrap_or(b.start_ns),
                end: i.end.unwrap_or(b.end_ns),
                born_and_died: i.start.is_some() && i.end.is_some(),
            })
            .collect();
        for (creator, members) in merge::short_lived(&lives, duration) {
            let spans: Vec<(u64, u64)> = lives
                .iter()
                .filter(|l| members.contains(&l.tid))
                .map(|l| (l.start, l.end))
                .collect();
            let ci = b.threads.get(&creator).cloned().unwrap_or_default();
            let from = ci.start.unwrap_or(b.start_ns).max(b.start_ns);
            let to = ci.end.unwrap_or(b.end_ns).min(b.end_ns);
            let node = b.node(Key::Creator(creator));
            let parent = b.node(Key::Thread(creator));
            let edge = b.edge(node, parent, EdgeKind::Creator);
            for (s, e) in merge::gaps(spans, from, to) {
                let ea = &mut b.edges[edge as usize];
                ea.wait = ea.wait.saturating_add(e - s);
                ea.count += 1;
                ea.class_ns[Class::Other.index()] += e - s;
                b.acc[node as usize].wait = b.acc[node as usize].wait.saturating_add(e - s);
                long.push(WaitSeg {
                    node,
                    parent,
                    edge,
                    start: s,
                    wake: e,
                });
            }
            for &m in &members {
                virtual_of.insert(m, creator);
            }
            virtuals.push((creator, members));
        }
    }

    // Pass 2.
    b.comps = Completions::default();
    b.devs.clear();
    b.max_time = b.start_ns;
    let mut sweep = Sweep::new(b.start_ns, b.long_ns + SLACK_NS, long);
    src.pass(&mut |batch| {
        for &item in batch {
            b.record(item, &mut sweep);
        }
    })?;
    if b.stats.segments == 0 {
        return Err(Error::Empty);
    }
    b.stats.late_events = sweep.late;
    b.stats.cycles = sweep.cycles;
    let weights = sweep.into_edge_weights();
    for (e, w) in b.edges.iter_mut().zip(weights) {
        e.weight = w;
    }

    let (lost, dropped) = holdup_trace::split_lost(b.lost.iter().map(|(w, &n)| (w.as_str(), n)));
    b.stats.lost_events = lost;
    b.stats.dropped = crate::profile::owned(dropped);
    Ok(assemble(
        b,
        duration,
        &virtual_of,
        &virtuals,
        src.damage().map(|d| d.to_string()),
    ))
}

/// A key for the user part of a stack (the kernel part when there is none):
/// threads doing the same work run the same user code paths.
fn user_key(frames: &[holdup_trace::Frame]) -> u64 {
    let mut h = FxHasher::default();
    let mut any = false;
    for f in frames.iter().filter(|f| !f.is_kernel()) {
        h.write_u64(f.dso as u64);
        h.write_u64(f.addr);
        any = true;
    }
    if !any {
        for f in frames {
            h.write_u64(f.addr);
        }
    }
    h.finish()
}
