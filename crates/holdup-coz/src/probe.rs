//! Progress points without recompiling: where a uprobe goes for a
//! `SYMBOL` or a `FILE:LINE` of a binary, as an offset in the file.

use crate::names;
use holdup_symbolize::functions::{line_address, of_file as functions, with_elf};
use object::{Object, ObjectSegment};
use std::path::{Path, PathBuf};

pub use holdup_symbolize::functions::function_at;

/// A place in an ELF file where visits can be counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    pub binary: PathBuf,
    /// Offset in the file, as the kernel's uprobes take it.
    pub offset: u64,
    /// The kernel single-steps the probed instruction instead of
    /// emulating it: each visit then takes a second trap.
    pub single_stepped: bool,
}

/// `[BINARY:]FUNCTION` or `[BINARY:]FILE:LINE`; without a binary, the
/// function or line is looked up in `default_binary`. A prefix is a binary
/// when it names an ELF file (a source file never does), and a `::` of a
/// C++ or Rust name splits nothing. A function is named as `names` reads
/// names: every overload, instantiation or monomorphization that answers
/// to it is a site (one for a mangled symbol or a C function).
pub fn resolve(default_binary: Option<&Path>, spec: &str) -> Result<Vec<Site>, String> {
    let (binary, what) = binary_of(default_binary, spec)
        .ok_or_else(|| format!("'{spec}': give the binary as BINARY:{spec}"))?;
    let line_svma = if names::is_file_line(what) {
        Some(line_address(&binary, what, 0)?)
    } else {
        None
    };
    with_elf(&binary, |file, data| {
        let svmas = match line_svma {
            Some(svma) => vec![svma],
            None => named(file, &binary, what)?
                .into_iter()
                .map(|(_, a)| a)
                .collect(),
        };
        svmas
            .into_iter()
            .map(|svma| {
                let offset = file_offset(file, svma).ok_or_else(|| {
                    format!(
                        "'{what}' in {}: address {svma:#x} is in no loaded segment",
                        binary.display()
                    )
                })?;
                Ok(Site {
                    binary: binary.clone(),
                    offset,
                    single_stepped: stepped_at(file, data, offset),
                })
            })
            .collect()
    })
}

/// The binary a spec names (`BINARY:` when it is an ELF file), or the
/// default one, and the rest of the spec.
fn binary_of<'a>(default_binary: Option<&Path>, spec: &'a str) -> Option<(PathBuf, &'a str)> {
    match names::split_binary(spec, |h| is_elf(Path::new(h))) {
        Some((head, rest)) => Some((PathBuf::from(head), rest)),
        None => default_binary.map(|b| (b.to_path_buf(), spec)),
    }
}

/// The functions of the binary of `spec` (as [`resolve`] finds it) whose
/// names are closest to the function it names; empty for a line.
pub fn near_functions(default_binary: Option<&Path>, spec: &str) -> Vec<String> {
    let Some((binary, what)) = binary_of(default_binary, spec) else {
        return Vec::new();
    };
    if names::is_file_line(what) {
        return Vec::new();
    }
    with_elf(&binary, |file, _| {
        let functions = functions(file)?;
        Ok(names::closest(
            what,
            functions.iter().map(|f| f.name.as_str()),
        ))
    })
    .unwrap_or_default()
}

/// The symbols of the functions of `binary` that answer to `name` (see
/// `names`): one per address, in address order.
pub fn functions_named(binary: &Path, name: &str) -> Result<Vec<String>, String> {
    with_elf(binary, |file, _| {
        Ok(named(file, binary, name)?
            .into_iter()
            .map(|(s, _)| s)
            .collect())
    })
}

/// (symbol, address) of the functions answering to `name`; none is an
/// error that lists the closest names.
fn named(file: &object::File<'_>, binary: &Path, name: &str) -> Result<Vec<(String, u64)>, String> {
    let functions = functions(file)?;
    let mut found: Vec<(String, u64)> = functions
        .iter()
        .filter(|f| names::answers_to(&f.name, name))
        .map(|f| (f.name.clone(), f.address))
        .collect();
    // Both symbol tables, and aliases (a C++ constructor's C1 and C2).
    found.sort_by_key(|&(_, a)| a);
    found.dedup_by_key(|&mut (_, a)| a);
    if found.is_empty() {
        let near = names::closest(name, functions.iter().map(|f| f.name.as_str()));
        let stripped = file.section_by_name(".symtab").is_none();
        let hint = if stripped {
            " (it is stripped: no symbol table, and no debug file found by its build-id)"
                .to_string()
        } else if near.is_empty() {
            String::new()
        } else {
            format!("; closest: {}", near.join(", "))
        };
        return Err(format!(
            "no function '{name}' in {}{hint}",
            binary.display()
        ));
    }
    Ok(found)
}

/// Where uprobes go for `symbols` of `binary`, as
/// [`functions_named`] gives them: found in its symbol tables or, when it
/// is stripped, in its debug file by build-id (one read of the file for
/// all); None for a name it does not define. The kernel takes a uprobe by
/// file offset, so a function only a debug file names can be probed too.
pub fn sites_of(binary: &Path, symbols: &[&str]) -> Result<Vec<Option<Site>>, String> {
    with_elf(binary, |file, data| {
        let defined = functions(file)?;
        Ok(symbols
            .iter()
            .map(|name| {
                let f = defined.iter().find(|f| f.name == *name)?;
                let offset = file_offset(file, f.address)?;
                Some(Site {
                    binary: binary.to_path_buf(),
                    offset,
                    single_stepped: stepped_at(file, data, offset),
                })
            })
            .collect())
    })
}

/// Whether a uprobe at file offset `offset` is single-stepped.
pub(crate) fn stepped_at(file: &object::File<'_>, data: &[u8], offset: u64) -> bool {
    let code = data.get(offset as usize..).unwrap_or_default();
    file.architecture() == object::Architecture::X86_64 && !x86_emulated(code)
}

/// Whether x86-64 uprobes emulate the instruction that `code` starts with:
/// pushes of a register, nops, calls and jumps. Any other instruction is
/// copied out of line and single-stepped, a second trap that costs ~20 µs
/// a visit on some virtual machines (against well under 1 µs emulated).
fn x86_emulated(code: &[u8]) -> bool {
    match code {
        [0x50..=0x57 | 0x90 | 0xe8 | 0xe9 | 0xeb | 0x70..=0x7f, ..] => true,
        [0x41, 0x50..=0x57, ..] => true, // push %r8..%r15
        [0x0f, 0x1f, ..] | [0x66, 0x0f, 0x1f, ..] => true, // multi-byte nops
        [0x0f, 0x80..=0x8f, ..] => true, // jcc rel32
        _ => false,
    }
}

fn is_elf(path: &Path) -> bool {
    use std::os::unix::fs::FileExt;
    let mut magic = [0u8; 4];
    path.canonicalize()
        .and_then(|real| holdup_traced::open(&real))
        .and_then(|(f, _)| f.read_exact_at(&mut magic, 0))
        .is_ok()
        && magic == *b"\x7fELF"
}

/// A loaded segment of an ELF file: where it is in the file and at which
/// static address it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub offset: u64,
    pub len: u64,
    pub svma: u64,
}

impl Segment {
    /// The static address of file offset `offset` of the segments `segs`.
    pub fn svma_of(segs: &[Segment], offset: u64) -> Option<u64> {
        segs.iter()
            .find(|s| offset >= s.offset && offset < s.offset + s.len)
            .map(|s| offset - s.offset + s.svma)
    }
}

/// The loaded segments of an ELF file: what turns the file offsets of a
/// process's mappings into the addresses of its line table.
pub fn segments(elf: &[u8]) -> Result<Vec<Segment>, String> {
    let file = object::File::parse(elf).map_err(|e| e.to_string())?;
    Ok(file
        .segments()
        .map(|seg| {
            let (offset, len) = seg.file_range();
            Segment {
                offset,
                len,
                svma: seg.address(),
            }
        })
        .collect())
}

/// Where static address `svma` lies in the file.
pub(crate) fn file_offset(file: &object::File<'_>, svma: u64) -> Option<u64> {
    file.segments().find_map(|seg| {
        let (off, len) = seg.file_range();
        let start = seg.address();
        (svma >= start && svma < start + len).then(|| svma - start + off)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_of_this_test_binary() {
        let exe = std::env::current_exe().unwrap();
        // A function of libc that every Rust test binary imports is not
        // defined here; a missing name is an error that names it.
        let err = resolve(Some(&exe), "no_such_function_anywhere").unwrap_err();
        assert!(err.contains("no_such_function_anywhere"), "{err}");
        let err = resolve(None, "main").unwrap_err();
        assert!(err.contains("BINARY:main"), "{err}");
        let sites = resolve(Some(&exe), "main").unwrap();
        assert_eq!(sites.len(), 1);
        assert!(sites[0].offset > 0);
        let with_binary = format!("{}:main", exe.display());
        assert_eq!(resolve(None, &with_binary).unwrap(), sites);
        // By symbol, the same place; a name it does not define is none.
        let by_symbol = sites_of(&exe, &["main", "no_such_function_anywhere"]).unwrap();
        assert_eq!(by_symbol, vec![Some(sites[0].clone()), None]);
    }

    #[test]
    fn a_fifo_named_as_the_binary_is_refused_at_once() {
        let (dir, fifo) = crate::test_fifo::fifo("probe-fifo");
        let path = fifo.clone();
        let e = crate::test_fifo::error_at_once(move || resolve(Some(&path), "main"));
        assert!(e.contains("a FIFO"), "{e}");
        // Nor is a FIFO taken for a BINARY: prefix.
        let spec = format!("{}:main", fifo.display());
        let e = resolve(None, &spec).unwrap_err();
        assert!(e.contains("BINARY:"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn instructions_the_kernel_emulates() {
        for code in [
            &[0x55, 0x48][..],               // push %rbp
            &[0x41, 0x57],                   // push %r15
            &[0x0f, 0x1f, 0x44, 0x00, 0x00], // nopl
            &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00],
            &[0xe8, 0, 0, 0, 0],       // call
            &[0xeb, 0x10],             // jmp
            &[0x0f, 0x84, 0, 0, 0, 0], // je rel32
        ] {
            assert!(x86_emulated(code), "{code:x?}");
        }
        for code in [
            &[0xc3][..],                     // ret
            &[0xf3, 0x0f, 0x1e, 0xfa],       // endbr64
            &[0x48, 0x83, 0xec, 0x08],       // sub $8,%rsp
            &[0x48, 0x89, 0x3d, 0, 0, 0, 0], // mov %rdi,...(%rip)
            &[],
        ] {
            assert!(!x86_emulated(code), "{code:x?}");
        }
    }
}
