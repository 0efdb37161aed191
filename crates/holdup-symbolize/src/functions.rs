//! The functions of an ELF file, from its symbol tables (and those of its
//! separate debug file when it is stripped), and the function that holds a
//! source line.

use crate::lines::{self, Locations};
use object::{Object, ObjectSymbol};
use std::path::Path;

/// A function of a binary: its symbol and where its code is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    pub address: u64,
    pub size: u64,
}

/// The functions `file` defines, from both symbol tables; for a stripped
/// file (no `.symtab`), also those of its separate debug file, found by
/// build-id (its addresses are the file's).
pub fn of_file(file: &object::File<'_>) -> Result<Vec<Function>, String> {
    let of = |f: &object::File<'_>| -> Vec<Function> {
        text_symbols(f)
            .filter_map(|s| {
                Some(Function {
                    name: s.name().ok()?.to_string(),
                    address: s.address(),
                    size: s.size(),
                })
            })
            .collect()
    };
    let mut all = of(file);
    if file.section_by_name(".symtab").is_none() {
        if let Some(debug) = lines::separate_debug_file(file) {
            let data = read_binary(&debug)?;
            let dfile =
                object::File::parse(&*data).map_err(|e| format!("{}: {e}", debug.display()))?;
            all.extend(of(&dfile));
        }
    }
    Ok(all)
}

/// The functions a file defines, from both symbol tables.
pub fn text_symbols<'a>(
    file: &'a object::File<'_>,
) -> impl Iterator<Item = object::Symbol<'a, 'a>> {
    file.symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.is_definition() && s.kind() == object::SymbolKind::Text)
}

/// The bytes of a binary named by a user or by a process (`BINARY:` of a
/// spec, a command found on PATH, a process's executable): its links
/// resolved, as the kernel resolves a uprobe's path, then read as a traced
/// process's file (never blocking on a FIFO, a file its owner can change
/// copied, not mapped).
pub fn read_binary(binary: &Path) -> Result<holdup_traced::Contents, String> {
    binary
        .canonicalize()
        .and_then(|real| holdup_traced::read(&real))
        .map_err(|e| format!("{}: {e}", binary.display()))
}

/// `f` of the parsed ELF file `binary`.
pub fn with_elf<T>(
    binary: &Path,
    f: impl FnOnce(&object::File<'_>, &[u8]) -> Result<T, String>,
) -> Result<T, String> {
    let data = read_binary(binary)?;
    let file = object::File::parse(&*data).map_err(|e| format!("{}: {e}", binary.display()))?;
    f(&file, &data)
}

/// The lowest address of line `spec` (`FILE:LINE`), or of the first line
/// with code among the `below` lines after it.
pub fn line_address(binary: &Path, spec: &str, below: u32) -> Result<u64, String> {
    let mut locs = Locations::default();
    let table = lines::from_elf(&read_binary(binary)?, &mut locs, &|_| true)
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let no_code = || {
        format!(
            "line {spec} has no code in {} (is it built with -g?)",
            binary.display()
        )
    };
    let (file, line) = spec.rsplit_once(':').ok_or_else(no_code)?;
    let line: u32 = line.trim().parse().map_err(|_| no_code())?;
    (line..=line.saturating_add(below))
        .find_map(|l| {
            locs.find(&format!("{file}:{l}"))
                .and_then(|loc| table.first_address(loc))
        })
        .ok_or_else(no_code)
}

/// How many lines below a line without code `function_at` looks at.
const NEXT_LINES: u32 = 19;

/// The function whose code holds line `file_line` (`FILE:LINE`) of
/// `binary`: its symbol, for tools that time whole functions.
///
/// The line of a function's name often has no code of its own (its entry
/// is the line of the opening brace): as a debugger's breakpoint does, the
/// first line with code at or after the given one counts.
pub fn function_at(binary: &Path, file_line: &str) -> Result<String, String> {
    let svma = line_address(binary, file_line, NEXT_LINES)?;
    with_elf(binary, |file, _| {
        of_file(file)?
            .into_iter()
            .find(|f| f.address <= svma && svma < f.address.saturating_add(f.size))
            .map(|f| f.name)
            .ok_or_else(|| {
                format!(
                    "line {file_line} of {} is in no function of its symbol table (stripped?)",
                    binary.display()
                )
            })
    })
}
