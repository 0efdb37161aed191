//! The text a symbol cache file holds: the symbols earlier recordings found
//! in one file (by build-id), so that finishing a recording of programs
//! already symbolized needs no symbol table or DWARF parsing. The files live
//! in a per-user cache directory that the recorder (as root) reads, so the
//! text is untrusted input: it is parsed line by line, and anything that
//! does not parse makes the whole entry unused.

use crate::record::SymFrame;
use std::collections::HashMap;

/// The first line; bumped when what a cache file holds changes meaning.
pub const FORMAT: &str = "holdup-symbols-1";

/// Offset in the file → its frames (empty: nothing known there).
pub type FileSymbols = HashMap<u64, Vec<SymFrame>>;

/// One line per offset: `offset<TAB>function<TAB>file<TAB>line` repeated
/// per frame (innermost first), after the format line. Names with tabs or
/// newlines are not cached.
pub fn format(symbols: &FileSymbols) -> String {
    let mut out = format!("{FORMAT}\n");
    let mut offsets: Vec<&u64> = symbols.keys().collect();
    offsets.sort();
    'entries: for off in offsets {
        let mut line = format!("{off:x}");
        for f in &symbols[off] {
            let file = f.file.as_deref().unwrap_or("");
            if [&f.function[..], file]
                .iter()
                .any(|s| s.contains(['\t', '\n']))
            {
                continue 'entries;
            }
            line.push_str(&format!("\t{}\t{}\t{}", f.function, file, f.line));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The symbols in `text`, or None if it is not a cache file of this format.
pub fn parse(text: &str) -> Option<FileSymbols> {
    let mut lines = text.lines();
    if lines.next()? != FORMAT {
        return None;
    }
    let mut out = FileSymbols::new();
    for line in lines {
        let mut fields = line.split('\t');
        let off = u64::from_str_radix(fields.next()?, 16).ok()?;
        let fields: Vec<&str> = fields.collect();
        if !fields.len().is_multiple_of(3) {
            return None;
        }
        let frames = fields
            .chunks(3)
            .map(|f| {
                Some(SymFrame {
                    function: f[0].to_string(),
                    file: (!f[1].is_empty()).then(|| f[1].to_string()),
                    line: f[2].parse().ok()?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        out.insert(off, frames);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_formatted_parses_back() {
        let frame = |function: &str, file: Option<&str>, line| SymFrame {
            function: function.into(),
            file: file.map(Into::into),
            line,
        };
        let mut syms = FileSymbols::new();
        syms.insert(
            0x1234,
            vec![frame("inner", Some("a.c"), 7), frame("outer", None, 0)],
        );
        syms.insert(0x10, Vec::new());
        // Names with tabs or newlines are left out, not garbled.
        syms.insert(0x20, vec![frame("a\tb", None, 1)]);
        let back = parse(&format(&syms)).unwrap();
        syms.remove(&0x20);
        assert_eq!(back, syms);
    }

    #[test]
    fn garbage_is_no_cache() {
        assert!(parse("something else\n1\tf\t\t0\n").is_none());
        assert!(parse(&format!("{FORMAT}\nzz\tf\t\t0\n")).is_none());
        assert!(parse(&format!("{FORMAT}\n1\tf\t\n")).is_none());
    }
}
