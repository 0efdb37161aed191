//! Names of generated code: what JIT compilers and interpreters write about
//! the code they put in anonymous executable memory, per process.
//!
//! Two sources, as perf reads them: the perf map `/tmp/perf-PID.map`
//! ([`crate::perfmap`]) and jitdump files ([`crate::jitdump`]), which a
//! runtime announces by mapping the file executable (the marker mapping
//! `perf inject --jit` looks for: `jit-PID.dump`). Both grow while the
//! program runs, may be rewritten (`jcmd PID Compiler.perfmap`), or be
//! written only at exit (HotSpot's `-XX:+DumpPerfMapAtExit`): they are read
//! from where the last read stopped, while recording and once more at the
//! end, and what was read is kept when a file vanishes.
//!
//! The files are written by the traced program's owner and read by root,
//! so a file is read only if it is a regular file (no link followed, no
//! blocking: `traced::open`), owned by the process's user (perf's rule),
//! and not older than the process (a map left by an earlier process of the
//! same pid); at most [`MAX_FILE_BYTES`] of it. Lines and records that are
//! malformed or cut short are skipped and counted.
//!
//! Only processes whose samples hit generated code are read: a process
//! without it costs nothing.

use crate::jitdump::{self, Event, LineEntry};
use crate::{perfmap, traced, Frame};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::Arc;

/// The most read of one file in a recording (a Node server's perf map
/// grows by every function it compiles).
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// Read at most this much at a time.
const CHUNK: u64 = 16 << 20;

/// Bytes compared to tell a file that grew from one written again.
const TAIL: usize = 64;

/// A mapping without a file, where generated code lives: `//anon` as the
/// kernel's mmap events name it, `[anon:NAME]` for a named one.
pub fn is_anonymous(path: &str) -> bool {
    path == "//anon" || path.starts_with("[anon:") || path == "/anon_hugepage"
}

/// The pid in the name of a jitdump marker mapping, `jit-PID.dump` (the
/// writer's pid in its own namespace).
fn jitdump_pid(path: &str) -> Option<u32> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let pid = name.strip_prefix("jit-")?.strip_suffix(".dump")?;
    pid.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| pid.parse().ok())?
}

/// The runtime a process runs, from the files it maps; it says which flag
/// makes it write the names of its code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    Java,
    Node,
    /// CPython 3.minor.
    Python(u32),
    Dotnet,
    Unknown,
}

impl Runtime {
    /// Which runtime the mapped files `paths` belong to.
    pub fn detect<'a>(paths: impl IntoIterator<Item = &'a str>) -> Runtime {
        let python = |name: &str| -> Option<u32> {
            let v = name
                .strip_prefix("libpython3.")
                .or_else(|| name.strip_prefix("python3."))?;
            let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        };
        for path in paths {
            let name = path.rsplit('/').next().unwrap_or(path);
            if name.starts_with("libjvm.so") {
                return Runtime::Java;
            }
            if name.starts_with("libcoreclr.so") {
                return Runtime::Dotnet;
            }
            if name == "node" || name.starts_with("libnode.so") {
                return Runtime::Node;
            }
            if let Some(minor) = python(name) {
                return Runtime::Python(minor);
            }
        }
        Runtime::Unknown
    }

    /// What makes this runtime name its generated code.
    pub fn hint(self, pid: u32) -> String {
        match self {
            Runtime::Java => format!(
                "run java with -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit (and -XX:+PreserveFramePointer for whole stacks), or `jcmd {pid} Compiler.perfmap` while it runs"
            ),
            Runtime::Node => "run node with --perf-basic-prof (or --perf-prof; add --interpreted-frames-native-stack for interpreted functions)".into(),
            Runtime::Python(m) if m >= 12 => format!(
                "run python3.{m} with -X perf (or PYTHONPERFSUPPORT=1{})",
                if m >= 13 { "; -X perf_jit writes a jitdump" } else { "" }
            ),
            Runtime::Python(m) => format!(
                "python3.{m} cannot name its frames for profilers (3.12 and later: -X perf)"
            ),
            Runtime::Dotnet => "set DOTNET_PerfMapEnabled=1 in its environment".into(),
            Runtime::Unknown => format!(
                "make its runtime write /tmp/perf-{pid}.map or a jitdump (perf's JIT interface)"
            ),
        }
    }

    fn name(self) -> String {
        match self {
            Runtime::Java => "java".into(),
            Runtime::Node => "node".into(),
            Runtime::Python(m) => format!("python3.{m}"),
            Runtime::Dotnet => "dotnet".into(),
            Runtime::Unknown => "its runtime".into(),
        }
    }
}

/// Who may write a process's maps, and since when.
#[derive(Clone, Debug)]
struct Owner {
    /// Effective and file-system uid.
    uids: [u32; 2],
    /// Start of the process, seconds since the epoch.
    started: i64,
    /// The pid in the process's own namespace (its file names use it).
    nspid: u32,
    /// `/proc/PID/root` when the process lives in another mount namespace
    /// (its /tmp is not ours), else empty.
    root: String,
}

impl Owner {
    /// The owner of a live process, from /proc.
    fn of(pid: u32) -> Option<Owner> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let field = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map(|v| v.split_whitespace().collect::<Vec<_>>())
        };
        let uids = field("Uid:")?;
        let uid = |i: usize| uids.get(i)?.parse::<u32>().ok();
        let nspid = field("NSpid:")
            .and_then(|v| v.last()?.parse().ok())
            .unwrap_or(pid);
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Field 22 (starttime, clock ticks after boot), counted after the
        // command name's closing parenthesis (field 2).
        let ticks: u64 = stat
            .rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(19)?
            .parse()
            .ok()?;
        let boot: i64 = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime "))?
            .trim()
            .parse()
            .ok()?;
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        let ns = |p: String| std::fs::read_link(p).ok();
        let same_ns = ns(format!("/proc/{pid}/ns/mnt")) == ns("/proc/self/ns/mnt".into());
        Some(Owner {
            uids: [uid(1)?, uid(3)?],
            started: boot + (ticks / hz) as i64,
            nspid,
            root: if same_ns {
                String::new()
            } else {
                format!("/proc/{pid}/root")
            },
        })
    }

    /// Why a file this process may have written is not to be trusted.
    fn refuses(&self, md: &std::fs::Metadata) -> Option<String> {
        if !self.uids.contains(&md.uid()) {
            return Some(format!(
                "owned by uid {}, not by the process's uid {}",
                md.uid(),
                self.uids[0]
            ));
        }
        // btime and starttime are whole seconds: a second of slack each.
        if md.mtime() < self.started - 2 {
            return Some("older than the process (left by an earlier process of its pid)".into());
        }
        None
    }
}

/// A source line of a piece of code: (offset from the code's start,
/// file, line).
type CodeLine = (u64, Arc<str>, u32);

/// A piece of code: where it ends, its name, and its lines if a jitdump
/// gave them.
#[derive(Clone, Debug)]
struct Code {
    end: u64,
    name: Arc<str>,
    lines: Option<Arc<[CodeLine]>>,
}

/// The code of one process: non-overlapping ranges; code written later
/// replaces what it overlaps (an address reused after code was freed is
/// named by the code written last).
#[derive(Debug, Default)]
struct Table {
    by_start: BTreeMap<u64, Code>,
    strings: HashSet<Arc<str>>,
}

impl Table {
    fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(k) = self.strings.get(s) {
            return k.clone();
        }
        let k: Arc<str> = Arc::from(s);
        self.strings.insert(k.clone());
        k
    }

    fn insert(&mut self, start: u64, code: Code) {
        let end = code.end;
        // A range that begins before `start` and reaches into it keeps its
        // head, and its tail past `end`.
        let before = self.by_start.range_mut(..start).next_back();
        if let Some((_, old)) = before.filter(|(_, old)| old.end > start) {
            let tail = (old.end > end).then(|| old.clone());
            old.end = start;
            if let Some(tail) = tail {
                self.by_start.insert(end, tail);
            }
        }
        let inside: Vec<u64> = self.by_start.range(start..end).map(|(&s, _)| s).collect();
        for s in inside {
            let old = self.by_start.remove(&s).unwrap();
            if old.end > end {
                self.by_start.insert(end, old);
            }
        }
        self.by_start.insert(start, code);
    }

    fn find(&self, addr: u64) -> Option<(u64, &Code)> {
        let (&start, code) = self.by_start.range(..=addr).next_back()?;
        (addr < code.end).then_some((start, code))
    }

    /// Code moved by a collector: the same name and lines at `to`.
    fn moved(&mut self, from: u64, to: u64, size: u64) {
        if let Some(code) = self.by_start.get(&from).cloned() {
            if from.checked_add(size) == Some(code.end) {
                self.by_start.remove(&from);
            }
            self.insert(
                to,
                Code {
                    end: to + size,
                    ..code
                },
            );
        }
    }

    fn len(&self) -> usize {
        self.by_start.len()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    PerfMap,
    JitDump,
}

/// One file of a process, read on from where the last read stopped.
#[derive(Debug)]
struct Source {
    kind: Kind,
    /// The path as the process sees it (without its root prefix).
    path: String,
    /// (device, inode) of the file read so far: another one is a rewrite.
    identity: Option<(u64, u64)>,
    /// Bytes taken (whole lines or records).
    consumed: u64,
    /// The last bytes taken, to tell a rewrite from growth.
    tail: Vec<u8>,
    /// Bytes read in all, rewrites included.
    read: u64,
    /// The file ended in a line or record still being written.
    partial: bool,
    skipping: bool,
    header: Option<jitdump::Header>,
    ended: bool,
    /// Lines of code whose load has not come yet, by code address.
    pending_lines: HashMap<u64, Vec<LineEntry>>,
    refused: Option<String>,
}

impl Source {
    fn new(kind: Kind, path: String) -> Self {
        Self {
            kind,
            path,
            identity: None,
            consumed: 0,
            tail: Vec::new(),
            read: 0,
            partial: false,
            skipping: false,
            header: None,
            ended: false,
            pending_lines: HashMap::new(),
            refused: None,
        }
    }

    /// Read what the file has gained since the last time into `table`.
    fn refresh(&mut self, owner: &Owner, table: &mut Table, stats: &mut JitStats) {
        let path = PathBuf::from(format!("{}{}", owner.root, self.path));
        let (file, md) = match traced::open(&path) {
            Ok(f) => f,
            Err(e) if traced::is_refusal(&e) => {
                self.refused.get_or_insert(e.to_string());
                return;
            }
            // Gone (or not written yet): what was read stays.
            Err(_) => return,
        };
        if let Some(why) = owner.refuses(&md) {
            self.refused.get_or_insert(why);
            return;
        }
        let identity = (md.dev(), md.ino());
        if self.identity != Some(identity) || self.rewritten(&file, md.len()) {
            // A new file, or rewritten from the start: read it again; its
            // entries replace the old ones where they overlap.
            if self.identity.is_none() {
                stats.files += 1;
            }
            self.identity = Some(identity);
            self.consumed = 0;
            self.tail.clear();
            self.skipping = false;
            self.header = None;
            self.ended = false;
            self.pending_lines.clear();
        }
        let before = table.len();
        let mut capped = false;
        while !self.ended && self.consumed < md.len() {
            let want = (md.len() - self.consumed).min(CHUNK);
            if self.read + want > MAX_FILE_BYTES {
                self.refused
                    .get_or_insert(format!("read only its first {} MiB", MAX_FILE_BYTES >> 20));
                capped = true;
                break;
            }
            let Some(bytes) = read_at(&file, self.consumed, want).filter(|b| !b.is_empty()) else {
                break;
            };
            self.read += bytes.len() as u64;
            stats.bytes += bytes.len() as u64;
            let (consumed, malformed) = self.take(&bytes, table);
            stats.malformed += malformed;
            self.consumed += consumed as u64;
            if consumed == 0 {
                break; // only a line or record still being written
            }
            self.tail = bytes[consumed - consumed.min(TAIL)..consumed].to_vec();
        }
        self.partial = !self.ended && !capped && self.consumed < md.len();
        stats.entries += table.len().saturating_sub(before) as u64;
    }

    /// Whether the bytes before where the last read stopped changed: the
    /// file was written again from its start (and is no shorter).
    fn rewritten(&self, file: &File, len: u64) -> bool {
        if len < self.consumed {
            return true;
        }
        let at = self.consumed - self.tail.len() as u64;
        read_at(file, at, self.tail.len() as u64).as_deref() != Some(&self.tail[..])
    }

    /// Take the whole lines or records at the start of `bytes` into
    /// `table`: how many bytes they were, and how many were malformed. What
    /// is left is a line or record still being written.
    fn take(&mut self, bytes: &[u8], table: &mut Table) -> (usize, u64) {
        let (mut at, mut malformed) = (0, 0);
        while at < bytes.len() && !self.ended {
            let (consumed, bad) = match self.kind {
                Kind::PerfMap => self.perf_map(&bytes[at..], table),
                Kind::JitDump => self.jitdump(&bytes[at..], table),
            };
            malformed += bad;
            if consumed == 0 {
                break;
            }
            at += consumed;
        }
        (at, malformed)
    }

    fn perf_map(&mut self, bytes: &[u8], table: &mut Table) -> (usize, u64) {
        let p = perfmap::parse(bytes, &mut self.skipping, |e| {
            let name = table.intern(&e.name);
            table.insert(
                e.start,
                Code {
                    end: e.start + e.size,
                    name,
                    lines: None,
                },
            );
        });
        (p.consumed, p.malformed)
    }

    fn jitdump(&mut self, bytes: &[u8], table: &mut Table) -> (usize, u64) {
        let mut taken = 0;
        let header = match self.header {
            Some(h) => h,
            None => match jitdump::parse_header(bytes) {
                Ok(h) if bytes.len() >= h.size => {
                    self.header = Some(h);
                    taken = h.size;
                    h
                }
                Ok(_) | Err(jitdump::HeaderError::Short) => return (0, 0),
                Err(e) => {
                    self.refused.get_or_insert(e.to_string());
                    self.ended = true;
                    return (0, 0);
                }
            },
        };
        let pending = &mut self.pending_lines;
        let p = jitdump::parse(&header, &bytes[taken..], |event| match event {
            Event::Lines { code_addr, entries } => {
                pending.insert(code_addr, entries);
            }
            Event::Load { addr, size, name } => {
                let lines = pending.remove(&addr).map(|entries| {
                    entries
                        .iter()
                        .map(|e| {
                            // Absolute addresses (V8, CPython); a writer
                            // that gives offsets is taken at its word.
                            let offset = e.addr.checked_sub(addr).unwrap_or(e.addr);
                            (offset, table.intern(&e.file), e.line)
                        })
                        .collect::<Vec<_>>()
                        .into()
                });
                let name = table.intern(&name);
                table.insert(
                    addr,
                    Code {
                        end: addr + size,
                        name,
                        lines,
                    },
                );
            }
            Event::Move { from, to, size } => table.moved(from, to, size),
        });
        self.ended |= p.ended;
        (taken + p.consumed, p.malformed)
    }
}

/// `len` bytes of `file` from `offset`, or fewer if it shrank meanwhile.
fn read_at(file: &File, offset: u64, len: u64) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len as usize];
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    buf.truncate(done);
    Some(buf)
}

/// What was read of the maps of all processes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JitStats {
    /// Files read (perf maps and jitdumps).
    pub files: u64,
    /// Pieces of code named.
    pub entries: u64,
    /// Lines or records skipped: malformed, or cut short at the end.
    pub malformed: u64,
    pub bytes: u64,
}

#[derive(Debug)]
struct Process {
    owner: Option<Owner>,
    runtime: Runtime,
    sources: Vec<Source>,
    table: Table,
    /// Samples hit its generated code: its files are read.
    wanted: bool,
    /// Distinct addresses of generated code asked for, and named.
    asked: u64,
    named: u64,
}

/// The generated code of every process that has some.
#[derive(Debug, Default)]
pub struct JitMaps {
    procs: HashMap<u32, Process>,
    pub stats: JitStats,
}

impl JitMaps {
    pub fn new() -> Self {
        Self::default()
    }

    fn process(&mut self, pid: u32) -> &mut Process {
        self.procs.entry(pid).or_insert_with(|| {
            let owner = Owner::of(pid);
            let nspid = owner.as_ref().map_or(pid, |o| o.nspid);
            Process {
                owner,
                runtime: Runtime::Unknown,
                sources: vec![Source::new(Kind::PerfMap, format!("/tmp/perf-{nspid}.map"))],
                table: Table::default(),
                wanted: false,
                asked: 0,
                named: 0,
            }
        })
    }

    /// A new executable mapping of `pid`, as the kernel reported it. An
    /// anonymous one may hold generated code, and a jitdump file's is the
    /// runtime's sign that it writes one: the process's owner is taken
    /// now, while it lives.
    pub fn mapped(&mut self, pid: u32, path: &str) {
        if is_anonymous(path) {
            self.process(pid);
            return;
        }
        // Most mappings are libraries: only a jitdump's name costs more.
        let Some(named) = jitdump_pid(path) else {
            return;
        };
        let p = self.process(pid);
        let nspid = p.owner.as_ref().map_or(pid, |o| o.nspid);
        if named == nspid && !p.sources.iter().any(|s| s.path == path) {
            p.sources.push(Source::new(Kind::JitDump, path.to_string()));
        }
    }

    /// `pid` replaced its image: its old code and files are gone.
    pub fn exec(&mut self, pid: u32) {
        self.procs.remove(&pid);
    }

    /// Samples of `pid` hit its generated code; `paths` are the files it
    /// maps (to tell its runtime).
    pub fn want<'a>(&mut self, pid: u32, paths: impl IntoIterator<Item = &'a str>) {
        let p = self.process(pid);
        p.wanted = true;
        if p.runtime == Runtime::Unknown {
            p.runtime = Runtime::detect(paths);
        }
    }

    /// Read what the maps of the processes whose code was hit have gained.
    pub fn refresh(&mut self) {
        for p in self.procs.values_mut().filter(|p| p.wanted) {
            let Some(owner) = &p.owner else { continue };
            for s in &mut p.sources {
                s.refresh(owner, &mut p.table, &mut self.stats);
            }
        }
    }

    /// The last read, once the processes ended (HotSpot writes its map at
    /// exit): a line or record still cut short now never ends.
    pub fn finish(&mut self) {
        self.refresh();
        for p in self.procs.values_mut() {
            for s in &mut p.sources {
                if s.partial {
                    self.stats.malformed += 1;
                    s.partial = false;
                }
            }
        }
    }

    /// The frames at addresses of `pid`'s generated code (empty: unknown).
    pub fn symbolize(&mut self, pid: u32, addrs: &[u64]) -> Vec<Vec<Frame>> {
        let Some(p) = self.procs.get_mut(&pid) else {
            return vec![Vec::new(); addrs.len()];
        };
        let out: Vec<Vec<Frame>> = addrs.iter().map(|&a| frame(&p.table, a)).collect();
        p.asked += addrs.len() as u64;
        p.named += out.iter().filter(|f| !f.is_empty()).count() as u64;
        out
    }

    /// What the user should know, one line per process at most: generated
    /// code that no file names (with the flag that makes its runtime write
    /// one), and files that were refused.
    pub fn notes(&self) -> Vec<String> {
        let mut pids: Vec<&u32> = self.procs.keys().collect();
        pids.sort();
        let mut out = Vec::new();
        for pid in pids {
            let p = &self.procs[pid];
            if !p.wanted {
                continue;
            }
            let refused: Vec<String> = p
                .sources
                .iter()
                .filter_map(|s| Some(format!("{} ({})", s.path, s.refused.as_ref()?)))
                .collect();
            if !refused.is_empty() {
                out.push(format!(
                    "process {pid}: did not read {}",
                    refused.join(", ")
                ));
            }
            if p.owner.is_none() {
                out.push(format!(
                    "process {pid} ran generated code but ended before its maps could be checked; its frames have no names"
                ));
            } else if p.named == 0 && p.asked > 0 {
                out.push(format!(
                    "process {pid} ({}) ran generated code that no perf map or jitdump names ({} addresses): {}",
                    p.runtime.name(),
                    p.asked,
                    p.runtime.hint(*pid)
                ));
            }
        }
        out
    }
}

/// The frames that the perf map (or, with `jitdump`, the jitdump file)
/// `bytes` gives `addrs`, read as a recording reads a file that has
/// stopped growing: for fuzzing.
pub fn frames_in(jitdump: bool, bytes: &[u8], addrs: &[u64]) -> Vec<Vec<Frame>> {
    let kind = if jitdump {
        Kind::JitDump
    } else {
        Kind::PerfMap
    };
    let mut source = Source::new(kind, String::new());
    let mut table = Table::default();
    source.take(bytes, &mut table);
    addrs.iter().map(|&a| frame(&table, a)).collect()
}

/// The frames of one address: the function, with the line a jitdump gave.
fn frame(table: &Table, addr: u64) -> Vec<Frame> {
    let Some((start, code)) = table.find(addr) else {
        return Vec::new();
    };
    let line = code.lines.as_ref().and_then(|lines| {
        let offset = addr - start;
        let i = lines.partition_point(|l| l.0 <= offset);
        lines.get(i.checked_sub(1)?)
    });
    vec![Frame {
        function: Some(code.name.to_string()),
        file: line.map(|l| l.1.to_string()),
        line: line.map(|l| l.2),
        inlined: false,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jitdump::tests::Writer;

    fn code(end: u64, name: &str) -> Code {
        Code {
            end,
            name: name.into(),
            lines: None,
        }
    }

    fn names(t: &Table) -> Vec<(u64, u64, String)> {
        t.by_start
            .iter()
            .map(|(&s, c)| (s, c.end, c.name.to_string()))
            .collect()
    }

    #[test]
    fn code_written_later_replaces_what_it_overlaps() {
        let mut t = Table::default();
        t.insert(0x100, code(0x200, "a"));
        t.insert(0x300, code(0x400, "b"));
        t.insert(0x180, code(0x340, "c"));
        assert_eq!(
            names(&t),
            [
                (0x100, 0x180, "a".into()),
                (0x180, 0x340, "c".into()),
                (0x340, 0x400, "b".into())
            ]
        );
        // Inside one range: it is split around the new one.
        t.insert(0x200, code(0x210, "d"));
        assert_eq!(t.find(0x1ff).unwrap().1.name.as_ref(), "c");
        assert_eq!(t.find(0x200).unwrap().1.name.as_ref(), "d");
        assert_eq!(t.find(0x210).unwrap().1.name.as_ref(), "c");
        assert!(t.find(0x400).is_none() && t.find(0xff).is_none());
        // The same range again: the newer name.
        t.insert(0x340, code(0x400, "e"));
        assert_eq!(t.find(0x3ff).unwrap().1.name.as_ref(), "e");
        t.moved(0x340, 0x1000, 0xc0);
        assert!(t.find(0x350).is_none());
        assert_eq!(t.find(0x10bf).unwrap().1.name.as_ref(), "e");
    }

    #[test]
    fn runtimes_and_their_flags() {
        let java = [
            "/usr/bin/java",
            "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so",
        ];
        assert_eq!(Runtime::detect(java), Runtime::Java);
        assert!(Runtime::Java.hint(7).contains("-XX:+DumpPerfMapAtExit"));
        assert!(Runtime::Java.hint(7).contains("jcmd 7 Compiler.perfmap"));
        assert_eq!(Runtime::detect(["/usr/bin/node"]), Runtime::Node);
        assert!(Runtime::Node.hint(1).contains("--perf-basic-prof"));
        let py = ["/root/.pyenv/versions/3.12.1/bin/python3.12"];
        assert_eq!(Runtime::detect(py), Runtime::Python(12));
        assert!(Runtime::Python(12).hint(1).contains("-X perf"));
        assert!(Runtime::Python(13).hint(1).contains("-X perf_jit"));
        assert!(Runtime::Python(11).hint(1).contains("cannot"));
        let lib = ["/usr/lib/x86_64-linux-gnu/libpython3.13.so.1.0"];
        assert_eq!(Runtime::detect(lib), Runtime::Python(13));
        let dotnet = ["/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.0/libcoreclr.so"];
        assert_eq!(Runtime::detect(dotnet), Runtime::Dotnet);
        assert!(Runtime::Dotnet.hint(1).contains("DOTNET_PerfMapEnabled=1"));
        assert_eq!(Runtime::detect(["/usr/bin/prog"]), Runtime::Unknown);
    }

    #[test]
    fn jitdump_markers_by_name() {
        assert_eq!(jitdump_pid("/tmp/jit-42.dump"), Some(42));
        assert_eq!(jitdump_pid("/home/u/.debug/jit/x/jit-42.dump"), Some(42));
        assert_eq!(jitdump_pid("/tmp/jit-42.dump.old"), None);
        assert_eq!(jitdump_pid("/tmp/jit-+42.dump"), None);
        assert_eq!(jitdump_pid("/usr/lib/libc.so.6"), None);
        assert!(is_anonymous("//anon") && is_anonymous("[anon:v8]"));
        assert!(!is_anonymous("/usr/lib/libc.so.6"));
    }

    fn own_process(sources: Vec<Source>) -> (Process, Owner) {
        let owner = Owner::of(std::process::id()).unwrap();
        let p = Process {
            owner: Some(owner.clone()),
            runtime: Runtime::Unknown,
            sources,
            table: Table::default(),
            wanted: true,
            asked: 0,
            named: 0,
        };
        (p, owner)
    }

    fn refresh(p: &mut Process, owner: &Owner, stats: &mut JitStats) {
        for s in &mut p.sources {
            s.refresh(owner, &mut p.table, stats);
        }
    }

    #[test]
    fn a_growing_rewritten_and_vanished_perf_map() {
        let dir = holdup_testkit::scratch("jit-perfmap");
        let path = dir.join("perf-1.map");
        let source = Source::new(Kind::PerfMap, path.to_str().unwrap().into());
        let (mut p, owner) = own_process(vec![source]);
        let mut stats = JitStats::default();
        std::fs::write(&path, "1000 100 first\nnot a line\n2000 10").unwrap();
        refresh(&mut p, &owner, &mut stats);
        assert_eq!((stats.entries, stats.malformed), (1, 1));
        assert!(p.sources[0].partial);
        // It grows: only the new bytes are read, the half line completed.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"0 second\n").unwrap();
        let before = stats.bytes;
        refresh(&mut p, &owner, &mut stats);
        assert_eq!(stats.entries, 2);
        assert_eq!(stats.bytes - before, "2000 100 second\n".len() as u64);
        assert_eq!(
            frame(&p.table, 0x20ff)[0].function.as_deref(),
            Some("second")
        );
        // Rewritten shorter (jcmd Compiler.perfmap): read again, the new
        // name wins where they overlap, the rest stays.
        std::fs::write(&path, "1000 100 first again\n").unwrap();
        refresh(&mut p, &owner, &mut stats);
        assert_eq!(
            frame(&p.table, 0x1000)[0].function.as_deref(),
            Some("first again")
        );
        assert_eq!(
            frame(&p.table, 0x2000)[0].function.as_deref(),
            Some("second")
        );
        // Gone: what was read stays.
        std::fs::remove_file(&path).unwrap();
        refresh(&mut p, &owner, &mut stats);
        assert_eq!(
            frame(&p.table, 0x1000)[0].function.as_deref(),
            Some("first again")
        );
        assert!(p.sources[0].refused.is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn links_fifos_strangers_and_stale_maps_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = holdup_testkit::scratch("jit-refused");
        let real = dir.join("real.map");
        std::fs::write(&real, "1000 100 planted\n").unwrap();
        let link = dir.join("perf-1.map");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let fifo = dir.join("perf-2.map");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let sources = [&link, &fifo, &real]
            .iter()
            .map(|p| Source::new(Kind::PerfMap, p.to_str().unwrap().into()))
            .collect();
        let (mut p, mut owner) = own_process(sources);
        // Someone else's file: the process's uid is made another one.
        owner.uids = [owner.uids[0] + 1; 2];
        let mut stats = JitStats::default();
        refresh(&mut p, &owner, &mut stats);
        assert_eq!(stats.entries, 0);
        let why: Vec<&str> = p
            .sources
            .iter()
            .map(|s| s.refused.as_deref().unwrap())
            .collect();
        assert!(why[0].contains("symbolic link"), "{why:?}");
        assert!(why[1].contains("FIFO"), "{why:?}");
        assert!(why[2].contains("owned by uid"), "{why:?}");
        // A map older than the process: left by another of the same pid.
        let (mut p, mut owner) = own_process(vec![Source::new(
            Kind::PerfMap,
            real.to_str().unwrap().into(),
        )]);
        owner.started += 3600;
        refresh(&mut p, &owner, &mut stats);
        assert!(p.sources[0].refused.as_deref().unwrap().contains("older"));
        assert_eq!(stats.entries, 0);
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_jitdump_read_in_pieces_with_lines_and_moves() {
        let dir = holdup_testkit::scratch("jit-jitdump");
        let path = dir.join("jit-1.dump");
        let mut w = Writer::new(1, false);
        w.lines(0x5000, &[(0x5000, 10, "hot.py"), (0x5008, 11, "hot.py")]);
        w.load(0x5000, 0x20, "py::hot:hot.py");
        w.load(0x6000, 0x20, "py::cold:hot.py");
        let first = w.bytes.len();
        w.moved(0x6000, 0x7000, 0x20);
        w.close();
        // Written in two steps, the second cut inside a record.
        std::fs::write(&path, &w.bytes[..first + 5]).unwrap();
        let source = Source::new(Kind::JitDump, path.to_str().unwrap().into());
        let (mut p, owner) = own_process(vec![source]);
        let mut stats = JitStats::default();
        refresh(&mut p, &owner, &mut stats);
        assert_eq!(stats.entries, 2);
        let f = &frame(&p.table, 0x5009)[0];
        assert_eq!(
            (f.function.as_deref(), f.file.as_deref(), f.line),
            (Some("py::hot:hot.py"), Some("hot.py"), Some(11))
        );
        std::fs::write(&path, &w.bytes).unwrap();
        refresh(&mut p, &owner, &mut stats);
        assert!(frame(&p.table, 0x6000).is_empty());
        assert_eq!(
            frame(&p.table, 0x7000)[0].function.as_deref(),
            Some("py::cold:hot.py")
        );
        assert!(p.sources[0].ended && !p.sources[0].partial);
        assert_eq!(stats.malformed, 0);
        // Not a jitdump: said once, nothing read.
        std::fs::write(&path, [0u8; 64]).unwrap();
        let (mut p, owner) = own_process(vec![Source::new(
            Kind::JitDump,
            path.to_str().unwrap().into(),
        )]);
        refresh(&mut p, &owner, &mut stats);
        assert_eq!(
            p.sources[0].refused.as_deref(),
            Some("no jitdump magic number")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_process_without_maps_gets_the_flag_of_its_runtime_once() {
        let mut maps = JitMaps::new();
        let pid = std::process::id();
        maps.mapped(pid, "//anon");
        maps.want(pid, ["/usr/lib/jvm/x/lib/server/libjvm.so"]);
        // No /tmp/perf-PID.map of ours (the test would be wrong if there were).
        assert!(!std::path::Path::new(&format!("/tmp/perf-{pid}.map")).exists());
        maps.finish();
        assert!(maps
            .symbolize(pid, &[0x1000, 0x2000])
            .iter()
            .all(Vec::is_empty));
        let notes = maps.notes();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("(java)") && notes[0].contains("DumpPerfMapAtExit"),
            "{notes:?}"
        );
        // A process whose code was never hit is not read and not named.
        let mut maps = JitMaps::new();
        maps.mapped(pid, "//anon");
        maps.finish();
        assert!(maps.notes().is_empty());
        assert_eq!(maps.stats, JitStats::default());
    }
}
