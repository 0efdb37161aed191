//! Kernel text symbols from `/proc/kallsyms`.

/// Kernel function symbols sorted by address. Names live in one string so
/// that the ~200k symbols of a distribution kernel cost two allocations.
#[derive(Clone, Debug, Default)]
pub struct KernelSymbols {
    /// (address, start and end of the name in `names`)
    syms: Vec<(u64, u32, u32)>,
    names: String,
}

/// Past the last symbol, an address is only credited to it this far.
const LAST_SYMBOL_SPAN: u64 = 1 << 20;

impl KernelSymbols {
    /// Read `/proc/kallsyms`. Without root every address reads as 0, which
    /// leaves the table empty.
    pub fn load() -> std::io::Result<Self> {
        Ok(Self::parse(&std::fs::read_to_string("/proc/kallsyms")?))
    }

    /// Parse text in the `/proc/kallsyms` format: `ADDR TYPE NAME [MODULE]`.
    /// Only text symbols (t, T, w, W) are kept.
    pub fn parse(text: &str) -> Self {
        let mut out = Self::default();
        for line in text.lines() {
            let mut f = line.split_ascii_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            if !matches!(kind, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            let start = out.names.len() as u32;
            out.names.push_str(name);
            out.syms.push((addr, start, out.names.len() as u32));
        }
        // Stable: among aliases at one address the first listed wins.
        out.syms.sort_by_key(|s| s.0);
        out
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// The function containing `addr`: its name and start address.
    pub fn find(&self, addr: u64) -> Option<(&str, u64)> {
        let i = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let mut j = i;
        // Aliases share an address: report the first one listed.
        while j > 0 && self.syms[j - 1].0 == self.syms[i].0 {
            j -= 1;
        }
        let (start, a, b) = self.syms[j];
        if i + 1 == self.syms.len() && addr - start >= LAST_SYMBOL_SPAN {
            return None;
        }
        Some((&self.names[a as usize..b as usize], start))
    }

    /// Every symbol, sorted by address (for writing into a trace file).
    pub fn iter(&self) -> impl Iterator<Item = (u64, &str)> {
        self.syms
            .iter()
            .map(|&(addr, a, b)| (addr, &self.names[a as usize..b as usize]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_containing_function() {
        let k = KernelSymbols::parse(
            "ffffffff81000000 T _stext\n\
             ffffffff81000100 t helper\n\
             ffffffff81000100 T helper_alias\n\
             ffffffff81000200 D some_data\n\
             ffffffff81000300 T vfs_read\n\
             ffffffffc0000000 t ext4_read [ext4]\n\
             0000000000000000 T hidden\n\
             nonsense\n",
        );
        assert_eq!(k.len(), 5);
        assert_eq!(k.find(0xffffffff80ffffff), None);
        assert_eq!(
            k.find(0xffffffff81000000),
            Some(("_stext", 0xffffffff81000000))
        );
        assert_eq!(k.find(0xffffffff81000150).unwrap().0, "helper");
        // Data symbols do not end a function: it runs to the next text symbol.
        assert_eq!(k.find(0xffffffff81000250).unwrap().0, "helper");
        assert_eq!(k.find(0xffffffff81000301).unwrap().0, "vfs_read");
        assert_eq!(k.find(0xffffffffc0000010).unwrap().0, "ext4_read");
        assert_eq!(k.find(0xffffffffc0000000 + LAST_SYMBOL_SPAN), None);
    }

    #[test]
    fn unprivileged_kallsyms_is_empty() {
        let k = KernelSymbols::parse("0000000000000000 T _stext\n0000000000000000 T vfs_read\n");
        assert!(k.is_empty());
        assert_eq!(k.find(0x1234), None);
    }
}
