//! The static call graph of an executable below one function, for DARC's
//! descent: the functions it calls directly, and theirs, some levels down.
//!
//! Direct calls only (`call rel32`, opcode E8), to the start of a function
//! defined in the same file: calls through the PLT into shared libraries
//! and indirect calls are not followed, so a library function's time stays
//! in its caller. The bytes are scanned, not decoded instruction by
//! instruction: a stray E8 inside another instruction would have to land
//! exactly on a function's first byte to count, which does not happen in
//! practice.

use crate::elf::map_file;
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

/// One function of the file: its address range and name.
struct Function {
    addr: u64,
    size: u64,
    name: String,
    section: object::SectionIndex,
}

/// The functions `root` calls directly in the ELF file at `path`, and
/// theirs, `depth` levels down: `(caller, callee)` edges, breadth first,
/// each function expanded once. `Err` says why in one line.
pub fn callees(path: &Path, root: &str, depth: usize) -> Result<Vec<(String, String)>, String> {
    let map = map_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = object::File::parse(&*map).map_err(|e| format!("{}: {e}", path.display()))?;
    if file.architecture() != object::Architecture::X86_64 {
        return Err(format!("{}: only x86-64 code is read", path.display()));
    }
    let mut by_addr: BTreeMap<u64, Function> = BTreeMap::new();
    let symbols = file.symbols().chain(file.dynamic_symbols());
    for sym in symbols {
        let (Ok(name), Some(section)) = (sym.name(), sym.section_index()) else {
            continue;
        };
        if sym.kind() != SymbolKind::Text || sym.size() == 0 || name.is_empty() {
            continue;
        }
        by_addr.entry(sym.address()).or_insert(Function {
            addr: sym.address(),
            size: sym.size(),
            name: name.to_string(),
            section,
        });
    }
    let by_name: HashMap<&str, &Function> =
        by_addr.values().map(|f| (f.name.as_str(), f)).collect();
    let Some(&start) = by_name.get(root) else {
        return Err(format!(
            "function '{root}' not found in {} (no such symbol: misspelled, or the binary is stripped)",
            path.display()
        ));
    };
    let direct = |f: &Function| -> Vec<&Function> {
        let Some(bytes) = file.section_by_index(f.section).ok().and_then(|s| {
            let data = s.data().ok()?;
            let off = f.addr.checked_sub(s.address())? as usize;
            data.get(off..off.checked_add(f.size as usize)?)
        }) else {
            return Vec::new();
        };
        let mut out: Vec<&Function> = Vec::new();
        for i in 0..bytes.len().saturating_sub(4) {
            if bytes[i] != 0xe8 {
                continue;
            }
            let rel = i32::from_le_bytes(bytes[i + 1..i + 5].try_into().unwrap());
            let target = (f.addr + i as u64 + 5).wrapping_add(rel as i64 as u64);
            if let Some(callee) = by_addr.get(&target) {
                if callee.addr != f.addr && !out.iter().any(|o| o.addr == callee.addr) {
                    out.push(callee);
                }
            }
        }
        out
    };
    let mut edges = Vec::new();
    let mut seen: HashSet<u64> = HashSet::from([start.addr]);
    let mut level = vec![start];
    for _ in 0..depth {
        let mut next = Vec::new();
        for f in level {
            for c in direct(f) {
                edges.push((f.name.clone(), c.name.clone()));
                if seen.insert(c.addr) {
                    next.push(c);
                }
            }
        }
        level = next;
    }
    Ok(edges)
}
