//! One definition of the names that the causal runtime and its readers
//! share: the environment through which `holdup causal run` hands its
//! settings to the runtime, and the records and keys of COZ's profile
//! format, which the runtime writes and `holdup causal report` reads; the
//! source lines of machine code, which the runtime turns samples into and
//! `holdup causal run` finds progress points with.

pub mod experiment;
pub mod frames;
pub mod handoff;
pub mod lines;
pub mod points;
pub mod probe;
pub mod scope;

/// Environment variables set by `holdup causal run`, read by the runtime.
pub mod env {
    pub const RING_FD: &str = "HOLDUP_CAUSAL_RING_FD";
    pub const RING_BYTES: &str = "HOLDUP_CAUSAL_RING_BYTES";
    /// Pid of `holdup causal run`: only its direct child profiles itself.
    pub const PARENT: &str = "HOLDUP_CAUSAL_PARENT";
    pub const PERIOD_NS: &str = "HOLDUP_CAUSAL_PERIOD_NS";
    /// The profile, opened by `holdup causal run` (one process; `--system`
    /// processes send theirs over their socket).
    pub const OUTPUT_FD: &str = "HOLDUP_CAUSAL_OUTPUT_FD";
    pub const SCOPE: &str = "HOLDUP_CAUSAL_SCOPE";
    pub const LINE: &str = "HOLDUP_CAUSAL_LINE";
    pub const SPEEDUP: &str = "HOLDUP_CAUSAL_SPEEDUP";
    pub const SUBCLASS: &str = "HOLDUP_CAUSAL_SUBCLASS";
    /// `--process NAME`: experiments on that whole process only.
    pub const PROCESS: &str = "HOLDUP_CAUSAL_PROCESS";
    pub const END_TO_END: &str = "HOLDUP_CAUSAL_END_TO_END";
    /// Minimum experiment length in ms (tuning and tests).
    pub const EXPERIMENT_MS: &str = "HOLDUP_CAUSAL_EXPERIMENT_MS";
    pub const VERBOSE: &str = "HOLDUP_CAUSAL_VERBOSE";
    /// `--system`: the shared domain's memfd and the channel's socket
    /// (see [`crate::handoff`]), inherited by every process.
    pub const DOMAIN_FD: &str = "HOLDUP_CAUSAL_DOMAIN_FD";
    pub const CHANNEL_FD: &str = "HOLDUP_CAUSAL_CHANNEL_FD";
    /// `--system`: CLOCK_MONOTONIC ns when the domain was made. The global
    /// delay grows no faster than time passes, so a larger one is damage.
    pub const EPOCH_NS: &str = "HOLDUP_CAUSAL_EPOCH_NS";
    /// Progress points counted by uprobes: `T\tname\tfd` or
    /// `L\tname\tbegin_fd\tend_fd`, one per line.
    pub const PROBES: &str = "HOLDUP_CAUSAL_PROBES";
    pub const ALL: &[&str] = &[
        RING_FD,
        RING_BYTES,
        PARENT,
        PERIOD_NS,
        OUTPUT_FD,
        SCOPE,
        LINE,
        SPEEDUP,
        SUBCLASS,
        PROCESS,
        END_TO_END,
        EXPERIMENT_MS,
        VERBOSE,
        PROBES,
        DOMAIN_FD,
        CHANNEL_FD,
        EPOCH_NS,
    ];
}

/// Size of the memory file that holds the experiment and delay domain
/// shared by the processes of a `--system` run.
pub const DOMAIN_BYTES: usize = 16384;

/// COZ's profile: one record per line, `kind` then tab-separated
/// `key=value` fields.
pub mod profile {
    use std::fmt::{Display, Write as _};

    /// Record kinds.
    pub mod kind {
        pub const STARTUP: &str = "startup";
        pub const EXPERIMENT: &str = "experiment";
        pub const THROUGHPUT_POINT: &str = "throughput-point";
        /// COZ's older name of a throughput point.
        pub const PROGRESS_POINT: &str = "progress-point";
        pub const LATENCY_POINT: &str = "latency-point";
        pub const SAMPLES: &str = "samples";
        pub const RUNTIME: &str = "runtime";
    }

    /// Field keys.
    pub mod key {
        pub const TIME: &str = "time";
        pub const TOOL: &str = "tool";
        pub const PID: &str = "pid";
        pub const PERIOD: &str = "period";
        pub const SELECTED: &str = "selected";
        pub const SPEEDUP: &str = "speedup";
        /// Elapsed time minus the delay inserted: the virtual duration.
        pub const DURATION: &str = "duration";
        pub const SELECTED_SAMPLES: &str = "selected-samples";
        pub const ELAPSED: &str = "elapsed";
        pub const DELAY: &str = "delay";
        pub const KIND: &str = "kind";
        pub const NAME: &str = "name";
        pub const DELTA: &str = "delta";
        /// Visits between the first and the last visit seen in the
        /// experiment, and the virtual time between them.
        pub const WINDOW_DELTA: &str = "window-delta";
        pub const WINDOW_DURATION: &str = "window-duration";
        pub const ARRIVALS: &str = "arrivals";
        pub const DEPARTURES: &str = "departures";
        pub const DIFFERENCE: &str = "difference";
        pub const LOCATION: &str = "location";
        pub const COUNT: &str = "count";
        pub const PROGRESS_POINTS: &str = "progress-points";
        pub const EXPERIMENTS: &str = "experiments";
    }

    /// One record being written.
    pub struct Line(String);

    impl Line {
        pub fn new(kind: &str) -> Line {
            Line(kind.to_string())
        }

        /// Add `key=value`; separators in the value become spaces.
        pub fn field(mut self, key: &str, value: impl Display) -> Line {
            let start = self.0.len();
            let _ = write!(self.0, "\t{key}={value}");
            let value_at = start + 2 + key.len();
            if self.0[value_at..].contains(['\t', '\n']) {
                let clean = self.0[value_at..].replace(['\t', '\n'], " ");
                self.0.truncate(value_at);
                self.0.push_str(&clean);
            }
            self
        }

        /// The record with its line end.
        pub fn end(mut self) -> String {
            self.0.push('\n');
            self.0
        }
    }

    /// The kind and the `key=value` fields of a record line.
    pub fn parse_line(line: &str) -> Option<(&str, impl Iterator<Item = (&str, &str)>)> {
        let mut parts = line.split('\t');
        let kind = parts.next().filter(|k| !k.is_empty())?;
        Some((kind, parts.filter_map(|p| p.split_once('='))))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_line_reads_back_as_written() {
            let text = Line::new(kind::EXPERIMENT)
                .field(key::SELECTED, "a b.c:3\twith\ttabs")
                .field(key::SPEEDUP, format_args!("{:.2}", 0.5))
                .field(key::DURATION, 42u64)
                .end();
            assert_eq!(
                text,
                "experiment\tselected=a b.c:3 with tabs\tspeedup=0.50\tduration=42\n"
            );
            let (k, fields) = parse_line(text.trim_end()).unwrap();
            assert_eq!(k, kind::EXPERIMENT);
            let fields: Vec<_> = fields.collect();
            assert_eq!(
                fields,
                [
                    ("selected", "a b.c:3 with tabs"),
                    ("speedup", "0.50"),
                    ("duration", "42")
                ]
            );
            assert!(parse_line("").is_none());
        }
    }
}
