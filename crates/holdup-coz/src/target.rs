//! What a causal experiment speeds up, and how a profile names it.
//!
//! A profile's `selected` field is a target's name; every part of holdup
//! that writes, chooses or reads targets goes through [`Target`], so the
//! names and their kinds are told apart in one place:
//!
//! | target | name | kind |
//! | --- | --- | --- |
//! | a source line | `FILE:LINE`, or `BINARY:FILE:LINE` when several binaries take part | `line` |
//! | a function (where there is no line table, or `--granularity function`) | `BINARY:FUNCTION`, demangled without parameters | `function` |
//! | a subclass of blocked samples | `subclass:io`, `subclass:sched` | `subclass` |
//! | a whole process | `process:COMM` | `process` |
//! | a kernel function | `kernel:FUNC` | `kernel` |
//!
//! The name of a parsed target is the text it was parsed from, so a name
//! goes through [`Target::parse`] and back unchanged.

use std::fmt;

const SUBCLASS: &str = "subclass:";
const PROCESS: &str = "process:";
const KERNEL: &str = "kernel:";

/// A subclass of blocked samples (BCOZ): their whole class made faster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subclass {
    /// Blocked in I/O: a faster disk.
    Io,
    /// Waiting for a CPU: more cores.
    Sched,
}

impl Subclass {
    /// As the name of the target has it, after `subclass:`.
    pub fn as_str(self) -> &'static str {
        match self {
            Subclass::Io => "io",
            Subclass::Sched => "sched",
        }
    }

    /// `io` or `sched`.
    pub fn parse(s: &str) -> Option<Subclass> {
        match s {
            "io" => Some(Subclass::Io),
            "sched" => Some(Subclass::Sched),
            _ => None,
        }
    }
}

/// A target of experiments.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A source line. `binary` (the file name of the executable or
    /// library) names lines of several binaries apart (`--system`, `-a`,
    /// `-p`); `file` is the path the line table has, or the suffix of one
    /// that a user gave.
    Line {
        binary: Option<String>,
        file: String,
        line: u32,
    },
    /// A whole function of a binary (its file name), named as people read
    /// it (`rocksdb::LRUCacheShard::Lookup`, `compress_block`).
    Function {
        binary: String,
        function: String,
    },
    Subclass(Subclass),
    /// A whole process, by its comm: all its threads' on-CPU time (SCOZ).
    Process(String),
    /// A kernel function and what it calls (SCOZ).
    Kernel(String),
}

/// What kind of thing a target is: the `kind` field of an experiment
/// record and of `holdup.causal/1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[non_exhaustive]
pub enum Kind {
    Line,
    /// A whole function (no line table, or `--granularity function`).
    Function,
    Subclass,
    /// A whole process of a `--system`, `-a` or `-p` profile.
    Process,
    /// A kernel function of an `-a` or `-p` profile.
    Kernel,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Line => "line",
            Kind::Function => "function",
            Kind::Subclass => "subclass",
            Kind::Process => "process",
            Kind::Kernel => "kernel",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "line" => Some(Kind::Line),
            "function" => Some(Kind::Function),
            "subclass" => Some(Kind::Subclass),
            "process" => Some(Kind::Process),
            "kernel" => Some(Kind::Kernel),
            _ => None,
        }
    }

    /// The kind of the target named `name` in a record whose `kind` field
    /// is `field`. Profiles of earlier holdup versions say `line` for
    /// process and kernel targets, and COZ's say nothing: then the name
    /// tells. A kind other than `line` is taken as written.
    pub fn of_record(field: Option<&str>, name: &str) -> Kind {
        match field.and_then(Kind::parse) {
            Some(k) if k != Kind::Line => k,
            _ => Target::parse(name).map_or(Kind::Line, |t| t.kind()),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a name is no target.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadTarget {
    #[error("'{0}' is no target: a line is FILE:LINE or BINARY:FILE:LINE, a function BINARY:FUNCTION, a subclass subclass:io or subclass:sched, a process process:COMM, a kernel function kernel:FUNC")]
    Name(String),
}

impl Target {
    /// A line of `file` (of `binary`, when named).
    pub fn line(binary: Option<&str>, file: &str, line: u32) -> Target {
        Target::Line {
            binary: binary.map(str::to_string),
            file: file.to_string(),
            line,
        }
    }

    /// A target from its name (see the module's table).
    pub fn parse(name: &str) -> Result<Target, BadTarget> {
        let bad = || BadTarget::Name(name.to_string());
        if let Some(s) = name.strip_prefix(SUBCLASS) {
            return Subclass::parse(s).map(Target::Subclass).ok_or_else(bad);
        }
        for (prefix, make) in [
            (PROCESS, Target::Process as fn(String) -> Target),
            (KERNEL, Target::Kernel),
        ] {
            if let Some(s) = name.strip_prefix(prefix) {
                return (!s.is_empty()).then(|| make(s.to_string())).ok_or_else(bad);
            }
        }
        if !crate::names::is_file_line(name) {
            // BINARY:FUNCTION: the first single colon ends the binary (a
            // C++ or Rust name has `::` in it).
            let (binary, function) =
                crate::names::split_binary(name, |b| !b.contains('/')).ok_or_else(bad)?;
            if function.is_empty() {
                return Err(bad());
            }
            return Ok(Target::Function {
                binary: binary.to_string(),
                function: function.to_string(),
            });
        }
        let (head, line) = name.rsplit_once(':').ok_or_else(bad)?;
        let line: u32 = line.parse().map_err(|_| bad())?;
        // A binary is a file name: no `/`. A file's path has one, or is
        // the whole head.
        let (binary, file) = match head.split_once(':') {
            Some((bin, file)) if !bin.is_empty() && !bin.contains('/') => (Some(bin), file),
            _ => (None, head),
        };
        if file.is_empty() {
            return Err(bad());
        }
        Ok(Target::line(binary, file, line))
    }

    pub fn kind(&self) -> Kind {
        match self {
            Target::Line { .. } => Kind::Line,
            Target::Function { .. } => Kind::Function,
            Target::Subclass(_) => Kind::Subclass,
            Target::Process(_) => Kind::Process,
            Target::Kernel(_) => Kind::Kernel,
        }
    }

    /// `FILE:LINE` of a line target (without its binary).
    pub fn file_line(&self) -> Option<String> {
        match self {
            Target::Line { file, line, .. } => Some(format!("{file}:{line}")),
            _ => None,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Line {
                binary: Some(b),
                file,
                line,
            } => write!(f, "{b}:{file}:{line}"),
            Target::Line {
                binary: None,
                file,
                line,
            } => write!(f, "{file}:{line}"),
            Target::Function { binary, function } => write!(f, "{binary}:{function}"),
            Target::Subclass(s) => write!(f, "{SUBCLASS}{}", s.as_str()),
            Target::Process(p) => write!(f, "{PROCESS}{p}"),
            Target::Kernel(k) => write!(f, "{KERNEL}{k}"),
        }
    }
}

impl std::str::FromStr for Target {
    type Err = BadTarget;
    fn from_str(s: &str) -> Result<Target, BadTarget> {
        Target::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_name_parses_and_reads_back_unchanged() {
        for (name, target, kind) in [
            (
                "/src/a.c:10",
                Target::line(None, "/src/a.c", 10),
                Kind::Line,
            ),
            ("work.c:42", Target::line(None, "work.c", 42), Kind::Line),
            (
                "server:/src/server.c:42",
                Target::line(Some("server"), "/src/server.c", 42),
                Kind::Line,
            ),
            (
                "libx.so:src/x.c:7",
                Target::line(Some("libx.so"), "src/x.c", 7),
                Kind::Line,
            ),
            // A path with a colon in it is still one file.
            (
                "/src/a:b.c:3",
                Target::line(None, "/src/a:b.c", 3),
                Kind::Line,
            ),
            (
                "subclass:io",
                Target::Subclass(Subclass::Io),
                Kind::Subclass,
            ),
            (
                "librocksdb.so.8.9:rocksdb::LRUCacheShard::Lookup",
                Target::Function {
                    binary: "librocksdb.so.8.9".into(),
                    function: "rocksdb::LRUCacheShard::Lookup".into(),
                },
                Kind::Function,
            ),
            (
                "prog:work",
                Target::Function {
                    binary: "prog".into(),
                    function: "work".into(),
                },
                Kind::Function,
            ),
            (
                "subclass:sched",
                Target::Subclass(Subclass::Sched),
                Kind::Subclass,
            ),
            (
                "process:postgres",
                Target::Process("postgres".into()),
                Kind::Process,
            ),
            (
                "kernel:ext4_sync_file",
                Target::Kernel("ext4_sync_file".into()),
                Kind::Kernel,
            ),
        ] {
            let parsed = Target::parse(name).unwrap();
            assert_eq!(parsed, target, "{name}");
            assert_eq!(parsed.kind(), kind, "{name}");
            assert_eq!(parsed.to_string(), name);
            assert_eq!(Kind::parse(kind.as_str()), Some(kind));
        }
    }

    #[test]
    fn names_that_are_no_target_are_refused() {
        for name in [
            "",
            "main",
            "a.c:",
            ":10",
            "/bin/prog:work",
            "bin::10",
            "subclass:disk",
            "process:",
            "kernel:",
        ] {
            assert!(Target::parse(name).is_err(), "{name}");
        }
        let e = Target::parse("main").unwrap_err().to_string();
        assert!(e.contains("FILE:LINE") && e.contains("process:COMM"), "{e}");
    }

    #[test]
    fn a_records_kind_is_taken_unless_an_old_profile_says_line() {
        // Written by this version.
        assert_eq!(Kind::of_record(Some("kernel"), "kernel:f"), Kind::Kernel);
        assert_eq!(Kind::of_record(Some("line"), "a.c:1"), Kind::Line);
        // Earlier versions wrote `line` for processes and kernel functions.
        assert_eq!(Kind::of_record(Some("line"), "process:x"), Kind::Process);
        assert_eq!(Kind::of_record(Some("line"), "kernel:f"), Kind::Kernel);
        // COZ writes no kind.
        assert_eq!(Kind::of_record(None, "subclass:io"), Kind::Subclass);
        assert_eq!(Kind::of_record(None, "/src/a.c:1"), Kind::Line);
        // A name holdup does not know is a line, as COZ's are.
        assert_eq!(Kind::of_record(None, "<unknown>"), Kind::Line);
        assert_eq!(Kind::of_record(Some("nonsense"), "a.c:1"), Kind::Line);
    }
}
