//! File offsets and kernel addresses to functions and source lines.

use crate::kallsyms::KernelSymbols;
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

/// Symbolizes ELF files and kernel addresses; keeps blazesym's per-file
/// state (parsed symbol tables and DWARF) between calls.
pub struct Symbolizer {
    inner: blazesym::symbolize::Symbolizer,
    demangle: bool,
    build_ids: HashMap<PathBuf, (Stamp, Option<Vec<u8>>)>,
    kernel: Option<KernelSymbols>,
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
            build_ids: HashMap::new(),
            kernel: None,
        }
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
    /// A build-id mismatch or an unreadable file is an error; missing debug
    /// info is not: frames then carry the ELF symbol name only.
    pub fn symbolize_file(
        &mut self,
        path: &Path,
        build_id: Option<&[u8]>,
        offsets: &[u64],
    ) -> Result<Vec<Vec<Frame>>, Error> {
        let found = self.build_id(path)?;
        if let Some(expected) = build_id {
            if found.as_deref() != Some(expected) {
                return Err(Error::BuildIdMismatch {
                    path: path.to_path_buf(),
                    expected: holdup_trace::build_id_hex(expected),
                    found: found
                        .as_deref()
                        .map_or_else(|| "none".into(), holdup_trace::build_id_hex),
                });
            }
        }
        let src = Source::Elf(Elf::new(path));
        // blazesym panics on some malformed DWARF (a line table row naming
        // a file its header lacks): that file's frames stay unsymbolized,
        // the recording goes on, and the symbolizer starts afresh.
        let inner = &self.inner;
        let results = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            inner.symbolize(&src, Input::FileOffset(offsets))
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

    /// The file's build-id, read again only when the file changed.
    fn build_id(&mut self, path: &Path) -> Result<Option<Vec<u8>>, Error> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let md = std::fs::metadata(path).map_err(io)?;
        let stamp = (md.dev(), md.ino(), md.mtime(), md.mtime_nsec(), md.size());
        if let Some((s, id)) = self.build_ids.get(path) {
            if *s == stamp {
                return Ok(id.clone());
            }
        }
        let map = crate::elf::map_file(path).map_err(io)?;
        let bad = |reason| Error::BadElf {
            path: path.to_path_buf(),
            reason,
        };
        let file = object::File::parse(&*map).map_err(|e| bad(e.to_string()))?;
        compressed_sizes_are_possible(&file).map_err(bad)?;
        let id = object::Object::build_id(&file)
            .ok()
            .flatten()
            .map(<[u8]>::to_vec);
        self.build_ids
            .insert(path.to_path_buf(), (stamp, id.clone()));
        Ok(id)
    }
}

/// Deflate shrinks data by about 1032 to 1 at most.
const MAX_DEFLATE_RATIO: u64 = 1032;
/// No debug section of a real program comes near this, uncompressed.
const MAX_UNCOMPRESSED: u64 = 2 << 30;

/// Whether every compressed section of `file` claims a size that its
/// compressed bytes can hold. blazesym allocates the claimed size before
/// decompressing, and a failed allocation aborts the process: a program's
/// own file (which its user controls) must not be able to stop a recording
/// that way.
fn compressed_sizes_are_possible(file: &object::File<'_>) -> Result<(), String> {
    use object::{Object, ObjectSection};
    for s in file.sections() {
        let Ok(c) = s.compressed_file_range() else {
            continue;
        };
        if c.format == object::CompressionFormat::None {
            continue;
        }
        let most = c
            .compressed_size
            .saturating_mul(MAX_DEFLATE_RATIO)
            .min(MAX_UNCOMPRESSED);
        if c.uncompressed_size > most {
            return Err(format!(
                "section {} claims {} bytes uncompressed from {} compressed",
                s.name().unwrap_or("?"),
                c.uncompressed_size,
                c.compressed_size
            ));
        }
    }
    Ok(())
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
