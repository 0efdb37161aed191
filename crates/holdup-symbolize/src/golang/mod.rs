//! Go binaries, for following goroutines: the version (`.go.buildinfo`),
//! the functions ([`pclntab`], which stripping keeps), where the recorder
//! probes the scheduler, the runtime's layout for that version and the
//! names of its wait reasons, all read from the binary itself.

pub mod pclntab;

use crate::python::layout::{file_bytes, file_range};
use object::{Object, ObjectSection, ObjectSymbol};
use pclntab::Functions;
use std::path::Path;

/// Why a Go binary's goroutines cannot be followed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

/// Offsets in the runtime's structures: `g` (a goroutine), `m` (an OS
/// thread), `pollDesc` (a descriptor in the network poller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub g_m: u16,
    pub g_sched_sp: u16,
    pub g_sched_pc: u16,
    pub g_sched_bp: u16,
    pub g_goid: u16,
    pub m_curg: u16,
    pub pd_fd: u16,
}

/// Per-version layouts of Go's `runtime.g` and `runtime.m`, by minor
/// version of Go 1. 1.26 read from a binary's DWARF; the others laid out
/// from each release's `runtime/runtime2.go` by the same rules: 1.23 added
/// `g.syscallbp` (goid moves from 152 to 160), 1.25 dropped `gobuf.ret`
/// (sched.bp moves from 104 to 96, goid back to 152, m.curg from 192 to
/// 184). `pollDesc.fd` is its second word in all of them.
#[rustfmt::skip]
const TABLES: [(u8, [u16; 7]); 6] = [
    //    g: m  sched sp pc bp  goid  m: curg  pd: fd
    (21, [48,   56, 64, 104,   152,   192,     8]),
    (22, [48,   56, 64, 104,   152,   192,     8]),
    (23, [48,   56, 64, 104,   160,   192,     8]),
    (24, [48,   56, 64, 104,   160,   192,     8]),
    (25, [48,   56, 64, 96,    152,   184,     8]),
    (26, [48,   56, 64, 96,    152,   184,     8]),
];

/// The layout of Go 1.`minor`, if there is a table for it.
pub fn layout(minor: u8) -> Option<Layout> {
    let &(_, [g_m, g_sched_sp, g_sched_pc, g_sched_bp, g_goid, m_curg, pd_fd]) =
        TABLES.iter().find(|(v, _)| *v == minor)?;
    Some(Layout {
        g_m,
        g_sched_sp,
        g_sched_pc,
        g_sched_bp,
        g_goid,
        m_curg,
        pd_fd,
    })
}

/// File offsets where the scheduler is probed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probes {
    pub gopark: u64,
    pub ready: u64,
    pub execute: u64,
    pub netpollblock: Option<u64>,
    /// Functions whose prologue was not the usual one: probed at their
    /// entry, where a uprobe costs ten times as much.
    pub at_entry: Vec<&'static str>,
}

/// What the recorder needs of one Go binary.
#[derive(Clone, Debug)]
pub struct GoBinary {
    /// `go1.26.8`.
    pub version: String,
    pub minor: u8,
    pub layout: Layout,
    pub probes: Probes,
    /// Wait reason names by the runtime's number.
    pub reasons: Vec<String>,
    /// Read from the binary (false: the built-in names of the version).
    pub reasons_from_binary: bool,
}

/// The Go version a binary was built with, from `.go.buildinfo`: magic
/// `\xff Go buildinf:`, pointer size, flags (bit 1: strings inline, Go
/// 1.18+), then at 32 a varint-prefixed `go1.X.Y`.
pub fn version(elf: &object::File<'_>) -> Option<String> {
    let info = elf.section_by_name(".go.buildinfo")?.data().ok()?;
    if info.get(..14)? != b"\xff Go buildinf:" || info.get(15)? & 2 == 0 {
        return None;
    }
    let (len, at) = uvarint(info.get(32..)?)?;
    let text = info.get(32 + at..32 + at + usize::try_from(len).ok()?)?;
    Some(String::from_utf8_lossy(text).into_owned())
}

fn uvarint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// `go1.26.8` → 26 (Go 1 only).
fn minor_of(version: &str) -> Option<u8> {
    let rest = version.strip_prefix("go1.")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The functions of a Go binary: its symbol table's, or its pclntab's when
/// stripped. None for binaries without either.
pub fn functions(elf: &object::File<'_>) -> Option<Functions> {
    let tab = elf.section_by_name(".gopclntab")?.data().ok()?;
    let text = elf.section_by_name(".text")?.address();
    pclntab::parse(tab, text)
}

/// The functions at file offsets `offsets` of the Go binary at `path`,
/// from its pclntab: what names the frames of a stripped Go binary. None
/// when it is no Go binary.
pub fn names_at_offsets(path: &Path, offsets: &[u64]) -> Option<Vec<Option<String>>> {
    use object::ObjectSegment;
    let contents = crate::traced::read(path).ok()?;
    let elf = object::File::parse(&*contents).ok()?;
    let funcs = functions(&elf)?;
    let vaddr = |off: u64| {
        elf.segments().find_map(|s| {
            let (start, size) = s.file_range();
            let at = off.checked_sub(start)?;
            (at < size).then(|| s.address() + at)
        })
    };
    Some(
        offsets
            .iter()
            .map(|&o| vaddr(o).and_then(|a| funcs.at(a)).map(String::from))
            .collect(),
    )
}

/// Where a probe on the function at `entry` goes: past its stack check
/// (`cmp 0x10(%r14),%rsp; jbe morestack`), on the `push %rbp` after it
/// (a jbe of 6 bytes or 2). None when the prologue is another.
fn past_stack_check(code: &[u8]) -> Option<u64> {
    if code.get(..4)? != [0x49, 0x3b, 0x66, 0x10] {
        return None;
    }
    let after = match code.get(4..6)? {
        [0x0f, 0x86] => 10,
        [0x76, _] => 6,
        _ => return None,
    };
    (*code.get(after)? == 0x55).then_some(after as u64)
}

fn probes(elf: &object::File<'_>, data: &[u8], funcs: &Functions) -> Result<Probes, Refusal> {
    let mut at_entry = Vec::new();
    let mut site = |name: &'static str| -> Option<u64> {
        let entry = funcs.entry(name)?;
        let off = file_range(elf, entry..entry + 1)?.start;
        let skip = file_bytes(elf, data, entry, 16).and_then(past_stack_check);
        if skip.is_none() {
            at_entry.push(name);
        }
        Some(off + skip.unwrap_or(0))
    };
    let need = |found: Option<u64>, name: &str| {
        found.ok_or_else(|| Refusal(format!("no {name} in its function table")))
    };
    let gopark = need(site("runtime.gopark"), "runtime.gopark")?;
    let ready = need(site("runtime.ready"), "runtime.ready")?;
    let execute = need(site("runtime.execute"), "runtime.execute")?;
    let netpollblock = site("runtime.netpollblock");
    Ok(Probes {
        gopark,
        ready,
        execute,
        netpollblock,
        at_entry,
    })
}

/// The wait reason names of the binary: the array
/// `runtime.waitReasonStrings` (`[N]string`: pointer and length each), by
/// its symbol, or in a stripped binary where the string of reason 1
/// ("GC assist marking") is pointed at from the data.
fn wait_reasons(elf: &object::File<'_>, data: &[u8]) -> Option<Vec<String>> {
    let (start, size) = match elf
        .symbols()
        .find(|s| s.name() == Ok("runtime.waitReasonStrings"))
    {
        Some(s) => (s.address(), s.size()),
        None => (find_reason_array(elf)?, 64 * 16),
    };
    let mut names = Vec::new();
    for i in 0..size / 16 {
        let Some(entry) = file_bytes(elf, data, start + i * 16, 16) else {
            break;
        };
        let ptr = u64::from_le_bytes(entry[..8].try_into().unwrap());
        let len = u64::from_le_bytes(entry[8..].try_into().unwrap());
        if i == 0 {
            names.push(String::new());
            continue;
        }
        if len == 0 || len > 64 {
            break;
        }
        let Some(text) = file_bytes(elf, data, ptr, len) else {
            break;
        };
        names.push(String::from_utf8_lossy(text).into_owned());
    }
    (names.len() > 1).then_some(names)
}

fn find_reason_array(elf: &object::File<'_>) -> Option<u64> {
    const FIRST: &[u8] = b"GC assist marking";
    let rodata = elf.section_by_name(".rodata")?;
    let bytes = rodata.data().ok()?;
    let at = bytes.windows(FIRST.len()).position(|w| w == FIRST)?;
    let addr = rodata.address() + at as u64;
    let mut pair = addr.to_le_bytes().to_vec();
    pair.extend_from_slice(&(FIRST.len() as u64).to_le_bytes());
    let data = elf.section_by_name(".data")?;
    let bytes = data.data().ok()?;
    let at = bytes
        .chunks_exact(8)
        .enumerate()
        .find(|(i, _)| bytes.get(i * 8..i * 8 + 16) == Some(&pair[..]))?
        .0;
    (data.address() + at as u64 * 8).checked_sub(16)
}

/// Inspect an executable: None when it is no Go binary, a refusal when it
/// is one whose goroutines cannot be followed.
pub fn inspect(path: &Path) -> Result<Option<GoBinary>, Refusal> {
    let contents = crate::traced::read(path).map_err(|e| Refusal(format!("unreadable: {e}")))?;
    let data: &[u8] = &contents;
    let Ok(elf) = object::File::parse(data) else {
        return Ok(None);
    };
    if elf.section_by_name(".gopclntab").is_none() {
        return Ok(None);
    }
    if elf.architecture() != object::Architecture::X86_64 {
        return Err(Refusal("only x86-64 Go binaries are supported".into()));
    }
    let version = version(&elf).ok_or_else(|| Refusal("no Go version in the binary".into()))?;
    let minor = minor_of(&version).unwrap_or(0);
    let layout = layout(minor).ok_or_else(|| {
        Refusal(format!(
            "{version}: no table of its runtime's layout (Go 1.21 to 1.26 have one)"
        ))
    })?;
    let funcs = functions(&elf)
        .ok_or_else(|| Refusal(format!("{version}: its function table is unreadable")))?;
    let probes = probes(&elf, data, &funcs)?;
    let (reasons, reasons_from_binary) = match wait_reasons(&elf, data) {
        Some(r) => (r, true),
        None => (Vec::new(), false),
    };
    Ok(Some(GoBinary {
        version,
        minor,
        layout,
        probes,
        reasons,
        reasons_from_binary,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_goes_past_the_stack_check() {
        let long = [0x49, 0x3b, 0x66, 0x10, 0x0f, 0x86, 1, 2, 3, 4, 0x55, 0x48];
        assert_eq!(past_stack_check(&long), Some(10));
        let short = [0x49, 0x3b, 0x66, 0x10, 0x76, 0x20, 0x55];
        assert_eq!(past_stack_check(&short), Some(6));
        // A large frame checks through another register: probed at entry.
        let other = [0x4c, 0x8d, 0x64, 0x24, 0xf8, 0x4d, 0x3b, 0x66, 0x10];
        assert_eq!(past_stack_check(&other), None);
        let no_push = [0x49, 0x3b, 0x66, 0x10, 0x76, 0x20, 0x90];
        assert_eq!(past_stack_check(&no_push), None);
    }

    #[test]
    fn versions_with_a_table_and_without() {
        assert_eq!(minor_of("go1.26.8"), Some(26));
        assert_eq!(minor_of("go1.21rc2"), Some(21));
        assert_eq!(minor_of("devel +abc"), None);
        assert_eq!(layout(23).unwrap().g_goid, 160);
        assert_eq!(layout(26).unwrap().g_goid, 152);
        assert_eq!(layout(26).unwrap().m_curg, 184);
        assert!(layout(20).is_none() && layout(27).is_none());
        assert_eq!(uvarint(&[0x88, 0x01]), Some((136, 2)));
    }
}
