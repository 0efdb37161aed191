//! The function table every Go binary carries for its own tracebacks
//! (`.gopclntab`, kept when the binary is stripped): each function's entry
//! address and name. Formats of Go 1.18 and later (magic 0xfffffff0 and
//! 0xfffffff1), the header being
//! `magic u32, pad u8, pad u8, min instruction size u8, pointer size u8`,
//! then pointer-sized words: function count, file count, text start,
//! and the offsets of the name, compile-unit, file, pc and function tables.

/// Functions by entry address, and where the last one ends.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Functions {
    /// (entry address, name), sorted by entry.
    pub entries: Vec<(u64, String)>,
    pub end: u64,
}

impl Functions {
    /// The function that holds `addr`.
    pub fn at(&self, addr: u64) -> Option<&str> {
        if addr >= self.end {
            return None;
        }
        let i = self.entries.partition_point(|&(e, _)| e <= addr);
        Some(self.entries.get(i.checked_sub(1)?)?.1.as_str())
    }

    /// The entry address of function `name`.
    pub fn entry(&self, name: &str) -> Option<u64> {
        self.entries
            .iter()
            .find(|(_, n)| n == name)
            .map(|&(e, _)| e)
    }
}

const MAGIC_118: u32 = 0xffff_fff0;
const MAGIC_120: u32 = 0xffff_fff1;

/// The functions of a pclntab whose text starts at `text` (the `.text`
/// section's address: the header's own word may be unrelocated). None for
/// other formats (Go before 1.18) and tables that do not hold together.
pub fn parse(tab: &[u8], text: u64) -> Option<Functions> {
    let u32_at = |off: usize| -> Option<u32> {
        Some(u32::from_le_bytes(tab.get(off..off + 4)?.try_into().ok()?))
    };
    let magic = u32_at(0)?;
    if magic != MAGIC_118 && magic != MAGIC_120 {
        return None;
    }
    if *tab.get(7)? != 8 {
        return None;
    }
    let word = |i: usize| -> Option<usize> {
        let off = 8 + i * 8;
        usize::try_from(u64::from_le_bytes(tab.get(off..off + 8)?.try_into().ok()?)).ok()
    };
    let nfunc = word(0)?;
    let names = tab.get(word(3)?..)?;
    let functab_off = word(7)?;
    let funcdata = tab.get(functab_off..)?;
    // nfunc (entry offset, func offset) pairs of u32, then the end offset.
    if funcdata.len() < (nfunc * 2 + 1) * 4 {
        return None;
    }
    let field = |i: usize| u32::from_le_bytes(funcdata[i * 4..i * 4 + 4].try_into().unwrap());
    let mut entries = Vec::with_capacity(nfunc);
    for i in 0..nfunc {
        let entry = text + u64::from(field(2 * i));
        let func = field(2 * i + 1) as usize;
        // _func: entry offset u32, name offset i32, ...
        let name_off = u32::from_le_bytes(funcdata.get(func + 4..func + 8)?.try_into().ok()?);
        let name = names.get(name_off as usize..)?;
        let len = name.iter().position(|&b| b == 0)?;
        entries.push((entry, String::from_utf8_lossy(&name[..len]).into_owned()));
    }
    entries.sort_by_key(|e| e.0);
    Some(Functions {
        entries,
        end: text + u64::from(field(2 * nfunc)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of two functions laid out as the linker writes it.
    fn table() -> Vec<u8> {
        let mut t = Vec::new();
        t.extend_from_slice(&MAGIC_120.to_le_bytes());
        t.extend_from_slice(&[0, 0, 1, 8]);
        // nfunc, nfiles, text, names, cu, files, pc, functab
        let names_at = 8 + 8 * 8;
        let names = b"main.main\0main.contender\0";
        let functab_at = names_at + names.len();
        for w in [2, 0, 0, names_at, 0, 0, 0, functab_at] {
            t.extend_from_slice(&(w as u64).to_le_bytes());
        }
        t.extend_from_slice(names);
        // (entry, func) pairs, end; then the two _func records.
        let funcs_at = 5 * 4;
        for v in [0x100u32, funcs_at, 0x40, funcs_at + 8, 0x180] {
            t.extend_from_slice(&v.to_le_bytes());
        }
        for name in [0u32, 10] {
            t.extend_from_slice(&0u32.to_le_bytes());
            t.extend_from_slice(&name.to_le_bytes());
        }
        t
    }

    #[test]
    fn functions_come_sorted_with_their_names_and_ends() {
        let f = parse(&table(), 0x40_1000).unwrap();
        assert_eq!(
            f.entries,
            vec![
                (0x40_1040, "main.contender".to_string()),
                (0x40_1100, "main.main".to_string())
            ]
        );
        assert_eq!(f.at(0x40_1041), Some("main.contender"));
        assert_eq!(f.at(0x40_1100), Some("main.main"));
        assert_eq!(f.at(0x40_1180), None, "past the end");
        assert_eq!(f.at(0x40_1000), None, "before the first");
        assert_eq!(f.entry("main.main"), Some(0x40_1100));
    }

    #[test]
    fn other_formats_and_cut_tables_are_none() {
        let mut t = table();
        t[0] = 0xfb;
        assert!(parse(&t, 0).is_none());
        let t = table();
        assert!(parse(&t[..t.len() - 12], 0).is_none());
    }
}
