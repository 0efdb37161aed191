//! jitdump files (`jit-PID.dump`): the binary record of generated code
//! that `perf inject --jit` reads (perf's `jitdump-specification.txt`).
//! V8 writes it with `--perf-prof`, CPython 3.13 with `-X perf_jit`.
//!
//! A header, then records that each start with `{id: u32, total_size: u32,
//! timestamp: u64}`:
//!
//! - `JIT_CODE_LOAD` (0): `pid, tid: u32; vma, code_addr, code_size,
//!   code_index: u64`, the NUL-terminated name, then the code itself;
//! - `JIT_CODE_MOVE` (1): `pid, tid: u32; vma, old_code_addr,
//!   new_code_addr, code_size, code_index: u64` (a moving collector);
//! - `JIT_CODE_DEBUG_INFO` (2): `code_addr, nr_entry: u64`, then entries
//!   `{addr: u64, line: i32, discrim: i32, NUL-terminated file name}`
//!   (`"\xff"` alone: the file of the entry before). It comes before the
//!   load of the code it describes;
//! - `JIT_CODE_CLOSE` (3): the end; later kinds (unwinding information) are
//!   skipped.
//!
//! The writer's byte order is the one its magic number reads right in.
//! Like a perf map, the file grows while it is read: [`parse`] takes whole
//! records only and says how far it got.

/// `"JiTD"` as the writer's u32.
const MAGIC: u32 = 0x4A69_5444;
/// Bytes of the header this parser reads (the file says how long it is).
pub const HEADER_SIZE: usize = 40;
const PREFIX: usize = 16;
const CODE_LOAD: u32 = 0;
const CODE_MOVE: u32 = 1;
const DEBUG_INFO: u32 = 2;
const CODE_CLOSE: u32 = 3;

/// A record larger than this is corruption, not code (V8's largest
/// functions are a few hundred KiB).
pub const MAX_RECORD: usize = 16 << 20;

/// The file's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Written on a machine of the other byte order.
    pub swapped: bool,
    pub version: u32,
    pub pid: u32,
    /// Where the records start.
    pub size: usize,
}

/// Why a file is no jitdump.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    #[error("too short for a jitdump header")]
    Short,
    #[error("no jitdump magic number")]
    Magic,
    #[error("jitdump header of {0} bytes")]
    Size(u32),
}

/// The byte order a file was written in.
#[derive(Clone, Copy, Debug)]
struct Order {
    swapped: bool,
}

impl Order {
    fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        let v = u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?);
        Some(if self.swapped { v.swap_bytes() } else { v })
    }

    fn u64(self, b: &[u8], at: usize) -> Option<u64> {
        let v = u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?);
        Some(if self.swapped { v.swap_bytes() } else { v })
    }
}

/// The header at the start of the file. Its `total_size` may be larger
/// than the fields known here (a later version's); never smaller.
pub fn parse_header(bytes: &[u8]) -> Result<Header, HeaderError> {
    if bytes.len() < HEADER_SIZE {
        return Err(HeaderError::Short);
    }
    let magic = u32::from_ne_bytes(bytes[0..4].try_into().unwrap());
    let order = match magic {
        MAGIC => Order { swapped: false },
        m if m.swap_bytes() == MAGIC => Order { swapped: true },
        _ => return Err(HeaderError::Magic),
    };
    let size = order.u32(bytes, 8).unwrap();
    if (size as usize) < HEADER_SIZE || size as usize > MAX_RECORD {
        return Err(HeaderError::Size(size));
    }
    Ok(Header {
        swapped: order.swapped,
        version: order.u32(bytes, 4).unwrap(),
        pid: order.u32(bytes, 20).unwrap(),
        size: size as usize,
    })
}

/// A source line of generated code, from `JIT_CODE_DEBUG_INFO`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineEntry {
    /// The first address of the line's code.
    pub addr: u64,
    pub file: String,
    pub line: u32,
}

/// What a record says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Load {
        addr: u64,
        size: u64,
        name: String,
    },
    Move {
        from: u64,
        to: u64,
        size: u64,
    },
    /// The lines of the code at `code_addr`, whose load comes next.
    Lines {
        code_addr: u64,
        entries: Vec<LineEntry>,
    },
}

/// What [`parse`] made of a stretch of records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Bytes of whole records taken: the next read starts there.
    pub consumed: usize,
    /// Records skipped as malformed.
    pub malformed: u64,
    /// The writer closed the file, or the records cannot be followed any
    /// further (a record size that cannot be): nothing after this counts.
    pub ended: bool,
}

/// A NUL-terminated string at the start of `b`, and the bytes after it.
fn c_string(b: &[u8]) -> Option<(String, &[u8])> {
    let end = b.iter().position(|&c| c == 0)?;
    Some((
        String::from_utf8_lossy(&b[..end]).into_owned(),
        &b[end + 1..],
    ))
}

fn code_load(o: Order, body: &[u8]) -> Option<Event> {
    let addr = o.u64(body, 16)?;
    let size = o.u64(body, 24)?;
    let (name, _code) = c_string(body.get(40..)?)?;
    (size > 0 && addr.checked_add(size).is_some()).then_some(Event::Load { addr, size, name })
}

fn code_move(o: Order, body: &[u8]) -> Option<Event> {
    let from = o.u64(body, 16)?;
    let to = o.u64(body, 24)?;
    let size = o.u64(body, 32)?;
    (size > 0 && to.checked_add(size).is_some()).then_some(Event::Move { from, to, size })
}

fn debug_info(o: Order, body: &[u8]) -> Option<Event> {
    let code_addr = o.u64(body, 0)?;
    let count = o.u64(body, 8)?;
    let mut rest = body.get(16..)?;
    // Each entry takes at least 17 bytes: a count beyond that is a lie.
    if count > (rest.len() / 17) as u64 {
        return None;
    }
    let mut entries: Vec<LineEntry> = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let addr = o.u64(rest, 0)?;
        let line = o.u32(rest, 8)? as i32;
        let (file, after) = c_string(rest.get(16..)?)?;
        // "\xff": the same file as the entry before.
        let file = match (file.as_str(), entries.last()) {
            ("\u{fffd}", Some(prev)) => prev.file.clone(),
            _ => file,
        };
        if line > 0 {
            entries.push(LineEntry {
                addr,
                file,
                line: line as u32,
            });
        }
        rest = after;
    }
    Some(Event::Lines { code_addr, entries })
}

/// The whole records at the start of `bytes` (which follow the header),
/// each one understood handed to `each`. A record still being written is
/// left for the next read.
pub fn parse(header: &Header, bytes: &[u8], mut each: impl FnMut(Event)) -> Parsed {
    let o = Order {
        swapped: header.swapped,
    };
    let mut out = Parsed::default();
    while let (Some(id), Some(size)) = (o.u32(bytes, out.consumed), o.u32(bytes, out.consumed + 4))
    {
        let size = size as usize;
        if !(PREFIX..=MAX_RECORD).contains(&size) {
            // Where the next record starts is lost.
            out.malformed += 1;
            out.ended = true;
            return out;
        }
        let Some(record) = bytes.get(out.consumed..out.consumed + size) else {
            return out; // still being written
        };
        let body = &record[PREFIX..];
        let event = match id {
            CODE_LOAD => Some(code_load(o, body)),
            CODE_MOVE => Some(code_move(o, body)),
            DEBUG_INFO => Some(debug_info(o, body)),
            CODE_CLOSE => {
                out.consumed += size;
                out.ended = true;
                return out;
            }
            _ => None, // unwinding information, or a kind from later
        };
        match event {
            Some(Some(e)) => each(e),
            Some(None) => out.malformed += 1,
            None => {}
        }
        out.consumed += size;
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds jitdump files in the writer's byte order (`swapped`: the
    /// other one), as a runtime would.
    pub struct Writer {
        pub bytes: Vec<u8>,
        swapped: bool,
    }

    impl Writer {
        pub fn new(pid: u32, swapped: bool) -> Self {
            let mut w = Self {
                bytes: Vec::new(),
                swapped,
            };
            w.u32(MAGIC);
            w.u32(1);
            w.u32(HEADER_SIZE as u32);
            w.u32(62); // EM_X86_64
            w.u32(0);
            w.u32(pid);
            w.u64(1);
            w.u64(0);
            w
        }

        fn u32(&mut self, v: u32) {
            let v = if self.swapped { v.swap_bytes() } else { v };
            self.bytes.extend(v.to_ne_bytes());
        }

        fn u64(&mut self, v: u64) {
            let v = if self.swapped { v.swap_bytes() } else { v };
            self.bytes.extend(v.to_ne_bytes());
        }

        fn record(&mut self, id: u32, body: impl FnOnce(&mut Self)) {
            let at = self.bytes.len();
            self.u32(id);
            self.u32(0);
            self.u64(7);
            body(self);
            let size = (self.bytes.len() - at) as u32;
            let size = if self.swapped {
                size.swap_bytes()
            } else {
                size
            };
            self.bytes[at + 4..at + 8].copy_from_slice(&size.to_ne_bytes());
        }

        pub fn load(&mut self, addr: u64, size: u64, name: &str) {
            self.record(CODE_LOAD, |w| {
                w.u32(1);
                w.u32(1);
                w.u64(addr);
                w.u64(addr);
                w.u64(size);
                w.u64(0);
                w.bytes.extend(name.as_bytes());
                w.bytes.push(0);
                w.bytes.extend(vec![0x90; size as usize]);
            });
        }

        pub fn moved(&mut self, from: u64, to: u64, size: u64) {
            self.record(CODE_MOVE, |w| {
                w.u32(1);
                w.u32(1);
                w.u64(to);
                w.u64(from);
                w.u64(to);
                w.u64(size);
                w.u64(0);
            });
        }

        pub fn lines(&mut self, code_addr: u64, entries: &[(u64, i32, &str)]) {
            self.record(DEBUG_INFO, |w| {
                w.u64(code_addr);
                w.u64(entries.len() as u64);
                let mut prev = None;
                for &(addr, line, file) in entries {
                    w.u64(addr);
                    w.u32(line as u32);
                    w.u32(0);
                    if prev == Some(file) {
                        w.bytes.extend(b"\xff\0");
                    } else {
                        w.bytes.extend(file.as_bytes());
                        w.bytes.push(0);
                    }
                    prev = Some(file);
                }
            });
        }

        pub fn unwinding_info(&mut self) {
            self.record(4, |w| w.bytes.extend([0u8; 24]));
        }

        pub fn close(&mut self) {
            self.record(CODE_CLOSE, |_| {});
        }
    }

    fn events(bytes: &[u8]) -> (Header, Vec<Event>, Parsed) {
        let header = parse_header(bytes).unwrap();
        let mut got = Vec::new();
        let p = parse(&header, &bytes[header.size..], |e| got.push(e));
        (header, got, p)
    }

    #[test]
    fn loads_moves_and_lines_in_either_byte_order() {
        for swapped in [false, true] {
            let mut w = Writer::new(4242, swapped);
            w.lines(
                0x1000,
                &[
                    (0x1000, 3, "a.js"),
                    (0x1010, 4, "a.js"),
                    (0x1020, 0, "a.js"),
                ],
            );
            w.load(0x1000, 0x40, "JS:*hot a.js:3");
            w.unwinding_info();
            w.moved(0x1000, 0x9000, 0x40);
            w.close();
            w.load(0x2000, 0x10, "after the close");
            let (h, got, p) = events(&w.bytes);
            assert_eq!((h.pid, h.version, h.swapped), (4242, 1, swapped));
            assert_eq!(got.len(), 3, "{got:?}");
            let Event::Lines { code_addr, entries } = &got[0] else {
                panic!("{got:?}")
            };
            assert_eq!(*code_addr, 0x1000);
            // Line 0 is no line; "\xff" repeats the file.
            assert_eq!(entries.len(), 2);
            assert_eq!((entries[1].addr, entries[1].line), (0x1010, 4));
            assert_eq!(entries[1].file, "a.js");
            assert_eq!(
                got[1],
                Event::Load {
                    addr: 0x1000,
                    size: 0x40,
                    name: "JS:*hot a.js:3".into()
                }
            );
            assert_eq!(
                got[2],
                Event::Move {
                    from: 0x1000,
                    to: 0x9000,
                    size: 0x40
                }
            );
            assert!(p.ended);
            assert_eq!(p.malformed, 0);
        }
    }

    #[test]
    fn a_record_being_written_waits_and_a_broken_one_ends_the_file() {
        let mut w = Writer::new(1, false);
        w.load(0x1000, 0x10, "one");
        let whole = w.bytes.len();
        w.load(0x2000, 0x10, "two");
        let cut = &w.bytes[..w.bytes.len() - 3];
        let (h, got, p) = events(cut);
        assert_eq!(got.len(), 1);
        assert_eq!(
            h.size + p.consumed,
            whole,
            "stops before the partial record"
        );
        assert!(!p.ended);
        // A load whose name has no end is skipped, the next one read.
        let mut w = Writer::new(1, false);
        w.record(CODE_LOAD, |w| {
            w.bytes.extend([0u8; 40]);
            w.bytes.extend(b"no terminator");
        });
        w.load(0x3000, 0x10, "three");
        let (_, got, p) = events(&w.bytes);
        assert_eq!((got.len(), p.malformed, p.ended), (1, 1, false));
        // A size that cannot be: nothing after it can be found.
        let mut bytes = Writer::new(1, false).bytes;
        bytes.extend(0u32.to_ne_bytes());
        bytes.extend(8u32.to_ne_bytes());
        bytes.extend([0u8; 64]);
        let (_, got, p) = events(&bytes);
        assert_eq!((got.len(), p.malformed, p.ended), (0, 1, true));
        // A debug record claiming more entries than it holds.
        let mut w = Writer::new(1, false);
        w.record(DEBUG_INFO, |w| {
            w.u64(0x1000);
            w.u64(1 << 40);
        });
        let (_, got, p) = events(&w.bytes);
        assert_eq!((got.len(), p.malformed), (0, 1));
    }

    #[test]
    fn headers_that_are_not_jitdump() {
        assert_eq!(parse_header(b"JiT"), Err(HeaderError::Short));
        assert_eq!(parse_header(&[0u8; 64]), Err(HeaderError::Magic));
        let mut w = Writer::new(1, false);
        w.bytes[8..12].copy_from_slice(&8u32.to_ne_bytes());
        assert_eq!(parse_header(&w.bytes), Err(HeaderError::Size(8)));
    }
}
