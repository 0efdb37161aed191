//! End of a recording: symbols for every frame seen and names of interrupt
//! lines, written into the trace so that reports need neither the binaries
//! nor this machine.

use crate::convert::Converter;
use crate::symcache::{FileSymbols, SymbolCache};
use holdup_symbolize::debuginfo::DebugFiles;
use holdup_symbolize::{KernelSymbols, Symbolizer};
use holdup_trace::{Frame, Record, SymFrame, Symbol, KERNEL_DSO, UNKNOWN_DSO};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

#[derive(Debug, Default)]
pub struct SymbolStats {
    pub frames: usize,
    pub symbolized: usize,
    /// Frames whose symbols came from the cache of earlier recordings.
    pub cached: usize,
    /// Files that could not be read or changed since they were mapped,
    /// with why.
    pub failed_files: Vec<(String, String)>,
    /// What the perf maps and jitdumps of the processes gave.
    pub jit: holdup_symbolize::jit::JitStats,
    /// Generated code that nothing names, refused maps: for the user, and
    /// for every reader of the trace.
    pub notes: Vec<String>,
}

fn to_sym_frames(frames: Vec<holdup_symbolize::Frame>) -> Vec<SymFrame> {
    frames
        .into_iter()
        .filter_map(|f| {
            Some(SymFrame {
                function: f.function?,
                file: f.file,
                line: f.line.unwrap_or(0),
            })
        })
        .collect()
}

/// Frames of a stripped Go binary get their function's name from its
/// pclntab (which stripping keeps), where nothing else named them.
fn with_go_names(path: &Path, addrs: &[u64], mut found: Vec<Vec<SymFrame>>) -> Vec<Vec<SymFrame>> {
    if found.iter().all(|f| !f.is_empty()) {
        return found;
    }
    let Some(names) = holdup_symbolize::golang::names_at_offsets(path, addrs) else {
        return found;
    };
    for (frames, name) in found.iter_mut().zip(names) {
        if let (true, Some(function)) = (frames.is_empty(), name) {
            frames.push(SymFrame {
                function,
                file: None,
                line: 0,
            });
        }
    }
    found
}

/// Symbols of `addrs`: from the cache where earlier recordings put them
/// under `key`, the rest from `lookup` (then cached); None if `lookup`
/// fails.
fn cached_symbols(
    cache: Option<&SymbolCache>,
    key: Option<&[u8]>,
    addrs: &[u64],
    stats: &mut SymbolStats,
    lookup: impl FnOnce(&[u64]) -> Option<Vec<Vec<SymFrame>>>,
) -> Option<Vec<Vec<SymFrame>>> {
    let (Some(cache), Some(key)) = (cache, key) else {
        return lookup(addrs);
    };
    let mut known: FileSymbols = cache.load(key);
    let missing: Vec<u64> = addrs
        .iter()
        .copied()
        .filter(|a| !known.contains_key(a))
        .collect();
    stats.cached += addrs.len() - missing.len();
    if !missing.is_empty() {
        let found = lookup(&missing)?;
        known.extend(missing.into_iter().zip(found));
        cache.store(key, &known);
    }
    Some(
        addrs
            .iter()
            .map(|a| known.get(a).cloned().unwrap_or_default())
            .collect(),
    )
}

/// The cache key of a file's symbols: its build-id, and the size and
/// modification time of the file and of its separate debug file, since
/// stripping a binary or installing its debug info keeps the build-id but
/// changes what can be known of it. Without a debug file here, the
/// debuginfod servers that would be asked for one count too: a server
/// added later may have it.
fn cache_key(path: &Path, build_id: &[u8], debug: &DebugFiles) -> Option<Vec<u8>> {
    use std::os::unix::fs::MetadataExt;
    let stamp = |m: std::fs::Metadata| [m.len(), m.mtime() as u64, m.mtime_nsec() as u64];
    let file = stamp(std::fs::metadata(path).ok()?);
    let local = debug.local(build_id);
    let debug_stamp = local
        .as_ref()
        .and_then(|p| std::fs::metadata(p).ok())
        .map_or([0; 3], stamp);
    let mut key = build_id.to_vec();
    for v in file.iter().chain(&debug_stamp) {
        key.extend_from_slice(&v.to_le_bytes());
    }
    if let (None, Some(servers)) = (local, debug.servers()) {
        key.extend_from_slice(servers.as_bytes());
    }
    Some(key)
}

/// Give the symbolizer the kernel's symbol table from the cache, or cache
/// the one it reads (generating /proc/kallsyms takes the kernel 100-300 ms;
/// reading a copy a few ms). True if the table came from the cache.
fn load_kernel_symbols(symbolizer: &mut Symbolizer, cache: Option<&SymbolCache>) -> bool {
    let (Some(cache), Some(key)) = (cache, kernel_key()) else {
        return false;
    };
    let cached = cache
        .load_text(&key)
        .and_then(|t| t.strip_prefix(KALLSYMS_FORMAT).map(KernelSymbols::parse))
        .filter(|syms| !syms.is_empty());
    if let Some(syms) = cached {
        symbolizer.set_kernel_symbols(syms);
        return true;
    }
    let syms = symbolizer.kernel_symbols();
    if syms.is_empty() {
        return false;
    }
    let mut text = KALLSYMS_FORMAT.to_string();
    for (addr, name) in syms.iter() {
        let _ = writeln!(text, "{addr:x} t {name}");
    }
    cache.store_text(&key, &text);
    false
}

/// First line of a cached kernel symbol table, then /proc/kallsyms lines.
const KALLSYMS_FORMAT: &str = "holdup-kallsyms-1\n";

/// What kernel addresses mean until the next boot or module change: the
/// boot id and a hash of the modules' names and load addresses.
fn kernel_key() -> Option<Vec<u8>> {
    use std::hash::{Hash, Hasher};
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    // A kernel without loadable modules has no list.
    let modules = std::fs::read_to_string("/proc/modules").unwrap_or_default();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    // Name and load address of each module (the other columns, use counts,
    // change as they are used).
    for line in modules.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.first(), fields.last()).hash(&mut h);
    }
    Some(format!("kallsyms-{}-{:016x}", boot.trim(), h.finish()).into_bytes())
}

/// Why a file gave no symbols, in a few words (the path is said apart).
fn why(e: &holdup_symbolize::Error) -> String {
    use holdup_symbolize::Error;
    match e {
        Error::Io { source, .. } => source.to_string(),
        Error::BuildIdMismatch { .. } => "changed since it was mapped".into(),
        Error::BadElf { reason, .. } => format!("not a readable ELF file: {reason}"),
        Error::Symbolize { source, .. } => source.to_string(),
        _ => e.to_string(),
    }
}

/// Line and function specs of stripped binaries (causal targets, probes,
/// `--func`) are looked up in debug files as recordings find them:
/// installed, fetched before into the symbol cache, or from the servers of
/// `DEBUGINFOD_URLS`.
pub fn find_debug_files_for_specs() {
    let fetched = SymbolCache::open().map(|c| c.subdir("debuginfod"));
    let files = std::sync::Mutex::new(DebugFiles::from_env(fetched));
    holdup_symbolize::lines::set_debug_file_finder(Box::new(move |id| files.lock().ok()?.find(id)));
}

/// Symbols of every frame the converter has seen, into its trace.
pub fn symbolize<W: Write>(d: &mut Converter<W>) -> std::io::Result<SymbolStats> {
    let frames: Vec<Frame> = d.frames().copied().collect();
    symbolize_frames(d, &frames)
}

/// Symbols of `frames`, into the converter's trace.
pub fn symbolize_frames<W: Write>(
    d: &mut Converter<W>,
    frames: &[Frame],
) -> std::io::Result<SymbolStats> {
    Symbols::new().symbolize_frames(d, frames)
}

/// The symbolizer and its caches, kept from one call to the next by a
/// recording that symbolizes as it goes (`holdup agent`): the symbol tables
/// and DWARF of a file are read once while its processes live.
pub struct Symbols {
    symbolizer: Symbolizer,
    cache: Option<SymbolCache>,
    kernel_loaded: bool,
}

impl Default for Symbols {
    fn default() -> Self {
        Self::new()
    }
}

impl Symbols {
    pub fn new() -> Self {
        let mut symbolizer = Symbolizer::new();
        let cache = SymbolCache::open();
        // Debug files fetched from debuginfod servers live in the cache.
        let fetched = cache.as_ref().map(|c| c.subdir("debuginfod"));
        symbolizer.set_debug_files(DebugFiles::from_env(fetched));
        Self {
            symbolizer,
            cache,
            kernel_loaded: false,
        }
    }

    /// Forget what was read of the file at `path`: no process maps it now.
    pub fn evict(&mut self, path: &str) {
        self.symbolizer.evict(Path::new(path));
    }

    /// Files whose symbol tables are held.
    pub fn files_held(&self) -> usize {
        self.symbolizer.files_held()
    }

    /// Symbols of `frames`, into the converter's trace.
    pub fn symbolize_frames<W: Write>(
        &mut self,
        d: &mut Converter<W>,
        frames: &[Frame],
    ) -> std::io::Result<SymbolStats> {
        let mut by_dso: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
        for f in frames {
            if f.dso != UNKNOWN_DSO {
                by_dso.entry(f.dso).or_default().insert(f.addr);
            }
        }
        let mut stats = SymbolStats::default();
        // HotSpot writes its map as it exits: read them all once more.
        d.jit.maps.finish();
        let symbolizer = &mut self.symbolizer;
        let cache = &self.cache;
        let dsos: BTreeMap<u32, (String, Option<Vec<u8>>)> = d
            .dsos
            .iter()
            .map(|(id, p, b)| (*id, (p.clone(), b.clone())))
            .collect();
        for (dso, addrs) in by_dso {
            let addrs: Vec<u64> = addrs.into_iter().collect();
            stats.frames += addrs.len();
            let results = if dso == KERNEL_DSO {
                if !self.kernel_loaded && load_kernel_symbols(symbolizer, cache.as_ref()) {
                    stats.cached += addrs.len();
                }
                self.kernel_loaded = true;
                symbolizer
                    .symbolize_kernel(&addrs)
                    .into_iter()
                    .map(to_sym_frames)
                    .collect()
            } else if let Some(pid) = d.jit.pid_of(dso) {
                let found = d.jit.maps.symbolize(pid, &addrs);
                found.into_iter().map(to_sym_frames).collect()
            } else if d.python.pid_of(dso).is_some() {
                d.python.symbols(&addrs)
            } else {
                let Some((path, build_id)) = dsos.get(&dso) else {
                    continue;
                };
                let key = build_id
                    .as_deref()
                    .and_then(|b| cache_key(Path::new(path), b, symbolizer.debug_files()));
                let mut failure = None;
                let found =
                    cached_symbols(cache.as_ref(), key.as_deref(), &addrs, &mut stats, |a| {
                        match symbolizer.symbolize_file(Path::new(path), build_id.as_deref(), a) {
                            Ok(r) => Some(with_go_names(
                                Path::new(path),
                                a,
                                r.into_iter().map(to_sym_frames).collect(),
                            )),
                            Err(e) => {
                                failure = Some(why(&e));
                                None
                            }
                        }
                    });
                match found {
                    Some(r) => r,
                    None => {
                        // Reports fall back to file+offset for these frames.
                        let why = failure.unwrap_or_else(|| "unreadable".into());
                        stats.failed_files.push((path.clone(), why));
                        continue;
                    }
                }
            };
            for (addr, frames) in addrs.into_iter().zip(results) {
                if frames.is_empty() {
                    continue;
                }
                stats.symbolized += 1;
                d.writer.write(&Record::Symbol(Symbol {
                    frame: Frame { dso, addr },
                    frames,
                }))?;
            }
        }
        stats.jit = d.jit.maps.stats;
        stats.notes = d.jit.maps.notes();
        stats.notes.extend(d.python.notes());
        stats.notes.extend(d.goroutines.notes());
        stats.notes.extend(symbolizer.debug_files().problems());
        for note in &stats.notes {
            d.writer.write(&Record::Note(note.clone()))?;
        }
        Ok(stats)
    }
}

/// `irq number → name` from /proc/interrupts (the last column: the
/// device the line serves).
pub fn irq_names() -> Vec<(u32, String)> {
    let Ok(text) = std::fs::read_to_string("/proc/interrupts") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let (num, rest) = line.trim_start().split_once(':')?;
            let irq = num.parse::<u32>().ok()?;
            let name = rest.split_whitespace().last()?.to_string();
            Some((irq, name))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::cache_key;
    use holdup_symbolize::debuginfo::DebugFiles;

    /// A stripped copy keeps the build-id but must not share cached names
    /// with the binary it came from.
    #[test]
    fn a_stripped_copy_has_its_own_cache_key() {
        let dir = holdup_testkit::scratch("embed-cachekey");
        let full = dir.join("full");
        let stripped = dir.join("stripped");
        std::fs::write(&full, vec![1u8; 4096]).unwrap();
        std::fs::write(&stripped, vec![1u8; 1024]).unwrap();
        let id = [0xab, 0xcd, 0xef, 0x01];
        let local = DebugFiles::default();
        let a = cache_key(&full, &id, &local).unwrap();
        let b = cache_key(&stripped, &id, &local).unwrap();
        assert!(a.starts_with(&id) && b.starts_with(&id));
        assert_ne!(a, b);
        assert_eq!(
            a,
            cache_key(&full, &id, &local).unwrap(),
            "the key is stable"
        );
        assert!(cache_key(&dir.join("missing"), &id, &local).is_none());
        // A debuginfod server to ask is part of what the names may be.
        let asking = DebugFiles::default().with_servers("http://debuginfod.example", dir.clone());
        assert_ne!(cache_key(&stripped, &id, &asking).unwrap(), b);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
