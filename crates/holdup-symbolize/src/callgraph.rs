//! The static call graph below one function, for DARC's descent: the
//! functions it calls, and theirs, some levels down.
//!
//! Calls followed: `call rel32` (E8) to the start of a function of the same
//! file; and, with [`Follow::Libraries`], `call rel32` to a PLT stub (`jmp *GOT(%rip)`, with or without
//! `endbr64`/`bnd`), and `call *GOT(%rip)` (FF 15, what `-fno-plt` emits),
//! both named by the dynamic relocation of their GOT slot and found in the
//! first library of the file's `DT_NEEDED` list that defines them, where
//! the descent goes on. Calls through a pointer are not followed: their
//! time stays in the caller. The bytes are scanned, not decoded
//! instruction by instruction: a stray opcode inside another instruction
//! would have to land exactly on a function's first byte or a GOT slot to
//! count, which does not happen in practice.

pub mod plan;

use crate::traced::{self, Contents};
use object::read::elf::ElfFile64;
use object::{
    Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget, SymbolKind,
};
use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// A function of some ELF file: the file and the function's symbol.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Func {
    pub binary: PathBuf,
    pub symbol: String,
}

/// Which calls the call graph follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Follow {
    /// Calls to functions of the same file.
    SameFile,
    /// Those, and calls into shared libraries.
    Libraries,
}

/// The functions `root` of the ELF file at `path` calls, and theirs,
/// `depth` levels down: `(caller, callee)` edges, breadth first, each
/// function expanded once. `Err` says why in one line.
pub fn callees(
    path: &Path,
    root: &str,
    depth: usize,
    follow: Follow,
) -> Result<Vec<(Func, Func)>, String> {
    let mut files: HashMap<PathBuf, Option<Code>> = HashMap::new();
    let code = Code::load(path)?;
    if !code.functions.values().any(|f| f.name == root) {
        return Err(format!(
            "function '{root}' not found in {} (no such symbol: misspelled, or the binary is stripped)",
            path.display()
        ));
    }
    files.insert(path.to_path_buf(), Some(code));
    let start = Func {
        binary: path.to_path_buf(),
        symbol: root.to_string(),
    };
    let mut edges = Vec::new();
    let mut seen: HashSet<Func> = HashSet::from([start.clone()]);
    let mut level = vec![start];
    for _ in 0..depth {
        let mut next = Vec::new();
        for f in level {
            let direct = match files.get(&f.binary) {
                Some(Some(code)) => code.direct_callees(&f.symbol, follow),
                _ => continue,
            };
            for c in direct {
                files
                    .entry(c.binary.clone())
                    .or_insert_with(|| Code::load(&c.binary).ok());
                edges.push((f.clone(), c.clone()));
                if seen.insert(c.clone()) {
                    next.push(c);
                }
            }
        }
        level = next;
    }
    Ok(edges)
}

/// One function of a file: its address range and where its bytes are.
struct Function {
    addr: u64,
    size: u64,
    offset: u64,
    name: String,
}

/// What the call scan needs of one ELF file.
struct Code {
    path: PathBuf,
    map: Contents,
    /// Defined functions by address.
    functions: BTreeMap<u64, Function>,
    /// GOT slot → the imported function it holds.
    got: HashMap<u64, String>,
    /// The PLT sections: address range and file offset.
    plt: Vec<(u64, u64, u64)>,
    /// The libraries it needs, found on disk, in `DT_NEEDED` order, with
    /// the functions each exports (read once, when first asked).
    needed: Vec<(PathBuf, OnceCell<HashSet<String>>)>,
}

impl Code {
    fn load(path: &Path) -> Result<Self, String> {
        let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let map = traced::read(path).map_err(|e| err(&e))?;
        let file = ElfFile64::<object::Endianness>::parse(&*map).map_err(|e| err(&e))?;
        if file.architecture() != object::Architecture::X86_64 {
            return Err(err(&"only x86-64 code is read"));
        }
        let mut functions = BTreeMap::new();
        for sym in file.symbols().chain(file.dynamic_symbols()) {
            let (Ok(name), Some(index)) = (sym.name(), sym.section_index()) else {
                continue;
            };
            if sym.kind() != SymbolKind::Text || sym.size() == 0 || name.is_empty() {
                continue;
            }
            let Some(offset) = file.section_by_index(index).ok().and_then(|s| {
                let (start, _) = s.file_range()?;
                start.checked_add(sym.address().checked_sub(s.address())?)
            }) else {
                continue;
            };
            functions.entry(sym.address()).or_insert(Function {
                addr: sym.address(),
                size: sym.size(),
                offset,
                name: name.to_string(),
            });
        }
        let mut got = HashMap::new();
        for (slot, reloc) in file.dynamic_relocations().into_iter().flatten() {
            if let RelocationTarget::Symbol(i) = reloc.target() {
                if let Some(name) = file
                    .dynamic_symbol_table()
                    .and_then(|t| t.symbol_by_index(i).ok())
                    .and_then(|s| s.is_undefined().then(|| s.name().ok()).flatten())
                {
                    got.insert(slot, name.to_string());
                }
            }
        }
        let plt = file
            .sections()
            .filter(|s| s.name().is_ok_and(|n| n.starts_with(".plt")))
            .filter_map(|s| Some((s.address(), s.address() + s.size(), s.file_range()?.0)))
            .collect();
        let needed = needed_libraries(&file, path)
            .into_iter()
            .map(|lib| (lib, OnceCell::new()))
            .collect();
        drop(file);
        Ok(Self {
            path: path.to_path_buf(),
            map,
            functions,
            got,
            plt,
            needed,
        })
    }

    /// The functions `name` calls directly, once each, in code order.
    fn direct_callees(&self, name: &str, follow: Follow) -> Vec<Func> {
        let libraries = follow == Follow::Libraries;
        let Some(f) = self.functions.values().find(|f| f.name == name) else {
            return Vec::new();
        };
        let end = f.offset.saturating_add(f.size);
        let Some(bytes) = self.map.get(f.offset as usize..end as usize) else {
            return Vec::new();
        };
        let mut out: Vec<Func> = Vec::new();
        for i in 0..bytes.len().saturating_sub(5) {
            let rel = |at: usize| i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            let next = |len: u64| f.addr + i as u64 + len;
            let callee = match bytes[i] {
                0xe8 => {
                    let target = next(5).wrapping_add(rel(i + 1) as i64 as u64);
                    match self.functions.get(&target) {
                        Some(c) if c.addr != f.addr => Some(self.func(&c.name)),
                        _ if libraries => self.plt_stub(target),
                        _ => None,
                    }
                }
                0xff if libraries && bytes[i + 1] == 0x15 && i + 6 <= bytes.len() => {
                    let slot = next(6).wrapping_add(rel(i + 2) as i64 as u64);
                    self.import(slot)
                }
                _ => None,
            };
            if let Some(c) = callee {
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        out
    }

    fn func(&self, symbol: &str) -> Func {
        Func {
            binary: self.path.clone(),
            symbol: symbol.to_string(),
        }
    }

    /// The imported function a PLT stub at `addr` jumps to.
    fn plt_stub(&self, addr: u64) -> Option<Func> {
        let &(lo, _, offset) = self.plt.iter().find(|s| (s.0..s.1).contains(&addr))?;
        let start = (offset + addr - lo) as usize;
        let stub = self.map.get(start..start + 16)?;
        let mut at = 0;
        if stub.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
            at += 4; // endbr64
        }
        if stub[at] == 0xf2 {
            at += 1; // bnd
        }
        if stub[at..at + 2] != [0xff, 0x25] {
            return None;
        }
        let rel = i32::from_le_bytes(stub[at + 2..at + 6].try_into().unwrap());
        self.import((addr + at as u64 + 6).wrapping_add(rel as i64 as u64))
    }

    /// The function imported through GOT slot `slot`, in the first needed
    /// library that defines it.
    fn import(&self, slot: u64) -> Option<Func> {
        let name = self.got.get(&slot)?;
        let (lib, _) = self.needed.iter().find(|(lib, exports)| {
            exports
                .get_or_init(|| exported_functions(lib))
                .contains(name)
        })?;
        Some(Func {
            binary: lib.clone(),
            symbol: name.clone(),
        })
    }
}

/// The functions the library at `path` exports (none if it cannot be read).
fn exported_functions(path: &Path) -> HashSet<String> {
    let Ok(map) = traced::read(path) else {
        return HashSet::new();
    };
    let Ok(file) = object::File::parse(&*map) else {
        return HashSet::new();
    };
    file.dynamic_symbols()
        .filter(is_defined_function)
        .filter_map(|s| Some(s.name().ok()?.to_string()))
        .collect()
}

/// Whether the ELF file at `path` defines function `name` (in its symbol
/// table or its dynamic one): a uprobe can be attached to it by name.
pub fn defines_function(path: &Path, name: &str) -> bool {
    let Ok(map) = traced::read(path) else {
        return false;
    };
    let Ok(file) = object::File::parse(&*map) else {
        return false;
    };
    let mut symbols = file.dynamic_symbols().chain(file.symbols());
    symbols.any(|s| is_defined_function(&s) && s.name().is_ok_and(|n| n == name))
}

fn is_defined_function<'a>(s: &impl ObjectSymbol<'a>) -> bool {
    s.kind() == SymbolKind::Text && !s.is_undefined()
}

/// The `DT_NEEDED` libraries of `file`, found where the dynamic linker
/// would look by default (`LD_LIBRARY_PATH`, then the system's library
/// directories) and resolved; one that is not found is left out.
fn needed_libraries(file: &ElfFile64<object::Endianness>, path: &Path) -> Vec<PathBuf> {
    let Ok(table) = file.elf_dynamic_table() else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = std::env::var("LD_LIBRARY_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .collect();
    dirs.extend(
        [
            "/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu",
            "/lib64",
            "/usr/lib64",
            "/lib",
            "/usr/lib",
            "/usr/local/lib",
        ]
        .map(PathBuf::from),
    );
    table
        .iter()
        .filter(|d| d.tag == object::elf::DT_NEEDED)
        .filter_map(|d| table.string(d).ok())
        .filter_map(|name| {
            let name = std::str::from_utf8(name).ok()?;
            // Resolved, so that one library has one path whichever
            // directory link led to it.
            dirs.iter()
                .map(|d| d.join(name))
                .find(|p| p.is_file() && p != path)
                .map(|p| p.canonicalize().unwrap_or(p))
        })
        .collect()
}
