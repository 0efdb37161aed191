//! Sections of a report: thread profiles merged per process, per thread
//! name, or into one.

use super::*;

/// How sections of a report are formed (perf's `--sort` keys that split
/// the table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    Thread,
    Process,
    Comm,
    All,
}

/// Merge thread profiles into sections: per process, per thread name, or
/// one for everything; per thread, they stay as they are. Lifetimes add
/// up, so that samples × period still cover them.
pub fn group(threads: Vec<ThreadProfile>, by: Section) -> Vec<ThreadProfile> {
    if by == Section::Thread {
        return threads;
    }
    let mut order: Vec<String> = Vec::new();
    let mut groups: HashMap<String, Vec<&ThreadProfile>> = HashMap::new();
    for t in &threads {
        let key = match by {
            Section::Process => t.pid.to_string(),
            Section::Comm => t.comm.clone(),
            _ => String::new(),
        };
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(t);
    }
    let mut out: Vec<ThreadProfile> = order
        .into_iter()
        .map(|key| merge(&groups[&key], by))
        .collect();
    out.sort_by_key(|t| std::cmp::Reverse(t.samples.total()));
    out
}

fn merge_counted<K: Clone + Eq + std::hash::Hash>(into: &mut Vec<(K, u64)>, from: &[(K, u64)]) {
    for (k, n) in from {
        match into.iter_mut().find(|(x, _)| x == k) {
            Some(slot) => slot.1 += n,
            None => into.push((k.clone(), *n)),
        }
    }
    sort_by_weight(into);
}

fn merge(ts: &[&ThreadProfile], by: Section) -> ThreadProfile {
    let first = ts[0];
    let mut m = ThreadProfile {
        // A group of one process (or one thread) keeps its real ids; only
        // a group spanning several has none to show.
        pid: if by == Section::All || ts.iter().any(|t| t.pid != first.pid) {
            0
        } else {
            first.pid
        },
        tid: if ts.len() == 1 && first.threads == 1 {
            first.tid
        } else {
            0
        },
        comm: match by {
            Section::All => "all".to_string(),
            _ => first.comm.clone(),
        },
        lifetime_ns: 0,
        threads: 0,
        samples: ClassCounts::default(),
        lock_split: LockSplit::default(),
        idle: Idle::default(),
        functions: Vec::new(),
        rows: Vec::new(),
    };
    let mut funcs: HashMap<(String, String), usize> = HashMap::new();
    /// A row's identity across threads: tag, object, symbol (or site), lock kind.
    type MergedRow = (Tag, Rc<str>, Rc<str>, Option<LockKind>);
    let mut rows: HashMap<MergedRow, usize> = HashMap::new();
    let mut heaviest_idle = 0;
    for t in ts {
        m.lifetime_ns = m.lifetime_ns.saturating_add(t.lifetime_ns);
        m.threads += t.threads;
        m.samples.add_all(&t.samples);
        m.lock_split.add_all(&t.lock_split);
        // The why of the thread idle the longest.
        if t.idle.samples > heaviest_idle {
            heaviest_idle = t.idle.samples;
            m.idle.why = t.idle.why;
        }
        m.idle.samples += t.idle.samples;
        for f in &t.functions {
            let key = (f.dso.clone(), f.symbol.clone());
            match funcs.get(&key) {
                Some(&i) => {
                    m.functions[i].self_.add_all(&f.self_);
                    m.functions[i].total.add_all(&f.total);
                }
                None => {
                    funcs.insert(key, m.functions.len());
                    m.functions.push(f.clone());
                }
            }
        }
        for r in &t.rows {
            let key = (r.tag, r.dso.clone(), r.symbol.clone(), r.lock_kind);
            match rows.get(&key) {
                Some(&i) => {
                    let row = &mut m.rows[i];
                    row.weight += r.weight;
                    merge_counted(&mut row.wait_reasons, &r.wait_reasons);
                    merge_counted(&mut row.wakers, &r.wakers);
                }
                None => {
                    rows.insert(key, m.rows.len());
                    m.rows.push(r.clone());
                }
            }
        }
    }
    m.rows.sort_by(|a, b| {
        b.weight
            .cmp(&a.weight)
            .then_with(|| a.symbol.cmp(&b.symbol))
    });
    m.functions.sort_by(|a, b| {
        b.total
            .total()
            .cmp(&a.total.total())
            .then_with(|| a.symbol.cmp(&b.symbol))
    });
    m
}
