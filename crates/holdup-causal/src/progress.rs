//! Progress points with COZ's ABI.
//!
//! `coz.h` (and our `holdup.h`) look up `_coz_get_counter(type, name)` with
//! `dlsym` on the first visit of a progress point and then increment
//! `counter->count` atomically, inline. The counter layout is COZ's:
//! `struct { size_t count; size_t backoff; }`; backoff is unused.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

pub const THROUGHPUT: i32 = 1;
pub const BEGIN: i32 = 2;
pub const END: i32 = 3;

#[repr(C)]
#[derive(Default)]
pub struct Counter {
    pub count: AtomicUsize,
    pub backoff: AtomicUsize,
}

const _: () = assert!(std::mem::size_of::<Counter>() == 2 * std::mem::size_of::<usize>());

pub enum Point {
    Throughput {
        name: String,
        counter: &'static Counter,
    },
    Latency {
        name: String,
        begin: &'static Counter,
        end: &'static Counter,
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
            Point::Throughput { counter, .. } => Snapshot {
                a: counter.count.load(Ordering::Relaxed),
                b: 0,
            },
            Point::Latency { begin, end, .. } => Snapshot {
                a: begin.count.load(Ordering::Relaxed),
                b: end.count.load(Ordering::Relaxed),
            },
        }
    }
}

pub static POINTS: Mutex<Vec<Point>> = Mutex::new(Vec::new());

/// The counter for progress point `name` of kind `kind`, created on first use.
pub fn counter(kind: i32, name: &str) -> Option<&'static Counter> {
    let mut points = POINTS.lock().unwrap_or_else(|e| e.into_inner());
    let leak = || -> &'static Counter { Box::leak(Box::default()) };
    match kind {
        THROUGHPUT => {
            for p in points.iter() {
                if let Point::Throughput { name: n, counter } = p {
                    if n == name {
                        return Some(counter);
                    }
                }
            }
            let counter = leak();
            points.push(Point::Throughput {
                name: name.to_string(),
                counter,
            });
            Some(counter)
        }
        BEGIN | END => {
            for p in points.iter() {
                if let Point::Latency {
                    name: n,
                    begin,
                    end,
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
                begin,
                end,
            });
            Some(if kind == BEGIN { begin } else { end })
        }
        _ => None,
    }
}

pub fn count() -> usize {
    POINTS.lock().map(|p| p.len()).unwrap_or(0)
}

/// Name of the progress point that `--end-to-end` adds (COZ's).
pub const END_TO_END: &str = "end-to-end";
