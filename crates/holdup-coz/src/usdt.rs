//! USDT probes (`<sys/sdt.h>`'s `DTRACE_PROBE`/`STAP_PROBE`) as progress
//! points: `usdt:BINARY:PROVIDER:NAME`. Each probe site is a `nop` named
//! by a note in `.note.stapsdt`; a uprobe on that nop counts its visits
//! (the kernel emulates a nop: one trap, no single-step). A probe with a
//! semaphore runs only while the semaphore is raised, so the uprobe is
//! given the semaphore's file offset and the kernel raises it in every
//! process that maps the binary.

use crate::names;
use crate::probe::{file_offset, stepped_at, Site};
use holdup_symbolize::functions::with_elf;
use object::{Object, ObjectSection};
use std::path::{Path, PathBuf};

/// Note type of a SystemTap SDT probe (name "stapsdt").
const NT_STAPSDT: u32 = 3;

/// One probe site as its note describes it (static addresses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub provider: String,
    pub name: String,
    pub pc: u64,
    /// Address of its semaphore, 0 for none.
    pub semaphore: u64,
    /// Address of `.stapsdt.base` at link time (prelink moves it).
    pub base: u64,
}

/// A place to count a USDT probe's visits: a uprobe at `site`, and the
/// file offset of the semaphore to raise (0 for none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsdtSite {
    pub site: Site,
    pub semaphore_offset: u64,
}

/// The notes of a `.note.stapsdt` section: 4-byte aligned records of
/// namesz, descsz, type, the name and the description (pc, base,
/// semaphore, then provider, name and argument format, NUL-terminated).
pub fn parse_notes(section: &[u8]) -> Vec<Note> {
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(
            section.get(at..at + 4)?.try_into().ok()?,
        ))
    };
    let align = |n: usize| n.div_ceil(4) * 4;
    let mut notes = Vec::new();
    let mut at = 0;
    while let (Some(namesz), Some(descsz), Some(kind)) = (word(at), word(at + 4), word(at + 8)) {
        let name_at = at + 12;
        let desc_at = name_at + align(namesz as usize);
        let next = desc_at + align(descsz as usize);
        let (Some(name), Some(desc)) = (
            section.get(name_at..name_at + namesz as usize),
            section.get(desc_at..desc_at + descsz as usize),
        ) else {
            break;
        };
        if kind == NT_STAPSDT && name == b"stapsdt\0" {
            notes.extend(parse_desc(desc));
        }
        at = next;
    }
    notes
}

fn parse_desc(desc: &[u8]) -> Option<Note> {
    let addr = |i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            desc.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    let (pc, base, semaphore) = (addr(0)?, addr(1)?, addr(2)?);
    let mut strings = desc.get(24..)?.split(|&b| b == 0);
    let mut text = || {
        strings
            .next()
            .map(|s| String::from_utf8_lossy(s).into_owned())
    };
    let (provider, name) = (text()?, text()?);
    (!provider.is_empty() && !name.is_empty()).then_some(Note {
        provider,
        name,
        pc,
        semaphore,
        base,
    })
}

/// `BINARY:PROVIDER:NAME` (after `usdt:`) → the binary and the probe.
fn split_spec(spec: &str) -> Result<(PathBuf, &str, &str), String> {
    let mut parts = spec.rsplitn(3, ':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(name), Some(provider), Some(binary))
            if !name.is_empty() && !provider.is_empty() && !binary.is_empty() =>
        {
            Ok((PathBuf::from(binary), provider, name))
        }
        _ => Err(format!(
            "usdt:{spec}: a USDT probe is usdt:BINARY:PROVIDER:NAME, like usdt:/usr/bin/node:node:gc__start"
        )),
    }
}

/// The USDT probes of `binary` (empty when it has none).
pub fn probes_of(binary: &Path) -> Result<Vec<Note>, String> {
    with_elf(binary, |file, _| Ok(notes_of(file)))
}

fn notes_of(file: &object::File<'_>) -> Vec<Note> {
    file.section_by_name(".note.stapsdt")
        .and_then(|s| s.data().ok())
        .map(parse_notes)
        .unwrap_or_default()
}

/// The sites of USDT probe `spec` (`BINARY:PROVIDER:NAME`, after
/// `usdt:`): every note of that probe (a probe in inlined code has
/// several). None is an error that lists the binary's closest probes.
pub fn resolve(spec: &str) -> Result<Vec<UsdtSite>, String> {
    let (binary, provider, name) = split_spec(spec)?;
    with_elf(&binary, |file, data| {
        let notes = notes_of(file);
        if notes.is_empty() {
            return Err(format!(
                "{} has no USDT probes (no .note.stapsdt section)",
                binary.display()
            ));
        }
        // Where the linker put .stapsdt.base, against where the notes
        // say it was: prelinking moves the probes by the difference.
        let moved = |n: &Note, addr: u64| match file.section_by_name(".stapsdt.base") {
            Some(s) if n.base != 0 => addr.wrapping_add(s.address()).wrapping_sub(n.base),
            _ => addr,
        };
        let in_file = |n: &Note, addr: u64| {
            file_offset(file, moved(n, addr)).ok_or_else(|| {
                format!(
                    "USDT probe {}:{} in {}: address {addr:#x} is in no loaded segment",
                    n.provider,
                    n.name,
                    binary.display()
                )
            })
        };
        let mut sites = Vec::new();
        for n in notes
            .iter()
            .filter(|n| n.provider == provider && n.name == name)
        {
            let offset = in_file(n, n.pc)?;
            let semaphore_offset = match n.semaphore {
                0 => 0,
                s => in_file(n, s)?,
            };
            sites.push(UsdtSite {
                site: Site {
                    binary: binary.clone(),
                    offset,
                    single_stepped: stepped_at(file, data, offset),
                },
                semaphore_offset,
            });
        }
        if sites.is_empty() {
            let near = near_in(&notes, provider, name);
            return Err(format!(
                "no USDT probe {provider}:{name} in {}{}",
                binary.display(),
                if near.is_empty() {
                    String::new()
                } else {
                    format!("; closest: {}", near.join(", "))
                }
            ));
        }
        Ok(sites)
    })
}

/// The probes of `notes` closest to `provider:name`, as `PROVIDER:NAME`.
fn near_in(notes: &[Note], provider: &str, name: &str) -> Vec<String> {
    let mut all: Vec<String> = notes
        .iter()
        .map(|n| format!("{}:{}", n.provider, n.name))
        .collect();
    all.sort();
    all.dedup();
    let wanted = format!("{provider}:{name}");
    names::closest(&wanted, all.iter().map(String::as_str))
}

/// The probes of the binary of `spec` closest to the one it names (what a
/// user may have meant by a probe nobody visits).
pub fn near_probes(spec: &str) -> Vec<String> {
    let Ok((binary, provider, name)) = split_spec(spec) else {
        return Vec::new();
    };
    probes_of(&binary)
        .map(|notes| near_in(&notes, provider, name))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A note as the assembler lays it out.
    fn note(provider: &str, name: &str, pc: u64, semaphore: u64) -> Vec<u8> {
        let mut desc = Vec::new();
        for a in [pc, 0x1000, semaphore] {
            desc.extend(a.to_le_bytes());
        }
        for s in [provider, name, "-4@%edi"] {
            desc.extend(s.as_bytes());
            desc.push(0);
        }
        let mut out = Vec::new();
        for w in [8u32, desc.len() as u32, NT_STAPSDT] {
            out.extend(w.to_le_bytes());
        }
        out.extend(b"stapsdt\0");
        out.extend(&desc);
        out.resize(out.len().div_ceil(4) * 4, 0);
        out
    }

    #[test]
    fn notes_are_read_in_order_and_a_cut_one_is_dropped() {
        let mut section = note("app", "request__start", 0x1234, 0);
        section.extend(note("app", "gc", 0x2000, 0x4010));
        let whole = section.len();
        section.extend(note("app", "cut", 0x3000, 0));
        section.truncate(whole + 20);
        let notes = parse_notes(&section);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert_eq!(
            (
                notes[0].provider.as_str(),
                notes[0].name.as_str(),
                notes[0].pc
            ),
            ("app", "request__start", 0x1234)
        );
        assert_eq!((notes[1].semaphore, notes[1].base), (0x4010, 0x1000));
    }

    #[test]
    fn a_spec_names_binary_provider_and_probe() {
        let (b, p, n) = split_spec("/usr/bin/node:node:gc__start").unwrap();
        assert_eq!(
            (b, p, n),
            (PathBuf::from("/usr/bin/node"), "node", "gc__start")
        );
        for bad in ["node:gc__start", "/bin/x::tick", "tick"] {
            let e = split_spec(bad).unwrap_err();
            assert!(e.contains("usdt:BINARY:PROVIDER:NAME"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_binary_without_probes_is_said() {
        let exe = std::env::current_exe().unwrap();
        let e = resolve(&format!("{}:app:tick", exe.display())).unwrap_err();
        assert!(e.contains("has no USDT probes"), "{e}");
    }
}
