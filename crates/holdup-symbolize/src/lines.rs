//! Source lines of machine code, from DWARF line tables (versions 2–5), or
//! its functions, from the symbol tables, where there is no line table or
//! whole functions are wanted (the causal profiler's targets).
//!
//! COZ 0.2.2 reads line tables with libelfin, which stops at DWARF 5 — the
//! default of gcc ≥ 11. gimli reads every version, so the same code path
//! serves `-gdwarf-3 -gstrict-dwarf` binaries and gcc 12's default output.
//!
//! A table maps static addresses (as in the ELF file) to interned source
//! locations: a sorted list of non-overlapping ranges, searched by binary
//! search, because lookups happen for every frame of every sample.

use gimli::{EndianSlice, LittleEndian, Reader};
use object::{Object, ObjectSection};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Interned locations shared by all tables: `file:line` source lines, and
/// whole functions of a binary.
#[derive(Default, Debug)]
pub struct Locations {
    /// `path:line` of a line, the symbol of a function.
    names: Vec<String>,
    by_name: HashMap<String, u32>,
    /// Source paths and binaries' file names.
    files: Vec<String>,
    file_ids: HashMap<String, u32>,
    keys: Vec<Key>,
    by_key: HashMap<(u32, u32), u32>,
}

#[derive(Clone, Copy, Debug)]
enum Key {
    /// (file id, line)
    Line(u32, u32),
    /// The binary's file id; the symbol is the location's name.
    Function(u32),
}

/// What a location is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place<'a> {
    Line {
        file: &'a str,
        line: u32,
    },
    /// A function of `binary` (a file name), by its symbol as the symbol
    /// table has it (mangled, for C++ and Rust).
    Function {
        binary: &'a str,
        symbol: &'a str,
    },
}

/// Which locations a table has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Granularity {
    /// Source lines where there is a line table, else functions.
    #[default]
    Line,
    /// Functions, line table or not.
    Function,
}

impl Locations {
    fn file_id(&mut self, path: &str) -> u32 {
        if let Some(&id) = self.file_ids.get(path) {
            return id;
        }
        let id = self.files.len() as u32;
        self.files.push(path.to_string());
        self.file_ids.insert(path.to_string(), id);
        id
    }

    fn intern(&mut self, file: u32, line: u32) -> u32 {
        if let Some(&id) = self.by_key.get(&(file, line)) {
            return id;
        }
        let id = self.names.len() as u32;
        let name = format!("{}:{}", self.files[file as usize], line);
        self.by_name.insert(name.clone(), id);
        self.names.push(name);
        self.keys.push(Key::Line(file, line));
        self.by_key.insert((file, line), id);
        id
    }

    /// A new location for function `symbol` of `binary` (its file name):
    /// a binary's table interns each function once.
    fn intern_function(&mut self, binary: u32, symbol: &str) -> u32 {
        let id = self.names.len() as u32;
        self.names.push(symbol.to_string());
        self.keys.push(Key::Function(binary));
        id
    }

    /// The location of line `line` of `file`, for code that has no table
    /// here (an interpreter's): the same line of the same file is one
    /// location.
    pub fn line(&mut self, file: &str, line: u32) -> u32 {
        let f = self.file_id(file);
        self.intern(f, line)
    }

    /// A new location for function `symbol` of `binary` (a file name), for
    /// code that has no table here; the caller keeps it and asks once.
    pub fn function(&mut self, binary: &str, symbol: &str) -> u32 {
        let b = self.file_id(binary);
        self.intern_function(b, symbol)
    }

    /// `path:line` of a line, the symbol of a function.
    pub fn name(&self, loc: u32) -> &str {
        &self.names[loc as usize]
    }

    /// The line or function a location is.
    pub fn place(&self, loc: u32) -> Place<'_> {
        match self.keys[loc as usize] {
            Key::Line(file, line) => Place::Line {
                file: &self.files[file as usize],
                line,
            },
            Key::Function(binary) => Place::Function {
                binary: &self.files[binary as usize],
                symbol: &self.names[loc as usize],
            },
        }
    }

    /// The function locations of `binary` whose symbol `matches`.
    pub fn functions<'a>(
        &'a self,
        binary: &'a str,
        matches: impl Fn(&str) -> bool + 'a,
    ) -> impl Iterator<Item = u32> + 'a {
        (0..self.keys.len() as u32).filter(move |&loc| {
            matches!(self.place(loc), Place::Function { binary: b, symbol } if b == binary && matches(symbol))
        })
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The location named exactly `name` (`path:line`).
    pub fn id(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// Find a location from a user's `FILE:LINE`, where FILE may be any
    /// suffix of the recorded path that starts at a path component.
    pub fn find(&self, spec: &str) -> Option<u32> {
        let (file, line) = spec.rsplit_once(':')?;
        let line: u32 = line.trim().parse().ok()?;
        let file = file.trim();
        self.keys.iter().enumerate().find_map(|(id, &key)| {
            let Key::Line(f, l) = key else {
                return None;
            };
            let path = &self.files[f as usize];
            let matches = path == file
                || (path.ends_with(file) && path[..path.len() - file.len()].ends_with('/'));
            (l == line && matches).then_some(id as u32)
        })
    }
}

#[derive(Clone, Copy, Debug)]
struct Range {
    start: u64,
    end: u64,
    loc: u32,
}

/// Address ranges of one object file, in its static addresses.
#[derive(Default, Debug)]
pub struct LineTable {
    ranges: Vec<Range>,
}

impl LineTable {
    pub fn lookup(&self, svma: u64) -> Option<u32> {
        let i = self.ranges.partition_point(|r| r.start <= svma);
        let r = self.ranges.get(i.checked_sub(1)?)?;
        (svma < r.end).then_some(r.loc)
    }

    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// The lowest address of location `loc`: where a line's code is
    /// entered when it is the start of a statement.
    pub fn first_address(&self, loc: u32) -> Option<u64> {
        self.ranges.iter().find(|r| r.loc == loc).map(|r| r.start)
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("cannot read the object file: {0}")]
    Io(#[from] std::io::Error),
    #[error("cannot parse the object file: {0}")]
    Elf(String),
    #[error("cannot read its line table: {0}")]
    Dwarf(#[from] gimli::Error),
}

/// Which source files are wanted: a predicate on the full path.
pub type FileFilter<'a> = &'a dyn Fn(&str) -> bool;

/// Read the line table of the ELF file at `path`, or of its separate debug
/// file under /usr/lib/debug when the file itself carries none. The file
/// may be a traced process's, read as root: it is opened as
/// [`holdup_traced::read`] does (a FIFO, a link or anything but a regular
/// file is refused at once, one its owner can change is copied).
pub fn load(path: &Path, locs: &mut Locations, keep: FileFilter<'_>) -> Result<LineTable, Error> {
    let data = holdup_traced::read(path)?;
    from_elf(&data, locs, keep)
}

/// The table of targets of the ELF file `data` (file name `binary`): its
/// source lines (those `keep` wants) at [`Granularity::Line`] when it has a
/// line table, else its functions; and which of the two it is. A file with
/// neither gives an empty table.
pub fn targets_from_elf(
    data: &[u8],
    binary: &str,
    locs: &mut Locations,
    keep: FileFilter<'_>,
    granularity: Granularity,
) -> Result<(LineTable, Granularity), Error> {
    let file = object::File::parse(data).map_err(|e| Error::Elf(e.to_string()))?;
    if granularity == Granularity::Line {
        if file.section_by_name(".debug_line").is_some() {
            return Ok((from_object(&file, locs, keep)?, Granularity::Line));
        }
        if let Some(debug) = separate_debug_file(&file) {
            let data = holdup_traced::read(&debug)?;
            let dfile = object::File::parse(&*data).map_err(|e| Error::Elf(e.to_string()))?;
            if dfile.section_by_name(".debug_line").is_some() {
                return Ok((from_object(&dfile, locs, keep)?, Granularity::Line));
            }
        }
    }
    Ok((functions_of(&file, binary, locs)?, Granularity::Function))
}

/// A table of the functions of `file`: each function's code (from its
/// symbol's address and size) is one location. Aliases share the first
/// name; a symbol without a size is left out (it says not where it ends).
fn functions_of(
    file: &object::File<'_>,
    binary: &str,
    locs: &mut Locations,
) -> Result<LineTable, Error> {
    let mut functions = crate::functions::of_file(file).map_err(Error::Elf)?;
    functions.retain(|f| f.size > 0);
    functions.sort_by(|a, b| (a.address, &a.name).cmp(&(b.address, &b.name)));
    let bin = locs.file_id(binary);
    let mut ranges: Vec<Range> = Vec::with_capacity(functions.len());
    for f in functions {
        let (start, end) = (f.address, f.address.saturating_add(f.size));
        let start = match ranges.last() {
            Some(last) if start < last.end => last.end,
            _ => start,
        };
        if start < end {
            let loc = locs.intern_function(bin, &f.name);
            ranges.push(Range { start, end, loc });
        }
    }
    Ok(LineTable { ranges })
}

/// [`load`] of an ELF file already read.
pub fn from_elf(
    data: &[u8],
    locs: &mut Locations,
    keep: FileFilter<'_>,
) -> Result<LineTable, Error> {
    let file = object::File::parse(data).map_err(|e| Error::Elf(e.to_string()))?;
    if file.section_by_name(".debug_line").is_none() {
        if let Some(debug) = separate_debug_file(&file) {
            let data = holdup_traced::read(&debug)?;
            let file = object::File::parse(&*data).map_err(|e| Error::Elf(e.to_string()))?;
            return from_object(&file, locs, keep);
        }
        return Ok(LineTable::default());
    }
    from_object(&file, locs, keep)
}

/// Finds the separate debug file of a build-id: set once by a program
/// that can look further than `/usr/lib/debug` (debug files fetched from
/// debuginfod servers).
type DebugFileFinder = Box<dyn Fn(&[u8]) -> Option<PathBuf> + Send + Sync>;

static DEBUG_FILES: std::sync::OnceLock<DebugFileFinder> = std::sync::OnceLock::new();

/// Where [`separate_debug_file`] looks, beyond `/usr/lib/debug`; the first
/// call wins.
pub fn set_debug_file_finder(find: DebugFileFinder) {
    let _ = DEBUG_FILES.set(find);
}

/// The separate debug file of an ELF file, by its build-id: under
/// `/usr/lib/debug/.build-id`, or where the finder set by
/// [`set_debug_file_finder`] finds it.
pub fn separate_debug_file(file: &object::File<'_>) -> Option<PathBuf> {
    let id = file.build_id().ok()??;
    if id.len() < 2 {
        return None;
    }
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let p = PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &hex[..2],
        &hex[2..]
    ));
    // Root's tree: distributions link the build id to the debug file.
    p.canonicalize()
        .ok()
        .or_else(|| DEBUG_FILES.get().and_then(|find| find(id)))
}

fn from_object(
    file: &object::File<'_>,
    locs: &mut Locations,
    keep: FileFilter<'_>,
) -> Result<LineTable, Error> {
    let load = |id: gimli::SectionId| -> Result<EndianSlice<'_, LittleEndian>, gimli::Error> {
        let data = file
            .section_by_name(id.name())
            .and_then(|s| s.data().ok())
            .unwrap_or(&[]);
        Ok(EndianSlice::new(data, LittleEndian))
    };
    let dwarf = gimli::Dwarf::load(load)?;
    let mut ranges = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = match dwarf.unit(header) {
            Ok(u) => u,
            Err(_) => continue, // one bad unit should not hide the others
        };
        let Some(program) = unit.line_program.clone() else {
            continue;
        };
        let comp_dir = unit
            .comp_dir
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Per unit: DWARF file index → location file id (None: filtered out).
        let mut file_ids: HashMap<u64, Option<u32>> = HashMap::new();
        let mut rows = program.rows();
        let mut prev: Option<(u64, Option<u32>)> = None;
        while let Some((header, row)) = rows.next_row()? {
            let addr = row.address();
            if let Some((start, Some(loc))) = prev {
                if addr > start {
                    push_range(&mut ranges, start, addr, loc);
                }
            }
            if row.end_sequence() {
                prev = None;
                continue;
            }
            let loc = match row.line() {
                None => None,
                Some(line) => {
                    let idx = row.file_index();
                    let fid = *file_ids.entry(idx).or_insert_with(|| {
                        let path = file_path(&dwarf, &unit, header, idx, &comp_dir)?;
                        keep(&path).then(|| locs.file_id(&path))
                    });
                    fid.map(|f| locs.intern(f, line.get() as u32))
                }
            };
            prev = Some((addr, loc));
        }
    }
    ranges.sort_by_key(|r| (r.start, r.end));
    // Overlapping ranges come from duplicate sequences (e.g. COMDAT copies):
    // the first one wins.
    let mut out: Vec<Range> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start < last.end => {
                if r.end > last.end {
                    let start = last.end;
                    out.push(Range { start, ..r });
                }
            }
            _ => out.push(r),
        }
    }
    Ok(LineTable { ranges: out })
}

fn push_range(ranges: &mut Vec<Range>, start: u64, end: u64, loc: u32) {
    if let Some(last) = ranges.last_mut() {
        if last.loc == loc && last.end == start {
            last.end = end;
            return;
        }
    }
    ranges.push(Range { start, end, loc });
}

fn file_path<R: Reader>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    header: &gimli::LineProgramHeader<R>,
    index: u64,
    comp_dir: &str,
) -> Option<String> {
    let file = header.file(index)?;
    let name = dwarf.attr_string(unit, file.path_name()).ok()?;
    let name = name.to_string_lossy().ok()?.into_owned();
    if name.starts_with('/') {
        return Some(normalize(&name));
    }
    let mut path = String::new();
    if let Some(dir) = file.directory(header) {
        if let Ok(dir) = dwarf.attr_string(unit, dir) {
            if let Ok(dir) = dir.to_string_lossy() {
                path.push_str(&dir);
            }
        }
    }
    if !path.starts_with('/') {
        let rel = std::mem::take(&mut path);
        path = comp_dir.to_string();
        if !rel.is_empty() {
            path.push('/');
            path.push_str(&rel);
        }
    }
    if !path.is_empty() && !path.ends_with('/') {
        path.push('/');
    }
    path.push_str(&name);
    Some(normalize(&path))
}

/// Remove `.` and `x/..` components, so one file has one name whatever the
/// directory the compiler was run from.
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(p),
        }
    }
    let mut out = String::new();
    if path.starts_with('/') {
        out.push('/');
    }
    out.push_str(&parts.join("/"));
    out
}

/// Headers that define progress points: their lines are never targets.
pub fn is_progress_header(path: &str) -> bool {
    path.ends_with("/coz.h") || path.ends_with("/holdup.h")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO where a binary was (its owner replaced it) would block an
    /// open for reading until someone writes to it.
    #[test]
    fn a_fifo_at_a_binarys_path_is_refused_at_once() {
        let dir = holdup_testkit::scratch("lines-fifo");
        let fifo = dir.join("server");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx
                .send(load(&path, &mut Locations::default(), &|_| true).map_err(|e| e.to_string()));
        });
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(2))
            .expect("blocked on the FIFO")
            .unwrap_err();
        assert!(e.contains("a FIFO"), "{e}");
        // And a link planted there is not followed.
        let link = dir.join("link");
        std::os::unix::fs::symlink(std::env::current_exe().unwrap(), &link).unwrap();
        let e = load(&link, &mut Locations::default(), &|_| true).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        // The test binary itself has lines.
        let exe = std::env::current_exe().unwrap();
        assert!(!load(&exe, &mut Locations::default(), &|_| true)
            .unwrap()
            .is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[inline(never)]
    fn a_function_of_this_test(x: u64) -> u64 {
        x.wrapping_mul(3) ^ 0x55
    }

    /// This test binary as functions: the address of a function of it is
    /// in that function's location, named by its symbol; as lines, in a
    /// source line (of this file, or of what the compiler inlined there).
    #[test]
    fn a_binarys_functions_or_lines_by_granularity() {
        let exe = std::env::current_exe().unwrap();
        let data = holdup_traced::read(&exe).unwrap();
        // The static address of the function: the runtime address less the
        // load bias of this (position-independent) executable.
        let file = object::File::parse(&*data).unwrap();
        let ours = crate::functions::of_file(&file)
            .unwrap()
            .into_iter()
            .find(|f| f.name.contains("a_function_of_this_test"))
            .unwrap();
        let bias = a_function_of_this_test as *const () as u64 - ours.address;
        assert_eq!(a_function_of_this_test(std::hint::black_box(2)), 0x53);
        let svma = a_function_of_this_test as *const () as u64 - bias;
        let mut locs = Locations::default();
        let (table, g) =
            targets_from_elf(&data, "tests", &mut locs, &|_| true, Granularity::Function).unwrap();
        assert_eq!(g, Granularity::Function);
        let loc = table.lookup(svma + 1).unwrap();
        assert_eq!(
            locs.place(loc),
            Place::Function {
                binary: "tests",
                symbol: &ours.name
            }
        );
        // One past its end is another function's, or none.
        assert_ne!(table.lookup(svma + ours.size), Some(loc));
        let (table, g) =
            targets_from_elf(&data, "tests", &mut locs, &|_| true, Granularity::Line).unwrap();
        assert_eq!(g, Granularity::Line);
        let loc = table.lookup(svma).unwrap();
        assert!(
            matches!(locs.place(loc), Place::Line { file, .. } if file.ends_with(".rs")),
            "{:?}",
            locs.place(loc)
        );
    }

    #[test]
    fn normalize_paths() {
        assert_eq!(normalize("/a/./b/../c.c"), "/a/c.c");
        assert_eq!(normalize("a//b.c"), "a/b.c");
    }

    #[test]
    fn lookup_is_half_open() {
        let t = LineTable {
            ranges: vec![
                Range {
                    start: 10,
                    end: 20,
                    loc: 1,
                },
                Range {
                    start: 30,
                    end: 40,
                    loc: 2,
                },
            ],
        };
        assert_eq!(t.lookup(9), None);
        assert_eq!(t.lookup(10), Some(1));
        assert_eq!(t.lookup(19), Some(1));
        assert_eq!(t.lookup(20), None);
        assert_eq!(t.lookup(39), Some(2));
    }

    #[test]
    fn find_by_suffix() {
        let mut l = Locations::default();
        let f = l.file_id("/src/app/work.c");
        let id = l.intern(f, 42);
        assert_eq!(l.find("work.c:42"), Some(id));
        assert_eq!(l.find("app/work.c:42"), Some(id));
        assert_eq!(l.find("ork.c:42"), None);
        assert_eq!(l.find("/src/app/work.c:42"), Some(id));
        assert_eq!(l.name(id), "/src/app/work.c:42");
        assert_eq!(
            l.place(id),
            Place::Line {
                file: "/src/app/work.c",
                line: 42
            }
        );
        // A function is no line, whatever its name.
        let bin = l.file_id("app");
        let f = l.intern_function(bin, "work.c:42");
        assert_eq!(l.find("work.c:42"), Some(id));
        assert_eq!(
            l.place(f),
            Place::Function {
                binary: "app",
                symbol: "work.c:42"
            }
        );
        assert_eq!(
            l.functions("app", |s| s.starts_with("work"))
                .collect::<Vec<_>>(),
            [f]
        );
    }
}
