//! The line of an instruction, from a code object's line table as the
//! recorder copied it.
//!
//! - 3.10 (PEP 626 `co_linetable`): pairs `(byte-offset delta: u8, line
//!   delta: i8)`; a line delta of -128 means the range has no line. Looked up
//!   by byte offset, `2 * f_lasti`.
//! - 3.11+ (location table): entries whose first byte has bit 7 set; bits
//!   3-6 are the form, bits 0-2 the length in code units minus one. Form 15:
//!   no location; 14: long (signed varint line delta, then end line, column,
//!   end column as varints); 13: no column (signed varint line delta);
//!   10-12: line delta `form - 10` and two column bytes; 0-9: same line,
//!   one column byte. Varints are 6-bit chunks, bit 6 set when more follow;
//!   a signed varint keeps its sign in bit 0. Looked up by code unit.

/// The line of the instruction at code unit `lasti` (3.10's `f_lasti`), or
/// None when the table gives it none (or does not reach it).
pub fn line_310(table: &[u8], first_line: i32, lasti: u32) -> Option<u32> {
    let target = u64::from(lasti) * 2;
    let mut line = i64::from(first_line);
    let mut end = 0u64;
    for pair in table.chunks_exact(2) {
        let start = end;
        end += u64::from(pair[0]);
        let delta = pair[1] as i8;
        let has_line = delta != -128;
        if has_line {
            line += i64::from(delta);
        }
        if start <= target && target < end {
            return has_line.then(|| u32::try_from(line).ok()).flatten();
        }
    }
    None
}

/// The line of a frame at instruction `instr` of a code object whose line
/// table is `table` (3.10's by byte offset when `v310`, else the location
/// table), first line `first_line` and size `units` code units (0: not
/// known); None where the table gives none, or the instruction is not
/// known (`u32::MAX`) or outside the code.
pub fn line_at(table: &[u8], first_line: i32, units: u32, v310: bool, instr: u32) -> Option<u32> {
    match instr {
        u32::MAX => None,
        i if v310 => line_310(table, first_line, i),
        i if units != 0 && i >= units => None,
        i => line_311(table, first_line, i),
    }
}

/// A cursor over a 3.11+ location table.
struct Cursor<'a> {
    table: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.table.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut b = self.byte()?;
        let mut v = u64::from(b & 63);
        let mut shift = 6;
        while b & 64 != 0 {
            b = self.byte()?;
            if shift >= 64 {
                return None;
            }
            v |= u64::from(b & 63) << shift;
            shift += 6;
        }
        Some(v)
    }

    fn signed_varint(&mut self) -> Option<i64> {
        let v = self.varint()?;
        let magnitude = (v >> 1) as i64;
        Some(if v & 1 != 0 { -magnitude } else { magnitude })
    }
}

/// The line of the instruction at code unit `unit` (3.11+), or None when
/// the table gives it none (or does not reach it, as a table cut short
/// by the recorder may not).
pub fn line_311(table: &[u8], first_line: i32, unit: u32) -> Option<u32> {
    let mut c = Cursor { table, at: 0 };
    let mut line = i64::from(first_line);
    let mut start = 0u64;
    while c.at < table.len() {
        let b = c.byte()?;
        let form = (b >> 3) & 15;
        let len = u64::from(b & 7) + 1;
        let has_line = match form {
            15 => false,
            14 => {
                line += c.signed_varint()?;
                c.varint()?;
                c.varint()?;
                c.varint()?;
                true
            }
            13 => {
                line += c.signed_varint()?;
                true
            }
            10..=12 => {
                line += i64::from(form - 10);
                c.byte()?;
                c.byte()?;
                true
            }
            _ => {
                c.byte()?;
                true
            }
        };
        if start <= u64::from(unit) && u64::from(unit) < start + len {
            return has_line.then(|| u32::try_from(line).ok()).flatten();
        }
        start += len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_310_table_gives_each_byte_range_its_line() {
        // [0, 6) line 10 (first 10, +0), [6, 10) no line, [10, 14) line 12
        // (+2 from 10), [14, 20) line 11.
        let table = [6, 0, 4, 0x80, 4, 2, 6, 0xff];
        assert_eq!(line_310(&table, 10, 0), Some(10));
        assert_eq!(line_310(&table, 10, 2), Some(10));
        assert_eq!(line_310(&table, 10, 3), None, "no line");
        assert_eq!(line_310(&table, 10, 5), Some(12));
        assert_eq!(line_310(&table, 10, 9), Some(11));
        assert_eq!(line_310(&table, 10, 10), None, "past the table");
        assert_eq!(line_310(&[], 10, 0), None);
    }

    #[test]
    fn a_311_table_decodes_every_form() {
        let table = [
            // form 0 (same line), 2 units, one column byte: [0, 2) line 5
            0x80 | 1,
            7,
            // form 11 (+1), 1 unit, two column bytes: [2, 3) line 6
            0x80 | (11 << 3),
            1,
            2,
            // form 13 (signed varint -2: 5), 3 units: [3, 6) line 4
            0x80 | (13 << 3) | 2,
            5,
            // form 15 (no location), 1 unit: [6, 7)
            0x80 | (15 << 3),
            // form 14 (long: +40 as 80, varint with a continuation chunk:
            // 80 = 16 | 1 << 6 → bytes 0x50, 0x01), end line, columns:
            // [7, 8) line 44
            0x80 | (14 << 3),
            0x40 | 16,
            1,
            0,
            3,
            4,
        ];
        let at = |u| line_311(&table, 5, u);
        assert_eq!((at(0), at(1)), (Some(5), Some(5)));
        assert_eq!(at(2), Some(6));
        assert_eq!((at(3), at(5)), (Some(4), Some(4)));
        assert_eq!(at(6), None, "no location");
        assert_eq!(at(7), Some(44));
        assert_eq!(at(8), None, "past the table");
        // A table the recorder cut inside an entry gives what it holds.
        assert_eq!(line_311(&table[..11], 5, 7), None);
        assert_eq!(line_311(&table[..11], 5, 2), Some(6));
    }

    /// Tables CPython made, checked against its own `co_lines()`, when an
    /// interpreter of the version is installed (pyenv's).
    #[test]
    fn decoders_agree_with_the_interpreters_own_lines() {
        let Some(home) = std::env::var_os("HOME") else {
            return;
        };
        let script = r#"
import sys, types, threading, queue, json.decoder
def codes(co):
    yield co
    for c in co.co_consts:
        if isinstance(c, types.CodeType): yield from codes(c)
for m in (threading, queue, json.decoder):
    co = m.__spec__.loader.get_code(m.__name__)
    for c in codes(co):
        for start, end, line in c.co_lines():
            for off in range(start, end, 2):
                print(c.co_linetable.hex(), c.co_firstlineno, off // 2, -1 if line is None else line)
"#;
        let mut checked = 0;
        for version in ["3.10.13", "3.11.7", "3.12.1", "3.13.0"] {
            let python =
                std::path::Path::new(&home).join(format!(".pyenv/versions/{version}/bin/python"));
            if !python.exists() {
                eprintln!("skipped: no {}", python.display());
                continue;
            }
            let out = std::process::Command::new(&python)
                .args(["-c", script])
                .output()
                .unwrap();
            let text = String::from_utf8(out.stdout).unwrap();
            for l in text.lines() {
                let f: Vec<&str> = l.split(' ').collect();
                let table: Vec<u8> = (0..f[0].len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&f[0][i..i + 2], 16).unwrap())
                    .collect();
                let (first, unit): (i32, u32) = (f[1].parse().unwrap(), f[2].parse().unwrap());
                let want: i64 = f[3].parse().unwrap();
                let got = if version.starts_with("3.10") {
                    line_310(&table, first, unit)
                } else {
                    line_311(&table, first, unit)
                };
                assert_eq!(got.map_or(-1, i64::from), want, "{version} {l}");
                checked += 1;
            }
        }
        eprintln!("{checked} instructions checked");
    }
}
