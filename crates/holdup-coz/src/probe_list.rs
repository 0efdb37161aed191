//! The `PROBES` variable ([`env::PROBES`](crate::env::PROBES)): which of
//! the fds a command inherits count which progress point. `holdup causal
//! run --progress/--latency` opens a counting uprobe per CPU for each place
//! and writes the list; the runtime reads it and sums the counters.
//!
//! One point a line: `T<TAB>name<TAB>fds` (throughput) or
//! `L<TAB>name<TAB>fds<TAB>fds` (latency: begin, end), where `fds` are the
//! per-CPU counters, comma-separated.

use std::os::fd::RawFd;

/// A progress point counted by uprobes, as handed over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbePoint {
    Throughput {
        name: String,
        fds: Vec<RawFd>,
    },
    Latency {
        name: String,
        begin: Vec<RawFd>,
        end: Vec<RawFd>,
    },
}

impl ProbePoint {
    /// Every counter's fd.
    pub fn fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        let (a, b): (&[RawFd], &[RawFd]) = match self {
            ProbePoint::Throughput { fds, .. } => (fds, &[]),
            ProbePoint::Latency { begin, end, .. } => (begin, end),
        };
        a.iter().chain(b).copied()
    }
}

fn fd_list(fds: &[RawFd]) -> String {
    let text: Vec<String> = fds.iter().map(RawFd::to_string).collect();
    text.join(",")
}

/// The list for the environment. A separator in a name (the user's
/// `--progress` text) becomes a space.
pub fn encode(points: &[ProbePoint]) -> String {
    let clean = |name: &str| name.replace(['\t', '\n'], " ");
    points
        .iter()
        .map(|p| match p {
            ProbePoint::Throughput { name, fds } => {
                format!("T\t{}\t{}\n", clean(name), fd_list(fds))
            }
            ProbePoint::Latency { name, begin, end } => {
                format!("L\t{}\t{}\t{}\n", clean(name), fd_list(begin), fd_list(end))
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
            let fds = |i: usize| {
                let fds: Vec<RawFd> = f
                    .get(i)?
                    .split(',')
                    .filter_map(|v| v.parse().ok())
                    .collect();
                (!fds.is_empty()).then_some(fds)
            };
            let name = f.get(1).unwrap_or(&"").to_string();
            match (f.first(), fds(2), fds(3)) {
                (Some(&"T"), Some(fds), _) => Some(ProbePoint::Throughput { name, fds }),
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
                fds: vec![10, 11],
            },
            ProbePoint::Latency {
                name: "begin_tx,end_tx".into(),
                begin: vec![12],
                end: vec![13, 14, 15],
            },
        ];
        let list = encode(&points);
        assert_eq!(
            list,
            "T\tserver:handle_request\t10,11\nL\tbegin_tx,end_tx\t12\t13,14,15\n"
        );
        assert_eq!(decode(&list), points);
        let fds: Vec<RawFd> = points.iter().flat_map(ProbePoint::fds).collect();
        assert_eq!(fds, [10, 11, 12, 13, 14, 15]);
    }

    #[test]
    fn separators_in_a_name_do_not_break_the_list() {
        let odd = [ProbePoint::Throughput {
            name: "a\tb\nc".into(),
            fds: vec![3],
        }];
        assert_eq!(
            decode(&encode(&odd)),
            [ProbePoint::Throughput {
                name: "a b c".into(),
                fds: vec![3]
            }]
        );
    }

    #[test]
    fn lines_that_are_no_point_are_passed_over() {
        let list = "X\tname\t3\nT\tnone\t\nL\tonly-begin\t4\nT\tok\t5,x,6\n\n";
        assert_eq!(
            decode(list),
            [ProbePoint::Throughput {
                name: "ok".into(),
                fds: vec![5, 6]
            }]
        );
    }
}
