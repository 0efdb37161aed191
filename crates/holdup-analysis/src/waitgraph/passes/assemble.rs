//! The end of the passes: raw targets become vertices (irqs tied to their
//! disks, similar threads grouped, short-lived threads behind their
//! creator), raw edges merge by vertex pair, then knots and notes.

use super::*;
use holdup_trace::devices::major_minor;
use std::collections::BTreeSet;

/// The vertex of what is left out of the graph.
const DROPPED: usize = usize::MAX;

struct VAcc {
    node: Node,
    /// Longest lifetime among its threads: the span its CPU time is
    /// compared with.
    span: u64,
}

pub(super) fn assemble(
    mut b: Build,
    duration: u64,
    virtual_of: &FxMap<u32, u32>,
    virtuals: &[(u32, Vec<u32>)],
    damage: Option<String>,
) -> WaitGraph {
    let devices = Devices::of(&b);
    share_device_idle(&mut b);
    let groups = similar_groups(&b, virtual_of);
    let mut vs = Vertices::new(&b, &devices, &groups);
    let vmap: Vec<usize> = b
        .keys
        .iter()
        .map(|&k| vs.of_key(k, virtual_of, virtuals))
        .collect();
    let mut verts = vs.verts;
    add_vertex_times(&b, &vmap, &mut verts, duration);
    let edges = merge_edges(&b, &vmap);

    let nodes: Vec<Node> = verts.iter().map(|v| v.node.clone()).collect();
    let spans: Vec<u64> = verts.iter().map(|v| v.span).collect();
    let threshold_ns = match b.opts.threshold {
        Threshold::Fraction(f) => (duration as f64 * f) as u64,
        Threshold::Ns(n) => n,
    };
    let (knots, ignored) = knots_of(&nodes, &edges, &spans, duration, threshold_ns);
    b.stats.light_edges = ignored;
    let unnamed_disk = b
        .index
        .get(&Key::Disk(0))
        .is_some_and(|&n| b.devs.contains_key(&0) && vmap[n as usize] != DROPPED);
    let notes = notes(&b, &nodes, &edges, unnamed_disk, damage);
    WaitGraph {
        start_ns: b.start_ns,
        duration_ns: duration,
        period_ns: b.names.header.period_ns,
        threshold_ns,
        nodes,
        edges,
        knots,
        notes,
        stats: b.stats,
    }
}

/// Which disks and NICs the graph shows, and which irq serves which disk.
struct Devices {
    /// irq → the disk it serves: most of its wakeups came right after a
    /// completion on that disk.
    irq_disk: BTreeMap<u32, u32>,
    /// Disks that someone in the target waited on or fed.
    relevant: BTreeSet<u32>,
    nics: BTreeSet<String>,
    /// disk → the tasks outside the target that issued requests to it.
    outside_tids: BTreeMap<u32, Vec<u32>>,
}

impl Devices {
    fn of(b: &Build) -> Devices {
        let mut irq_disk: BTreeMap<u32, u32> = BTreeMap::new();
        for (&irq, (n, per)) in &b.votes {
            if let Some((&dev, &v)) = per.iter().max_by_key(|(_, &v)| v) {
                if v >= 3 && v * 2 >= *n {
                    irq_disk.insert(irq, dev);
                }
            }
        }
        let relevant: BTreeSet<u32> = b
            .devs
            .iter()
            .filter(|(dev, d)| {
                b.waited_disks.contains(dev)
                    || irq_disk
                        .iter()
                        .any(|(n, dv)| dv == *dev && b.index.contains_key(&Key::Irq(*n)))
                    || d.issuers.values().any(|i| i.2)
            })
            .map(|(dev, _)| *dev)
            .chain(b.waited_disks.iter().copied())
            .collect();
        let outside_tids = b
            .devs
            .iter()
            .map(|(&dev, d)| (dev, outside_issuers(d).map(|(t, _)| *t).collect()))
            .collect();
        let nics = b
            .keys
            .iter()
            .filter_map(|k| match k {
                Key::Irq(n) if !irq_disk.contains_key(n) => b
                    .names
                    .irq_names
                    .get(n)
                    .and_then(|s| nic_name(s))
                    .map(str::to_string),
                _ => None,
            })
            .collect();
        Devices {
            irq_disk,
            relevant,
            nics,
            outside_tids,
        }
    }

    /// The one disk of the recording, if there is exactly one.
    fn only_disk(&self) -> Option<u32> {
        let mut it = self.relevant.iter();
        match (it.next(), it.next()) {
            (Some(&d), None) => Some(d),
            _ => None,
        }
    }
}

/// Issuers of a disk's requests outside the recorded target (tid 0: the
/// kernel's own).
fn outside_issuers(d: &DevAcc) -> impl Iterator<Item = (&u32, &(u64, u64, bool))> {
    d.issuers.iter().filter(|(t, i)| !i.2 || **t == 0)
}

/// Device edges: `count` becomes the requests issued, `share` the part of
/// the disk's attributed idle time.
fn share_device_idle(b: &mut Build) {
    let mut idle_total: BTreeMap<u32, u64> = BTreeMap::new();
    for e in &b.edges {
        if let (EdgeKind::DeviceIdle, Key::Disk(dev)) = (e.kind, b.keys[e.from as usize]) {
            let t = idle_total.entry(dev).or_default();
            *t = t.saturating_add(e.wait);
        }
    }
    for i in 0..b.edges.len() {
        let e = &b.edges[i];
        let (EdgeKind::DeviceIdle, Key::Disk(dev)) = (e.kind, b.keys[e.from as usize]) else {
            continue;
        };
        let d = &b.devs[&dev];
        let req = match b.keys[e.to as usize] {
            Key::Thread(tid) => d.issuers.get(&tid).map_or(0, |i| i.0),
            _ => outside_issuers(d).map(|(_, i)| i.0).sum(),
        };
        let total = idle_total.get(&dev).copied().unwrap_or(0).max(1);
        let e = &mut b.edges[i];
        e.share = e.wait as f64 / total as f64;
        e.count = req;
    }
}

/// Groups of recorded threads doing the same work: tid → group, and each
/// group's name.
struct Groups {
    of: FxMap<u32, usize>,
    names: Vec<String>,
    /// Vertex ids: groups that share a name get `#k`.
    ids: Vec<String>,
}

fn similar_groups(b: &Build, virtual_of: &FxMap<u32, u32>) -> Groups {
    let mut of: FxMap<u32, usize> = FxMap::default();
    let mut names: Vec<String> = Vec::new();
    if b.opts.merge_similar {
        let mut keyed: Vec<(u32, Dist)> = Vec::new();
        for (i, k) in b.keys.iter().enumerate() {
            if let Key::Thread(tid) = *k {
                let recorded = b.threads.get(&tid).is_some_and(|t| t.recorded);
                if !recorded || virtual_of.contains_key(&tid) {
                    continue;
                }
                let counts: Vec<(u64, u64)> =
                    b.acc[i].dist.iter().map(|(c, n)| (c as u64, n)).collect();
                keyed.push((tid, Dist::from_counts(counts)));
            }
        }
        let cands: Vec<Candidate> = keyed
            .iter()
            .map(|(tid, d)| Candidate {
                name: b.threads.get(tid).map_or("", |t| t.comm.as_str()),
                dist: d,
                samples: b.acc[b.index[&Key::Thread(*tid)] as usize].samples,
            })
            .collect();
        let ids = merge::group_similar(&cands, 0.5);
        let mut renum: BTreeMap<usize, usize> = BTreeMap::new();
        for (c, id) in cands.iter().zip(&ids) {
            if let Some(id) = id {
                let n = renum.len();
                let g = *renum.entry(*id).or_insert(n);
                if g == names.len() {
                    names.push(merge::base_name(c.name).to_string());
                }
            }
        }
        for ((tid, _), id) in keyed.iter().zip(&ids) {
            if let Some(id) = id {
                of.insert(*tid, renum[id]);
            }
        }
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let ids = names
        .iter()
        .map(|n| {
            let k = seen.entry(n.as_str()).or_insert(0);
            *k += 1;
            if *k == 1 {
                format!("g:{n}")
            } else {
                format!("g:{n}#{k}")
            }
        })
        .collect();
    Groups { of, names, ids }
}

fn blank(kind: NodeKind, label: String) -> Node {
    Node {
        id: String::new(),
        kind,
        label,
        comm: String::new(),
        tids: Vec::new(),
        pids: Vec::new(),
        cpu_ns: 0,
        runnable_ns: 0,
        wait_ns: 0,
        recorded: true,
        short_lived: false,
        requests: 0,
        bytes: 0,
    }
}

/// The vertices, made on first use by id.
struct Vertices<'b> {
    b: &'b Build<'b>,
    devices: &'b Devices,
    groups: &'b Groups,
    index: HashMap<String, usize>,
    verts: Vec<VAcc>,
}

impl<'b> Vertices<'b> {
    fn new(b: &'b Build<'b>, devices: &'b Devices, groups: &'b Groups) -> Self {
        Vertices {
            b,
            devices,
            groups,
            index: HashMap::new(),
            verts: Vec::new(),
        }
    }

    fn vertex(&mut self, id: String, make: impl FnOnce() -> Node) -> usize {
        if let Some(&v) = self.index.get(&id) {
            return v;
        }
        let v = self.verts.len();
        let mut node = make();
        node.id = id.clone();
        self.verts.push(VAcc { node, span: 0 });
        self.index.insert(id, v);
        v
    }

    fn thread_label(&self, tid: u32) -> String {
        match self.b.threads.get(&tid) {
            Some(t) if !t.comm.is_empty() => format!("{}:{tid}", t.comm),
            _ => format!("tid:{tid}"),
        }
    }

    fn disk_label(&self, dev: u32) -> String {
        let (ma, mi) = major_minor(dev);
        match self.b.opts.device_names.get(&dev) {
            Some(n) => format!("{n} ({ma}:{mi})"),
            None if dev == 0 => "disk ?".to_string(),
            None => format!("disk {ma}:{mi}"),
        }
    }

    fn disk(&mut self, dev: u32) -> usize {
        let (ma, mi) = major_minor(dev);
        let label = self.disk_label(dev);
        self.vertex(format!("disk:{ma}:{mi}"), || blank(NodeKind::Device, label))
    }

    fn nic(&mut self, nic: &str) -> usize {
        self.vertex(format!("net:{nic}"), || {
            blank(NodeKind::Device, format!("net {nic}"))
        })
    }

    /// The vertex of a raw target, or DROPPED.
    fn of_key(
        &mut self,
        k: Key,
        virtual_of: &FxMap<u32, u32>,
        virtuals: &[(u32, Vec<u32>)],
    ) -> usize {
        let b = self.b;
        let devices = self.devices;
        let creator = match k {
            Key::Creator(c) => Some(c),
            Key::Thread(t) => virtual_of.get(&t).copied(),
            _ => None,
        };
        if let Some(creator) = creator {
            let members = virtuals
                .iter()
                .find(|v| v.0 == creator)
                .map_or(&[][..], |v| &v.1[..]);
            let label = format!(
                "short-lived ×{} of {}",
                members.len(),
                self.thread_label(creator)
            );
            let comm = members
                .first()
                .and_then(|m| b.threads.get(m))
                .map_or(String::new(), |t| t.comm.clone());
            return self.vertex(format!("v:{creator}"), || Node {
                short_lived: true,
                comm,
                ..blank(NodeKind::Group, label)
            });
        }
        match k {
            Key::Creator(_) => unreachable!("handled above"),
            Key::Thread(tid) => match self.groups.of.get(&tid) {
                Some(&g) => {
                    let name = self.groups.names[g].clone();
                    self.vertex(self.groups.ids[g].clone(), || Node {
                        comm: name.clone(),
                        ..blank(NodeKind::Group, name)
                    })
                }
                None => {
                    let info = b.threads.get(&tid).cloned().unwrap_or_default();
                    let label = self.thread_label(tid);
                    self.vertex(format!("t:{tid}"), || Node {
                        comm: info.comm,
                        recorded: info.recorded,
                        ..blank(NodeKind::Thread, label)
                    })
                }
            },
            Key::Disk(dev) | Key::Outside(dev) if !devices.relevant.contains(&dev) => DROPPED,
            Key::Disk(dev) => self.disk(dev),
            Key::Irq(n) => {
                let name = b.names.irq_names.get(&n).cloned();
                if let Some(&dev) = devices.irq_disk.get(&n) {
                    self.disk(dev)
                } else if let Some(nic) = name.as_deref().and_then(nic_name) {
                    self.nic(nic)
                } else {
                    let label = match (&name, n) {
                        (Some(s), _) => format!("irq {n} {s}"),
                        (None, u32::MAX) => "irq ?".to_string(),
                        (None, _) => format!("irq {n}"),
                    };
                    self.vertex(format!("irq:{n}"), || blank(NodeKind::Irq, label))
                }
            }
            Key::Softirq(SOFTIRQ_BLOCK) if devices.only_disk().is_some() => {
                self.disk(devices.only_disk().unwrap())
            }
            Key::Softirq(SOFTIRQ_NET_RX | SOFTIRQ_NET_TX) => match devices.nics.len() {
                1 => {
                    let nic = devices.nics.iter().next().unwrap().clone();
                    self.nic(&nic)
                }
                _ => self.vertex("net:?".to_string(), || {
                    blank(NodeKind::Device, "network".to_string())
                }),
            },
            Key::Softirq(v) => {
                let name = SOFTIRQ_NAMES.get(v as usize).copied().unwrap_or("unknown");
                self.vertex(format!("softirq:{name}"), || {
                    blank(NodeKind::Softirq, format!("softirq {name}"))
                })
            }
            Key::Timer => self.vertex("timer".to_string(), || {
                blank(NodeKind::Irq, "timer".to_string())
            }),
            Key::Outside(dev) => {
                let tids = devices.outside_tids.get(&dev).cloned().unwrap_or_default();
                let (ma, mi) = major_minor(dev);
                let label = format!("other tasks on {}", self.disk_label(dev));
                self.vertex(format!("ext:{ma}:{mi}"), || Node {
                    recorded: false,
                    tids,
                    ..blank(NodeKind::Group, label)
                })
            }
            Key::Interrupt => self.vertex("irq:?".to_string(), || {
                blank(NodeKind::Irq, "interrupt (unnamed)".to_string())
            }),
        }
    }
}

/// Threads' CPU, runnable and wait times, and disks' busy and idle times,
/// summed into their vertices.
fn add_vertex_times(b: &Build, vmap: &[usize], verts: &mut [VAcc], duration: u64) {
    for (i, k) in b.keys.iter().enumerate() {
        if vmap[i] == DROPPED {
            continue;
        }
        let v = &mut verts[vmap[i]];
        let a = &b.acc[i];
        match *k {
            Key::Thread(tid) => {
                let Some(info) = b.threads.get(&tid).filter(|t| t.recorded) else {
                    continue;
                };
                let start = info.start.unwrap_or(b.start_ns).max(b.start_ns);
                let end = info.end.unwrap_or(b.end_ns).min(b.end_ns).max(start);
                let life = end - start;
                v.node.cpu_ns += life.saturating_sub(a.off);
                v.node.runnable_ns = v.node.runnable_ns.saturating_add(a.runnable);
                v.node.wait_ns = v.node.wait_ns.saturating_add(a.wait);
                v.node.tids.push(tid);
                if !v.node.pids.contains(&info.pid) {
                    v.node.pids.push(info.pid);
                }
                v.span = v.span.max(life);
            }
            Key::Creator(_) => {
                v.node.wait_ns = v.node.wait_ns.saturating_add(a.wait);
                v.span = duration;
            }
            _ => {}
        }
    }
    for (&dev, d) in &b.devs {
        let Some(&n) = b.index.get(&Key::Disk(dev)) else {
            continue;
        };
        if vmap[n as usize] == DROPPED {
            continue;
        }
        let v = &mut verts[vmap[n as usize]];
        let busy = d.busy_until(b.end_ns);
        v.node.cpu_ns = v.node.cpu_ns.saturating_add(busy.min(duration));
        v.node.wait_ns += duration.saturating_sub(busy);
        v.node.requests += d.requests;
        v.node.bytes = v.node.bytes.saturating_add(d.bytes);
        v.span = duration;
    }
    for v in verts {
        v.node.tids.sort_unstable();
        v.node.tids.dedup();
        v.node.pids.sort_unstable();
        if v.node.kind == NodeKind::Group && !v.node.short_lived && v.node.recorded {
            // Groups that share a name (senders and receivers of one
            // program) carry the number of their id.
            let nth = v
                .node
                .id
                .rsplit_once('#')
                .map(|(_, k)| format!(" #{k}"))
                .unwrap_or_default();
            v.node.label = format!("{} ×{}{nth}", v.node.comm, v.node.tids.len());
        }
        if v.span == 0 {
            v.span = duration;
        }
    }
}

/// Raw edges merged by vertex pair, heaviest first, each with its most
/// frequent wait and waker stacks.
fn merge_edges(b: &Build, vmap: &[usize]) -> Vec<Edge> {
    let mut eindex: HashMap<(usize, usize), usize> = HashMap::new();
    let mut parts: Vec<(EdgeAcc, Vec<usize>)> = Vec::new();
    for (i, e) in b.edges.iter().enumerate() {
        let key = (vmap[e.from as usize], vmap[e.to as usize]);
        if (e.weight == 0 && e.wait == 0) || key.0 == DROPPED || key.1 == DROPPED {
            continue;
        }
        match eindex.get(&key) {
            Some(&j) => {
                let p = &mut parts[j].0;
                p.weight = p.weight.saturating_add(e.weight);
                p.wait = p.wait.saturating_add(e.wait);
                p.count += e.count;
                p.share += e.share;
                for c in 0..5 {
                    p.class_ns[c] = p.class_ns[c].saturating_add(e.class_ns[c]);
                }
                if e.kind == EdgeKind::Wait {
                    p.kind = EdgeKind::Wait;
                }
                parts[j].1.push(i);
            }
            None => {
                eindex.insert(key, parts.len());
                parts.push((
                    EdgeAcc {
                        from: key.0 as u32,
                        to: key.1 as u32,
                        kind: e.kind,
                        wait: e.wait,
                        weight: e.weight,
                        count: e.count,
                        class_ns: e.class_ns,
                        share: e.share,
                        stacks: Counts::default(),
                        waker_stacks: Counts::default(),
                    },
                    vec![i],
                ));
            }
        }
    }
    let mut resolver = Resolver::new(&b.names);
    let mut top = |sources: &mut dyn Iterator<Item = &Counts>| -> Vec<StackInfo> {
        let mut sum: BTreeMap<StackId, u64> = BTreeMap::new();
        for m in sources {
            for (s, n) in m.iter() {
                *sum.entry(s).or_default() += n;
            }
        }
        let mut v: Vec<(StackId, u64)> = sum.into_iter().collect();
        v.sort_by_key(|&(s, n)| (std::cmp::Reverse(n), s));
        v.truncate(b.opts.stacks);
        v.into_iter()
            .map(|(s, n)| stack_info(&mut resolver, s, n))
            .collect()
    };
    let mut edges: Vec<Edge> = parts
        .iter()
        .map(|(p, members)| Edge {
            from: p.from as usize,
            to: p.to as usize,
            kind: p.kind,
            weight_ns: p.weight,
            wait_ns: p.wait,
            count: p.count,
            class_ns: p.class_ns,
            share: p.share,
            stacks: top(&mut members.iter().map(|&i| &b.edges[i].stacks)),
            waker_stacks: top(&mut members.iter().map(|&i| &b.edges[i].waker_stacks)),
            held: None,
        })
        .collect();
    edges.sort_by_key(|e| (std::cmp::Reverse(e.weight_ns), e.from, e.to));
    edges
}

/// What the reader of the graph must know about its limits.
fn notes(
    b: &Build,
    nodes: &[Node],
    edges: &[Edge],
    unnamed_disk: bool,
    damage: Option<String>,
) -> Vec<String> {
    let mut notes = Vec::new();
    if unnamed_disk {
        notes.push(
            "some block requests carried no device number: they are shown as \"disk ?\""
                .to_string(),
        );
    }
    if let Some(d) = damage {
        notes.push(d);
    }
    if b.stats.lost_events > 0 {
        notes.push(format!(
            "{} events were lost while recording: waits and weights are lower bounds",
            b.stats.lost_events
        ));
    }
    if !b.stats.dropped.is_empty() {
        let d: Vec<(&str, u64)> = b
            .stats
            .dropped
            .iter()
            .map(|(w, n)| (w.as_str(), *n))
            .collect();
        notes.push(format!(
            "the recorder dropped {}: waits and weights are lower bounds",
            holdup_trace::dropped_text(&d)
        ));
    }
    for (i, n) in nodes.iter().enumerate() {
        let into: u64 = edges
            .iter()
            .filter(|e| e.to == i)
            .map(|e| e.wait_ns)
            .fold(0, u64::saturating_add);
        if n.kind == NodeKind::Irq && n.id != "timer" && into > 0 {
            notes.push(format!(
                "{} could not be tied to a device; waits on it ({:.1} ms) are shown on an interrupt vertex",
                n.label,
                into as f64 / 1e6
            ));
        }
    }
    // Timed lock waits exist, but when most lock waits end "in timer
    // context" the recorder has lost track of interrupt context and named
    // the wrong wakers.
    if b.stats.lock_wakeups >= 20 && b.stats.lock_wakeups_by_timer * 4 > b.stats.lock_wakeups {
        notes.push(format!(
            "{} of {} lock waits were woken in timer context: unless the program uses timed waits, the recorder lost track of interrupt context and these wakers are wrong",
            b.stats.lock_wakeups_by_timer, b.stats.lock_wakeups
        ));
    }
    if b.stats.late_events > 0 {
        notes.push(format!(
            "{} events arrived out of order beyond the analysis window and were clamped",
            b.stats.late_events
        ));
    }
    if nodes.iter().any(|n| !n.recorded) {
        notes.push(
            "some wakers or I/O issuers are outside the recording (kernel threads, other processes): what they wait for is unknown; record with -a to follow them"
                .to_string(),
        );
    }
    notes
}

fn stack_info(r: &mut Resolver, id: StackId, samples: u64) -> StackInfo {
    let funcs = r.stack(id);
    let mut folded = String::new();
    for f in funcs.iter().rev() {
        if !folded.is_empty() {
            folded.push(';');
        }
        folded.extend(f.name.chars().map(|c| if c == ';' { ':' } else { c }));
        if f.kernel {
            folded.push_str("_[k]");
        }
    }
    let user: Vec<&str> = funcs
        .iter()
        .filter(|f| !f.kernel)
        .take(4)
        .map(|f| &*f.name)
        .collect();
    let reason = wait_reason(&funcs).map(|s| s.to_string());
    let short = if user.is_empty() {
        funcs
            .iter()
            .take(3)
            .map(|f| &*f.name)
            .collect::<Vec<_>>()
            .join(" ← ")
    } else {
        user.join(" ← ")
    };
    StackInfo {
        folded,
        short,
        site: crate::stacks::site(&funcs).map(|s| s.label),
        reason,
        samples,
    }
}

/// A name for a NIC from its irq name: `virtio0-input.0` → `virtio0`,
/// `eth0-TxRx-1` → `eth0`.
fn nic_name(irq_name: &str) -> Option<&str> {
    let n = irq_name.trim();
    let base = n.split(['-', ' ', '@']).next().unwrap_or(n);
    // virtio-net queues are `virtioN-input.Q` / `virtioN-output.Q`.
    let netlike = n.contains("-input.")
        || n.contains("-output.")
        || n.contains("TxRx")
        || n.contains("-rx-")
        || n.contains("-tx-");
    let prefixes = [
        "eth", "ens", "enp", "eno", "enx", "wlan", "wlp", "mlx", "ixgbe", "i40e", "ice", "igb",
        "e1000",
    ];
    (netlike || prefixes.iter().any(|p| base.starts_with(p))).then_some(base)
}
