//! perf map files (`/tmp/perf-PID.map`): the text a JIT compiler or an
//! interpreter writes so that profilers can name the code it generated
//! (perf's JIT interface). One line per piece of code:
//!
//! ```text
//! START SIZE NAME
//! ```
//!
//! START and SIZE in hexadecimal, with or without `0x` (HotSpot writes it,
//! V8 and CPython do not), NAME the rest of the line, spaces included.
//!
//! The file is written while it is read: a runtime appends as it compiles,
//! so the last line may be half written. [`parse`] takes whole lines only
//! and says how far it got; the caller reads on from there next time.

/// One line of a perf map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    pub start: u64,
    pub size: u64,
    pub name: std::borrow::Cow<'a, str>,
}

/// A line longer than this is not a symbol but garbage (a runtime's names
/// are at most a few KiB: Java signatures with long generic types).
pub const MAX_LINE: usize = 64 << 10;

/// What [`parse`] made of a stretch of the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Bytes of whole lines (and of skipped garbage) taken: the next read
    /// starts there.
    pub consumed: usize,
    /// Lines skipped as malformed.
    pub malformed: u64,
}

fn hex(field: &[u8]) -> Option<u64> {
    let digits = field
        .strip_prefix(b"0x")
        .or_else(|| field.strip_prefix(b"0X"))
        .unwrap_or(field);
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// One line without its newline; None if it is not `START SIZE NAME` with
/// a non-empty range that does not wrap around.
pub fn parse_line(line: &[u8]) -> Option<Entry<'_>> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut fields = line.splitn(3, |&b| b == b' ');
    let start = hex(fields.next()?)?;
    let size = hex(fields.next()?)?;
    let name = fields.next()?.trim_ascii();
    if name.is_empty() || size == 0 || start.checked_add(size).is_none() {
        return None;
    }
    Some(Entry {
        start,
        size,
        name: String::from_utf8_lossy(name),
    })
}

/// The whole lines at the start of `bytes`, each well-formed one handed to
/// `each`. A line still being written (no newline yet) is left for the
/// next read, unless it is longer than [`MAX_LINE`]: then it is skipped
/// up to its end and counted; `skipping` carries that across reads.
pub fn parse(bytes: &[u8], skipping: &mut bool, mut each: impl FnMut(Entry<'_>)) -> Parsed {
    let mut out = Parsed::default();
    let mut rest = bytes;
    loop {
        let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
            if rest.len() > MAX_LINE {
                // Garbage without an end in sight: drop what is there.
                if !*skipping {
                    out.malformed += 1;
                    *skipping = true;
                }
                out.consumed += rest.len();
            }
            return out;
        };
        let line = &rest[..nl];
        if *skipping {
            *skipping = false;
        } else if line.len() > MAX_LINE {
            out.malformed += 1;
        } else if !line.trim_ascii().is_empty() {
            match parse_line(line) {
                Some(e) => each(e),
                None => out.malformed += 1,
            }
        }
        out.consumed += nl + 1;
        rest = &rest[nl + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &[u8]) -> (Vec<(u64, u64, String)>, Parsed) {
        let mut got = Vec::new();
        let mut skipping = false;
        let p = parse(text, &mut skipping, |e| {
            got.push((e.start, e.size, e.name.into_owned()))
        });
        (got, p)
    }

    #[test]
    fn the_lines_of_hotspot_v8_cpython_and_dotnet() {
        let text = b"\
0x00007efca8ec7620 0x00000000000000b8 long Hot.spinHot(long)
7fe2027c61c0 2a0 JS:*spinHot /tmp/x/hot.js:1:17
7f9b294bc7bc b py::spin_hot:/tmp/x/hot.py
00007F8D1C2A1240 5C [OptimizedTier1] int32 [app] Program::Spin(int32)[Optimized]
";
        let (got, p) = all(text);
        assert_eq!(
            got,
            [
                (0x7efca8ec7620, 0xb8, "long Hot.spinHot(long)".to_string()),
                (
                    0x7fe2027c61c0,
                    0x2a0,
                    "JS:*spinHot /tmp/x/hot.js:1:17".into()
                ),
                (0x7f9b294bc7bc, 0xb, "py::spin_hot:/tmp/x/hot.py".into()),
                (
                    0x7f8d1c2a1240,
                    0x5c,
                    "[OptimizedTier1] int32 [app] Program::Spin(int32)[Optimized]".into()
                ),
            ]
        );
        assert_eq!(p.consumed, text.len());
        assert_eq!(p.malformed, 0);
    }

    #[test]
    fn malformed_lines_are_counted_and_a_half_written_one_waits() {
        let text = b"\
1000 10 good
zzzz 10 not hex
1000 0 empty range
ffffffffffffffff 10 wraps
2000 10
\x00\x01\x02
\r

3000 20 last whole line
4000 1";
        let (got, p) = all(text);
        let names: Vec<&str> = got.iter().map(|g| g.2.as_str()).collect();
        assert_eq!(names, ["good", "last whole line"]);
        assert_eq!(p.malformed, 5);
        // The half-written line is not taken: the next read starts at it.
        assert_eq!(&text[p.consumed..], b"4000 1");
        let mut more = text[p.consumed..].to_vec();
        more.extend_from_slice(b"0 finished\n");
        let (got, p) = all(&more);
        assert_eq!(got, [(0x4000, 0x10, "finished".to_string())]);
        assert_eq!(p.consumed, more.len());
    }

    #[test]
    fn an_endless_line_is_skipped_once_across_reads() {
        let mut skipping = false;
        let garbage = vec![b'x'; MAX_LINE + 10];
        let p = parse(&garbage, &mut skipping, |_| panic!("no entry"));
        assert_eq!(
            (p.consumed, p.malformed, skipping),
            (garbage.len(), 1, true)
        );
        let mut got = Vec::new();
        let p = parse(b"xxxx\n10 4 after\n", &mut skipping, |e| {
            got.push(e.name.into_owned())
        });
        assert_eq!((p.malformed, skipping), (0, false));
        assert_eq!(got, ["after"]);
    }

    #[test]
    fn names_that_are_not_utf8_are_kept_readable() {
        let (got, p) = all(b"10 4 caf\xe9\n");
        assert_eq!(p.malformed, 0);
        assert_eq!(got[0].2, "caf\u{fffd}");
    }
}
