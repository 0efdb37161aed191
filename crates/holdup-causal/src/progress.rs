//! Progress points with COZ's ABI.
//!
//! `coz.h` (and our `holdup.h`) look up `_coz_get_counter(type, name)` with
//! `dlsym` on the first visit of a progress point and then increment
//! `counter->count` (see [`crate::counter`]).
//!
//! Programs that cannot be rebuilt get progress points from uprobes:
//! `holdup causal run --progress` / `--latency` open a counting perf event
//! per probe and hand its fd over; reading it gives the visits so far. A
//! system call or tracepoint point is counted by a BPF program instead,
//! whose per-CPU counts the runtime maps from the fd handed over.

use crate::counter::{Counter, BEGIN, END, THROUGHPUT};
use crate::domain::{Domain, NoPoint};
use holdup_bpf::progress::MappedVisits;
use holdup_coz::probe_list::{Count as ProbeCount, ProbePoint};
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Where a point's visits are counted.
pub enum Count {
    /// By the program itself (coz.h, holdup.h).
    Memory(&'static Counter),
    /// By the kernel: counting perf events on a uprobe, one per CPU.
    Probe(Vec<i32>),
    /// By a BPF program on a system call or tracepoint, its per-CPU
    /// counts mapped here (None: the map could not be, counted as 0).
    Mapped(Option<MappedVisits>),
}

impl Count {
    pub fn load(&self) -> usize {
        match self {
            Count::Memory(c) => c.count.load(Ordering::Relaxed),
            Count::Probe(fds) => holdup_bpf::counter_total(fds.iter().copied()),
            Count::Mapped(m) => m.as_ref().map_or(0, |m| m.total() as usize),
        }
    }

    fn of(count: ProbeCount) -> Count {
        match count {
            ProbeCount::Perf(fds) => Count::Probe(fds),
            ProbeCount::Mapped(fd) => {
                // SAFETY: an fd `holdup causal run` handed over, open for
                // the process's life; only borrowed to map it.
                let fd = unsafe { BorrowedFd::borrow_raw(fd) };
                Count::Mapped(MappedVisits::map(fd).ok())
            }
        }
    }
}

pub enum Point {
    Throughput {
        name: String,
        count: Count,
    },
    Latency {
        name: String,
        begin: Count,
        end: Count,
    },
}

impl Point {
    pub fn name(&self) -> &str {
        match self {
            Point::Throughput { name, .. } | Point::Latency { name, .. } => name,
        }
    }
}

/// The counts of one point at some instant.
#[derive(Clone, Copy, Debug, Default)]
pub struct Snapshot {
    pub a: usize,
    pub b: usize,
}

impl Point {
    pub fn snapshot(&self) -> Snapshot {
        match self {
            Point::Throughput { count, .. } => Snapshot {
                a: count.load(),
                b: 0,
            },
            Point::Latency { begin, end, .. } => Snapshot {
                a: begin.load(),
                b: end.load(),
            },
        }
    }
}

pub static POINTS: Mutex<Vec<Point>> = Mutex::new(Vec::new());

/// `--system`: the domain's table of progress points, and whether it
/// stayed locked (counters are then this process's own).
#[derive(Clone, Copy)]
pub struct Shared<'a> {
    pub domain: &'static Domain,
    pub stuck: &'a AtomicBool,
}

/// The counter for progress point `name` of kind `kind`, created on first
/// use; in the domain's table when `shared`.
pub fn counter(kind: i32, name: &str, shared: Option<Shared<'_>>) -> Option<&'static Counter> {
    if !matches!(kind, THROUGHPUT | BEGIN | END) {
        return None;
    }
    // `--system`: the counter lives in the domain, so that the visits of
    // all processes add up (and a forked child keeps counting there). If
    // the domain's table cannot have it, this process counts alone rather
    // than not at all (coz.h would ask again at every visit).
    if let Some(Shared { domain: d, stuck }) = shared {
        if !stuck.load(Ordering::Acquire) {
            let shared_kind = if kind == END { BEGIN } else { kind };
            match d.point(shared_kind, name) {
                Ok(p) => return Some(if kind == END { &p.b } else { &p.a }),
                Err(NoPoint::Stuck) => stuck.store(true, Ordering::Release),
                Err(NoPoint::Full) => {}
            }
        }
    }
    let mut points = POINTS.lock().unwrap_or_else(|e| e.into_inner());
    let leak = || -> &'static Counter { Box::leak(Box::default()) };
    match kind {
        THROUGHPUT => {
            for p in points.iter() {
                if let Point::Throughput {
                    name: n,
                    count: Count::Memory(counter),
                } = p
                {
                    if n == name {
                        return Some(counter);
                    }
                }
            }
            let counter = leak();
            points.push(Point::Throughput {
                name: name.to_string(),
                count: Count::Memory(counter),
            });
            Some(counter)
        }
        BEGIN | END => {
            for p in points.iter() {
                if let Point::Latency {
                    name: n,
                    begin: Count::Memory(begin),
                    end: Count::Memory(end),
                } = p
                {
                    if n == name {
                        return Some(if kind == BEGIN { begin } else { end });
                    }
                }
            }
            let (begin, end) = (leak(), leak());
            points.push(Point::Latency {
                name: name.to_string(),
                begin: Count::Memory(begin),
                end: Count::Memory(end),
            });
            Some(if kind == BEGIN { begin } else { end })
        }
        _ => None,
    }
}

/// Add the uprobe points that `holdup causal run` opened.
pub fn add_probes(list: &[ProbePoint]) {
    let mut points = POINTS.lock().unwrap_or_else(|e| e.into_inner());
    for p in list {
        points.push(match p.clone() {
            ProbePoint::Throughput { name, count } => Point::Throughput {
                name,
                count: Count::of(count),
            },
            ProbePoint::Latency { name, begin, end } => Point::Latency {
                name,
                begin: Count::of(begin),
                end: Count::of(end),
            },
        });
    }
}

/// `--system`, in the leading process: see the progress points that any
/// process created in the domain.
pub fn follow_domain(d: &'static Domain) {
    let mut points = POINTS.lock().unwrap_or_else(|e| e.into_inner());
    for (kind, name, p) in d.points() {
        let known = points
            .iter()
            .any(|q| q.name() == name && matches!(q, Point::Latency { .. }) == (kind == BEGIN));
        if known {
            continue;
        }
        points.push(if kind == BEGIN {
            Point::Latency {
                name,
                begin: Count::Memory(&p.a),
                end: Count::Memory(&p.b),
            }
        } else {
            Point::Throughput {
                name,
                count: Count::Memory(&p.a),
            }
        });
    }
}

pub fn count() -> usize {
    POINTS.lock().map(|p| p.len()).unwrap_or(0)
}

/// Name of the progress point that `--end-to-end` adds (COZ's).
pub const END_TO_END: &str = "end-to-end";
