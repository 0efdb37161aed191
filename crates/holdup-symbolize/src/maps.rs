//! Per-process address spaces.

use holdup_trace::fxhash::FxHashMap;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// One executable mapping of a process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub file_offset: u64,
    pub path: String,
    pub build_id: Option<Vec<u8>>,
}

impl Mapping {
    /// File offset of `addr`, which must lie in this mapping.
    pub fn file_offset_of(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.start).wrapping_add(self.file_offset)
    }

    fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    /// Where the mapped file of process `pid` may be found: the mapped
    /// inode itself while the process lives (/proc/PID/map_files: still
    /// the right file after it was deleted or replaced on disk, and nothing
    /// its owner put at the path since), its path as the process sees it
    /// (through /proc/PID/root, for containers), and the path here.
    pub fn candidates(&self, pid: u32) -> Vec<PathBuf> {
        vec![
            PathBuf::from(format!(
                "/proc/{pid}/map_files/{:x}-{:x}",
                self.start, self.end
            )),
            PathBuf::from(format!("/proc/{pid}/root{}", self.path)),
            PathBuf::from(&self.path),
        ]
    }
}

/// Every change to any address space gets a number never used before, so
/// that state derived from a space (the unwinder's per-process module list)
/// can tell it is stale, even across pid reuse or separate `AddressSpaces`.
/// Two spaces have the same number only when one is a fork of the other
/// that neither changed since: the same mappings.
static GENERATION: AtomicU64 = AtomicU64::new(1);

fn next_generation() -> u64 {
    GENERATION.fetch_add(1, Ordering::Relaxed)
}

#[derive(Clone, Debug, Default)]
struct Space {
    /// Sorted by start, non-overlapping.
    maps: Vec<Mapping>,
    generation: u64,
}

impl Space {
    fn insert(&mut self, m: Mapping) {
        if m.start >= m.end {
            return;
        }
        // Range of existing mappings that overlap [m.start, m.end).
        let first = self.maps.partition_point(|x| x.end <= m.start);
        let last = first + self.maps[first..].partition_point(|x| x.start < m.end);
        let mut replacement = Vec::with_capacity(3);
        if let Some(old) = self.maps.get(first).filter(|_| first < last) {
            if old.start < m.start {
                replacement.push(Mapping {
                    end: m.start,
                    ..old.clone()
                });
            }
        }
        let tail = self.maps[first..last]
            .last()
            .filter(|old| old.end > m.end)
            .map(|old| Mapping {
                start: m.end,
                file_offset: old.file_offset + (m.end - old.start),
                ..old.clone()
            });
        replacement.push(m);
        replacement.extend(tail);
        self.maps.splice(first..last, replacement);
        self.generation = next_generation();
    }

    fn find(&self, addr: u64) -> Option<&Mapping> {
        let i = self.maps.partition_point(|m| m.start <= addr);
        let m = self.maps.get(i.checked_sub(1)?)?;
        m.contains(addr).then_some(m)
    }
}

/// Per-process address spaces, kept up to date from mmap events or
/// `/proc/PID/maps`.
#[derive(Debug, Default)]
pub struct AddressSpaces {
    /// By pid, looked up for every frame: an Fx hash (a multiply) finds a
    /// pid among the hundreds of a storm of processes in one probe.
    spaces: FxHashMap<u32, Space>,
    /// Build-ids read while loading `/proc/PID/maps`, by (dev, inode, path):
    /// every process maps libc, reading its notes once is enough.
    build_ids: HashMap<(String, u64, String), Option<Vec<u8>>>,
}

impl AddressSpaces {
    pub fn new() -> Self {
        Self::default()
    }

    /// Record a mapping. A later mapping over the same range replaces (or
    /// trims) the earlier ones, as mmap(MAP_FIXED) does.
    pub fn add_mapping(&mut self, pid: u32, m: Mapping) {
        self.spaces.entry(pid).or_default().insert(m);
    }

    /// Replace what is known of `pid` with its current `/proc/PID/maps`
    /// (file-backed executable mappings only), reading build-ids from the
    /// mapped files.
    pub fn load_proc_maps(&mut self, pid: u32) -> std::io::Result<()> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
        self.load_maps_impl(pid, &text, true);
        Ok(())
    }

    /// Replace what is known of `pid` with the mappings in `text`, in the
    /// format of `/proc/PID/maps` (a saved copy: the process may be gone).
    /// Build-ids are read from the files at the listed paths.
    pub fn load_maps(&mut self, pid: u32, text: &str) {
        self.load_maps_impl(pid, text, false);
    }

    fn load_maps_impl(&mut self, pid: u32, text: &str, live: bool) {
        let mut maps = Vec::new();
        for line in parse_maps(text) {
            let key = (line.dev.to_string(), line.inode, line.path.to_string());
            let build_id = self
                .build_ids
                .entry(key)
                .or_insert_with(|| {
                    // The mapped inode itself where the process lives
                    // (whatever is at the path now), then through
                    // /proc/PID/root so that processes in another mount
                    // namespace (containers) resolve their own files.
                    let mut paths = Vec::new();
                    if live {
                        paths.push(format!(
                            "/proc/{pid}/map_files/{:x}-{:x}",
                            line.start, line.end
                        ));
                        paths.push(format!("/proc/{pid}/root{}", line.path));
                    }
                    paths.push(line.path.to_string());
                    paths.iter().find_map(crate::elf::read_build_id)
                })
                .clone();
            maps.push(Mapping {
                start: line.start,
                end: line.end,
                file_offset: line.offset,
                path: line.path.to_string(),
                build_id,
            });
        }
        maps.extend(anonymous_exec(text).map(|(start, end)| Mapping {
            start,
            end,
            file_offset: start,
            path: ANONYMOUS.into(),
            build_id: None,
        }));
        self.set_mappings(pid, maps);
    }

    /// Replace what is known of `pid` with `maps` (in any order; overlaps
    /// resolved in favour of later entries). This is how a report restores
    /// the maps a trace file carries.
    pub fn set_mappings(&mut self, pid: u32, maps: impl IntoIterator<Item = Mapping>) {
        let mut space = Space::default();
        for m in maps {
            space.insert(m);
        }
        space.generation = next_generation();
        self.spaces.insert(pid, space);
    }

    /// A new process starts with a copy of its parent's mappings, and with
    /// their generation: what was derived from them holds for both (a
    /// server's forked children share the unwinder's module list) until
    /// either changes.
    pub fn fork(&mut self, parent: u32, child: u32) {
        let space = self.spaces.get(&parent).cloned().unwrap_or_else(|| Space {
            maps: Vec::new(),
            generation: next_generation(),
        });
        self.spaces.insert(child, space);
    }

    /// exec replaced the whole address space: forget every mapping of pid.
    pub fn exec(&mut self, pid: u32) {
        self.spaces.insert(
            pid,
            Space {
                maps: Vec::new(),
                generation: next_generation(),
            },
        );
    }

    pub fn exit(&mut self, pid: u32) {
        self.spaces.remove(&pid);
    }

    /// The mapping containing `addr` in `pid`.
    pub fn find(&self, pid: u32, addr: u64) -> Option<&Mapping> {
        self.spaces.get(&pid)?.find(addr)
    }

    /// Every mapping of `pid`, sorted by address.
    pub fn mappings(&self, pid: u32) -> &[Mapping] {
        self.spaces.get(&pid).map_or(&[], |s| &s.maps)
    }

    /// Processes with a known address space.
    pub fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.spaces.keys().copied()
    }

    /// Changes whenever the mappings of `pid` change.
    pub(crate) fn generation(&self, pid: u32) -> Option<u64> {
        self.spaces.get(&pid).map(|s| s.generation)
    }
}

/// The name of a mapping without a file, as the kernel's mmap events give
/// it.
const ANONYMOUS: &str = "//anon";

/// The executable mappings without a file in a `/proc/PID/maps` text
/// (where JIT compilers put their code), as (start, end).
fn anonymous_exec(text: &str) -> impl Iterator<Item = (u64, u64)> + '_ {
    text.lines().filter_map(|line| {
        let mut fields = line.split_ascii_whitespace();
        let range = fields.next()?;
        let perms = fields.next()?;
        let inode = fields.nth(2)?;
        let path = fields.next().unwrap_or("");
        let anonymous = path.is_empty() || path.starts_with("[anon:");
        if perms.as_bytes().get(2) != Some(&b'x') || inode != "0" || !anonymous {
            return None;
        }
        let (start, end) = range.split_once('-')?;
        Some((
            u64::from_str_radix(start, 16).ok()?,
            u64::from_str_radix(end, 16).ok()?,
        ))
    })
}

/// One line of `/proc/PID/maps` that matters for unwinding and
/// symbolization: executable and backed by a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsLine<'a> {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub dev: &'a str,
    pub inode: u64,
    pub path: &'a str,
}

/// The file-backed executable lines of a `/proc/PID/maps` text. Malformed
/// lines are skipped. A " (deleted)" suffix is removed: the path then names
/// whatever replaced the file, which the build-id check catches.
pub fn parse_maps(text: &str) -> impl Iterator<Item = MapsLine<'_>> {
    text.lines().filter_map(|line| {
        let mut fields = line.splitn(6, ' ');
        let range = fields.next()?;
        let perms = fields.next()?;
        let offset = fields.next()?;
        let dev = fields.next()?;
        let inode = fields.next()?;
        let path = fields.next()?.trim_start();
        if perms.as_bytes().get(2) != Some(&b'x') || !path.starts_with('/') {
            return None;
        }
        let (start, end) = range.split_once('-')?;
        Some(MapsLine {
            start: u64::from_str_radix(start, 16).ok()?,
            end: u64::from_str_radix(end, 16).ok()?,
            offset: u64::from_str_radix(offset, 16).ok()?,
            dev,
            inode: inode.parse().ok()?,
            path: path.strip_suffix(" (deleted)").unwrap_or(path),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(start: u64, end: u64, off: u64, path: &str) -> Mapping {
        Mapping {
            start,
            end,
            file_offset: off,
            path: path.into(),
            build_id: None,
        }
    }

    fn ranges(s: &AddressSpaces, pid: u32) -> Vec<(u64, u64, u64, &str)> {
        s.mappings(pid)
            .iter()
            .map(|m| (m.start, m.end, m.file_offset, m.path.as_str()))
            .collect()
    }

    #[test]
    fn later_mappings_replace_overlapped_parts() {
        let mut s = AddressSpaces::new();
        s.add_mapping(1, m(0x1000, 0x5000, 0, "a"));
        s.add_mapping(1, m(0x8000, 0x9000, 0, "c"));
        s.add_mapping(1, m(0x2000, 0x3000, 0x100, "b"));
        assert_eq!(
            ranges(&s, 1),
            [
                (0x1000, 0x2000, 0, "a"),
                (0x2000, 0x3000, 0x100, "b"),
                (0x3000, 0x5000, 0x2000, "a"),
                (0x8000, 0x9000, 0, "c"),
            ]
        );
        // Covers the tail of a, all of the b/a pieces and the head of c.
        s.add_mapping(1, m(0x1800, 0x8800, 0, "d"));
        assert_eq!(
            ranges(&s, 1),
            [
                (0x1000, 0x1800, 0, "a"),
                (0x1800, 0x8800, 0, "d"),
                (0x8800, 0x9000, 0x800, "c"),
            ]
        );
        // Exactly the same range.
        s.add_mapping(1, m(0x1800, 0x8800, 0, "e"));
        assert_eq!(s.find(1, 0x1800).unwrap().path, "e");
        assert_eq!(s.mappings(1).len(), 3);
        // Empty ranges are ignored.
        s.add_mapping(1, m(0x10000, 0x10000, 0, "f"));
        assert_eq!(s.mappings(1).len(), 3);
    }

    #[test]
    fn find_uses_half_open_ranges() {
        let mut s = AddressSpaces::new();
        s.add_mapping(7, m(0x1000, 0x2000, 0, "a"));
        s.add_mapping(7, m(0x2000, 0x3000, 0, "b"));
        assert_eq!(s.find(7, 0xfff), None);
        assert_eq!(s.find(7, 0x1000).unwrap().path, "a");
        assert_eq!(s.find(7, 0x1fff).unwrap().path, "a");
        assert_eq!(s.find(7, 0x2000).unwrap().path, "b");
        assert_eq!(s.find(7, 0x3000), None);
        assert_eq!(s.find(8, 0x1000), None);
    }

    #[test]
    fn fork_copies_exec_forgets_exit_removes() {
        let mut s = AddressSpaces::new();
        s.add_mapping(1, m(0x1000, 0x2000, 0, "a"));
        let g1 = s.generation(1).unwrap();
        s.fork(1, 2);
        assert_eq!(s.find(2, 0x1000).unwrap().path, "a");
        assert_eq!(
            s.generation(2),
            Some(g1),
            "the same mappings, the same number"
        );
        s.add_mapping(2, m(0x4000, 0x5000, 0, "b"));
        assert_ne!(
            s.generation(2),
            Some(g1),
            "a child's own change is a new number"
        );
        assert_eq!(
            s.find(1, 0x4000),
            None,
            "the parent does not see child mappings"
        );
        s.exec(2);
        assert_eq!(s.find(2, 0x1000), None);
        assert!(s.generation(2).is_some());
        s.exit(2);
        assert_eq!(s.generation(2), None);
        assert_eq!(s.generation(1), Some(g1));
    }

    #[test]
    fn parses_proc_maps_lines() {
        let text = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 fe:01 1234                       /usr/bin/prog
55d0c0a01000-55d0c0a02000 r-xp 00001000 fe:01 1234                       /usr/bin/prog
55d0c2000000-55d0c2021000 rw-p 00000000 00:00 0                          [heap]
7f0000001000-7f0000100000 r-xp 00028000 fe:01 99                         /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000200000-7f0000201000 r-xp 00000000 00:05 7                          /tmp/my lib.so (deleted)
7ffd1d5f0000-7ffd1d5f2000 r-xp 00000000 00:00 0                          [vdso]
garbage
";
        let lines: Vec<_> = parse_maps(text).collect();
        assert_eq!(lines.len(), 3);
        assert!(anonymous_exec(text).next().is_none());
        let jit = "\
7f0000300000-7f0000400000 rwxp 00000000 00:00 0 
7f0000400000-7f0000500000 r-xp 00000000 00:00 0                          [anon:v8 code]
7f0000500000-7f0000600000 rw-p 00000000 00:00 0 
7ffd1d5f0000-7ffd1d5f2000 r-xp 00000000 00:00 0                          [vdso]
";
        let anon: Vec<_> = anonymous_exec(jit).collect();
        assert_eq!(
            anon,
            [
                (0x7f0000300000, 0x7f0000400000),
                (0x7f0000400000, 0x7f0000500000)
            ]
        );
        assert_eq!(lines[0].start, 0x55d0c0a01000);
        assert_eq!(lines[0].offset, 0x1000);
        assert_eq!(lines[0].inode, 1234);
        assert_eq!(lines[1].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!(lines[2].path, "/tmp/my lib.so");
    }

    #[test]
    fn loads_own_proc_maps() {
        let mut s = AddressSpaces::new();
        let pid = std::process::id();
        s.load_proc_maps(pid).unwrap();
        let here = loads_own_proc_maps as *const () as usize as u64;
        let m = s.find(pid, here).expect("this function is mapped");
        assert!(m.path.ends_with(
            std::env::current_exe()
                .unwrap()
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
        ));
        assert!(m.build_id.is_some(), "rustc links with a build-id");
    }
}
