//! File offsets and kernel addresses to functions and source lines.

use crate::debuginfo::DebugFiles;
use crate::elf::ElfFacts;
use crate::kallsyms::KernelSymbols;
use crate::traced;
use crate::Error;
use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{CodeInfo, Input, Sym, Symbolized};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// One function at an address. Several frames share an address when
/// functions were inlined.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// This function was inlined into the next frame.
    pub inlined: bool,
}

/// Identity of a file version, to re-read its build-id only when it changed.
type Stamp = (u64, u64, i64, i64, u64);

/// What is known of a file at a path, for as long as it does not change.
struct Known {
    stamp: Stamp,
    facts: ElfFacts,
    /// Where blazesym reads it (it opens files by path): the file's own
    /// path where only root can change it, else a copy in memory.
    source: PathBuf,
    /// The copy, kept open for `source` to name it.
    _copy: Option<std::fs::File>,
}

/// Symbolizes ELF files and kernel addresses; keeps blazesym's per-file
/// state (parsed symbol tables and DWARF) between calls.
pub struct Symbolizer {
    inner: blazesym::symbolize::Symbolizer,
    demangle: bool,
    files: HashMap<PathBuf, Known>,
    kernel: Option<KernelSymbols>,
    /// Where the debug files of stripped files are found.
    debug: DebugFiles,
}

fn blazesym_symbolizer(demangle: bool) -> blazesym::symbolize::Symbolizer {
    blazesym::symbolize::Symbolizer::builder()
        .enable_code_info(true)
        .enable_inlined_fns(true)
        .enable_demangling(demangle)
        .build()
}

impl Default for Symbolizer {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer").finish_non_exhaustive()
    }
}

impl Symbolizer {
    /// Rust and C++ names are demangled.
    pub fn new() -> Self {
        Self::with_demangling(true)
    }

    /// Choose whether Rust and C++ names are demangled.
    pub fn with_demangling(demangle: bool) -> Self {
        Self {
            inner: blazesym_symbolizer(demangle),
            demangle,
            files: HashMap::new(),
            kernel: None,
            debug: DebugFiles::default(),
        }
    }

    /// Find the debug files of stripped files there (by default: under
    /// `/usr/lib/debug` only).
    pub fn set_debug_files(&mut self, debug: DebugFiles) {
        self.debug = debug;
    }

    pub fn debug_files(&self) -> &DebugFiles {
        &self.debug
    }

    /// Use these kernel symbols instead of reading `/proc/kallsyms` (a
    /// report symbolizing a trace recorded elsewhere).
    pub fn set_kernel_symbols(&mut self, symbols: KernelSymbols) {
        self.kernel = Some(symbols);
    }

    /// `offsets` are file offsets into the ELF at `path` (callers already
    /// subtracted 1 from return addresses). For each offset: the frames at
    /// that address, innermost inlined function first, the outer (real)
    /// function last; empty when nothing is known.
    ///
    /// A file without DWARF is looked up in its separate debug file, found
    /// by build-id (see `debuginfo.rs`), when there is one.
    ///
    /// A build-id mismatch or an unreadable file is an error (so is a path
    /// that holds something other than a regular file now: see
    /// `traced.rs`); missing debug info is not: frames then carry the ELF
    /// symbol name only.
    pub fn symbolize_file(
        &mut self,
        path: &Path,
        build_id: Option<&[u8]>,
        offsets: &[u64],
    ) -> Result<Vec<Vec<Frame>>, Error> {
        let known = self.know(path)?;
        if let Some(expected) = build_id {
            if known.facts.build_id.as_deref() != Some(expected) {
                return Err(Error::BuildIdMismatch {
                    path: path.to_path_buf(),
                    expected: holdup_trace::build_id_hex(expected),
                    found: known
                        .facts
                        .build_id
                        .as_deref()
                        .map_or_else(|| "none".into(), holdup_trace::build_id_hex),
                });
            }
        }
        let (source, facts) = (known.source.clone(), known.facts.clone());
        if !facts.has_dwarf {
            if let Some(found) = self.in_debug_file(&facts, offsets) {
                return Ok(found);
            }
        }
        self.lookup(path, &source, Input::FileOffset(offsets))
    }

    /// The frames of `offsets` of a file without DWARF (described by
    /// `facts`) from its debug file, which speaks in stated addresses;
    /// None when it has none (or an unreadable one).
    fn in_debug_file(&mut self, facts: &ElfFacts, offsets: &[u64]) -> Option<Vec<Vec<Frame>>> {
        let id = facts.build_id.as_deref()?;
        let debug = self.debug.find(id)?;
        let known = self.know(&debug).ok()?;
        if known.facts.build_id.as_deref() != Some(id) {
            return None;
        }
        let source = known.source.clone();
        // Offsets outside the loaded segments are looked up at 0 and
        // dropped.
        let addrs: Vec<Option<u64>> = offsets.iter().map(|&o| facts.address_of(o)).collect();
        let stated: Vec<u64> = addrs.iter().map(|a| a.unwrap_or(0)).collect();
        let found = self
            .lookup(&debug, &source, Input::VirtOffset(&stated))
            .ok()?;
        Some(
            found
                .into_iter()
                .zip(addrs)
                .map(|(f, a)| if a.is_some() { f } else { Vec::new() })
                .collect(),
        )
    }

    /// blazesym's frames of `input` in the file it reads at `source`
    /// (`path` names it in errors).
    fn lookup(
        &mut self,
        path: &Path,
        source: &Path,
        input: Input<&[u64]>,
    ) -> Result<Vec<Vec<Frame>>, Error> {
        let src = Source::Elf(Elf::new(source));
        // blazesym panics on some malformed DWARF (a line table row naming
        // a file its header lacks): that file's frames stay unsymbolized,
        // the recording goes on, and the symbolizer starts afresh.
        let inner = &self.inner;
        let results = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            inner.symbolize(&src, input)
        }));
        let results = match results {
            Ok(r) => r.map_err(|source| Error::Symbolize {
                path: path.to_path_buf(),
                source,
            })?,
            Err(_) => {
                self.inner = blazesym_symbolizer(self.demangle);
                return Err(Error::BadElf {
                    path: path.to_path_buf(),
                    reason: "its debugging information is malformed (the symbolizer failed on it)"
                        .into(),
                });
            }
        };
        Ok(results
            .into_iter()
            .map(|r| match r {
                Symbolized::Sym(sym) => frames(sym),
                Symbolized::Unknown(_) => Vec::new(),
            })
            .collect())
    }

    /// Kernel text addresses, from `/proc/kallsyms` (as root). Unknown
    /// addresses, or all of them without root, give an empty Vec.
    pub fn symbolize_kernel(&mut self, addrs: &[u64]) -> Vec<Vec<Frame>> {
        let kernel = self
            .kernel
            .get_or_insert_with(|| KernelSymbols::load().unwrap_or_default());
        addrs
            .iter()
            .map(|&a| {
                kernel
                    .find(a)
                    .map(|(name, _)| {
                        vec![Frame {
                            function: Some(name.to_string()),
                            ..Frame::default()
                        }]
                    })
                    .unwrap_or_default()
            })
            .collect()
    }

    /// The kernel symbols in use (loading them if needed), to store in a
    /// trace file.
    pub fn kernel_symbols(&mut self) -> &KernelSymbols {
        self.kernel
            .get_or_insert_with(|| KernelSymbols::load().unwrap_or_default())
    }

    /// Forget what was read of the file at `path` (and of its separate
    /// debug file): a long-lived symbolizer whose processes come and go
    /// would otherwise hold every file it ever read. Read again if asked.
    pub fn evict(&mut self, path: &Path) {
        let Some(known) = self.files.remove(path) else {
            return;
        };
        let elf = blazesym::symbolize::evict::Elf::new(&known.source);
        let _ = self.inner.evict(&elf.into());
        // Only a file without DWARF was looked up in a debug file (found
        // then, and remembered: no new search here).
        let debug = (!known.facts.has_dwarf)
            .then(|| {
                known
                    .facts
                    .build_id
                    .as_deref()
                    .and_then(|id| self.debug.find(id))
            })
            .flatten();
        if let Some(debug) = debug.filter(|d| d != path) {
            self.evict(&debug);
        }
    }

    /// Files whose symbols are held (read and not evicted).
    pub fn files_held(&self) -> usize {
        self.files.len()
    }

    /// The file's build-id and where blazesym is to read it, found again
    /// only when the file changed.
    fn know(&mut self, path: &Path) -> Result<&Known, Error> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let (file, md) = traced::open(path).map_err(io)?;
        let stamp = (md.dev(), md.ino(), md.mtime(), md.mtime_nsec(), md.size());
        if self.files.get(path).is_some_and(|k| k.stamp == stamp) {
            return Ok(&self.files[path]);
        }
        let facts = crate::elf::facts_of(&file).map_err(|reason| Error::BadElf {
            path: path.to_path_buf(),
            reason,
        })?;
        let (source, copy) = match traced::stable_path(path, &md) {
            Some(p) => (p, None),
            None => {
                let (copy, at) = traced::memory_copy(&file, &md).map_err(io)?;
                (at, Some(copy))
            }
        };
        let known = Known {
            stamp,
            facts,
            source,
            _copy: copy,
        };
        self.files.insert(path.to_path_buf(), known);
        Ok(&self.files[path])
    }
}

fn location(info: Option<&CodeInfo<'_>>) -> (Option<String>, Option<u32>) {
    match info {
        Some(ci) => (Some(ci.to_path().to_string_lossy().into_owned()), ci.line),
        None => (None, None),
    }
}

/// blazesym lists inlined functions outermost first, each with the location
/// inside it, and the real function's location is that of the first inlined
/// call; we want innermost first.
fn frames(sym: Sym<'_>) -> Vec<Frame> {
    let mut out = Vec::with_capacity(sym.inlined.len() + 1);
    for f in sym.inlined.iter().rev() {
        let (file, line) = location(f.code_info.as_ref());
        out.push(Frame {
            function: Some(f.name.to_string()),
            file,
            line,
            inlined: true,
        });
    }
    let (file, line) = location(sym.code_info.as_deref());
    out.push(Frame {
        function: Some(sym.name.into_owned()),
        file,
        line,
        inlined: false,
    });
    out
}
