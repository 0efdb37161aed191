//! The `PROBES` variable ([`env::PROBES`](crate::env::PROBES)): which of
//! the fds a command inherits count which progress point. `holdup causal
//! run --progress/--latency` opens the counters of each place and writes
//! the list; the runtime reads it and sums the counters.
//!
//! One point a line: `T<TAB>name<TAB>count` (throughput) or
//! `L<TAB>name<TAB>count<TAB>count` (latency: begin, end), where a `count`
//! is the per-CPU counting uprobes' fds, comma-separated, or `m` and the fd
//! of the mapped visits of a point counted in BPF (`m12`).

use std::os::fd::RawFd;

/// Where a place's visits are counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Count {
    /// Counting perf events on a uprobe, one per CPU.
    Perf(Vec<RawFd>),
    /// A BPF object's mapped per-CPU visits (`holdup_bpf::progress`).
    Mapped(RawFd),
}

impl Count {
    fn fds(&self) -> &[RawFd] {
        match self {
            Count::Perf(fds) => fds,
            Count::Mapped(fd) => std::slice::from_ref(fd),
        }
    }

    fn encode(&self) -> String {
        match self {
            Count::Perf(fds) => {
                let text: Vec<String> = fds.iter().map(RawFd::to_string).collect();
                text.join(",")
            }
            Count::Mapped(fd) => format!("m{fd}"),
        }
    }

    fn decode(text: &str) -> Option<Count> {
        if let Some(fd) = text.strip_prefix('m') {
            return fd.parse().ok().map(Count::Mapped);
        }
        let fds: Vec<RawFd> = text.split(',').filter_map(|v| v.parse().ok()).collect();
        (!fds.is_empty()).then_some(Count::Perf(fds))
    }
}

/// A progress point counted outside the program, as handed over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbePoint {
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

impl ProbePoint {
    /// Every counter's fd.
    pub fn fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        let (a, b): (&[RawFd], &[RawFd]) = match self {
            ProbePoint::Throughput { count, .. } => (count.fds(), &[]),
            ProbePoint::Latency { begin, end, .. } => (begin.fds(), end.fds()),
        };
        a.iter().chain(b).copied()
    }
}

/// The list for the environment. A separator in a name (the user's
/// `--progress` text) becomes a space.
pub fn encode(points: &[ProbePoint]) -> String {
    let clean = |name: &str| name.replace(['\t', '\n'], " ");
    points
        .iter()
        .map(|p| match p {
            ProbePoint::Throughput { name, count } => {
                format!("T\t{}\t{}\n", clean(name), count.encode())
            }
            ProbePoint::Latency { name, begin, end } => {
                format!("L\t{}\t{}\t{}\n", clean(name), begin.encode(), end.encode())
            }
        })
        .collect()
}

/// The points of a list; a line that is none (no fds, an unknown kind) is
/// passed over.
pub fn decode(list: &str) -> Vec<ProbePoint> {
    list.lines()
        .filter_map(|entry| {
            let f: Vec<&str> = entry.split('\t').collect();
            let count = |i: usize| Count::decode(f.get(i)?);
            let name = f.get(1).unwrap_or(&"").to_string();
            match (f.first(), count(2), count(3)) {
                (Some(&"T"), Some(count), _) => Some(ProbePoint::Throughput { name, count }),
                (Some(&"L"), Some(begin), Some(end)) => {
                    Some(ProbePoint::Latency { name, begin, end })
                }
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_reads_back_as_written() {
        let points = vec![
            ProbePoint::Throughput {
                name: "server:handle_request".into(),
                count: Count::Perf(vec![10, 11]),
            },
            ProbePoint::Latency {
                name: "begin_tx,end_tx".into(),
                begin: Count::Perf(vec![12]),
                end: Count::Perf(vec![13, 14, 15]),
            },
            ProbePoint::Throughput {
                name: "syscall:pwrite64".into(),
                count: Count::Mapped(16),
            },
        ];
        let list = encode(&points);
        assert_eq!(
            list,
            "T\tserver:handle_request\t10,11\nL\tbegin_tx,end_tx\t12\t13,14,15\nT\tsyscall:pwrite64\tm16\n"
        );
        assert_eq!(decode(&list), points);
        let fds: Vec<RawFd> = points.iter().flat_map(ProbePoint::fds).collect();
        assert_eq!(fds, [10, 11, 12, 13, 14, 15, 16]);
    }

    #[test]
    fn separators_in_a_name_do_not_break_the_list() {
        let odd = [ProbePoint::Throughput {
            name: "a\tb\nc".into(),
            count: Count::Perf(vec![3]),
        }];
        assert_eq!(
            decode(&encode(&odd)),
            [ProbePoint::Throughput {
                name: "a b c".into(),
                count: Count::Perf(vec![3])
            }]
        );
    }

    #[test]
    fn lines_that_are_no_point_are_passed_over() {
        let list = "X\tname\t3\nT\tnone\t\nL\tonly-begin\t4\nT\tok\t5,x,6\nT\tbad\tmx\n\n";
        assert_eq!(
            decode(list),
            [ProbePoint::Throughput {
                name: "ok".into(),
                count: Count::Perf(vec![5, 6])
            }]
        );
    }
}
