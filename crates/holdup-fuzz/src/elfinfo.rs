//! Where to look inside a fuzzed ELF file, so that symbolization and
//! unwinding work on addresses its tables describe rather than on random
//! ones: its function symbols, as file offsets and as addresses of a
//! mapping of its executable segment.

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

#[derive(Debug)]
pub struct Layout {
    /// The file parsed as an object file.
    pub parsed: bool,
    /// Mapping of the executable segment: start address, length, file offset.
    pub map_start: u64,
    pub map_len: u64,
    pub map_offset: u64,
    /// File offsets of functions (and of a few places inside them).
    pub offsets: Vec<u64>,
    /// The same places as addresses in the mapping (which puts the
    /// segment at its stated address).
    pub addresses: Vec<u64>,
    /// Names of functions.
    pub functions: Vec<String>,
}

const PAGE: u64 = 4096;
/// Where the mapping goes when the file has no executable segment.
const DEFAULT_START: u64 = 0x40_0000;

pub fn layout(bytes: &[u8]) -> Layout {
    let mut l = Layout {
        parsed: false,
        map_start: DEFAULT_START,
        map_len: PAGE,
        map_offset: 0,
        offsets: Vec::new(),
        addresses: Vec::new(),
        functions: Vec::new(),
    };
    let Ok(file) = object::File::parse(bytes) else {
        l.offsets.push(0);
        l.addresses.push(DEFAULT_START);
        return l;
    };
    l.parsed = true;
    // The first executable segment, mapped as the loader would: from the
    // page that holds its start.
    let exec = file.segments().find(|s| s.permissions().executable());
    let (vaddr, offset, filesz) = match &exec {
        Some(s) => (s.address(), s.file_range().0, s.file_range().1),
        None => (DEFAULT_START, 0, PAGE),
    };
    l.map_start = vaddr & !(PAGE - 1);
    l.map_offset = offset & !(PAGE - 1);
    l.map_len = (filesz.saturating_add(offset & (PAGE - 1))).saturating_add(PAGE - 1) & !(PAGE - 1);
    for sym in file.symbols().filter(|s| s.kind() == SymbolKind::Text) {
        if l.functions.len() >= 16 {
            break;
        }
        if let Ok(name) = sym.name() {
            l.functions.push(name.to_string());
        }
        for delta in [0, 1, sym.size() / 2] {
            let addr = sym.address().wrapping_add(delta);
            let off = addr.wrapping_sub(vaddr).wrapping_add(offset);
            l.offsets.push(off);
            // The mapping puts the segment at its stated address.
            l.addresses.push(addr);
        }
    }
    if l.offsets.is_empty() {
        l.offsets.push(offset);
        l.addresses.push(vaddr);
    }
    l
}
