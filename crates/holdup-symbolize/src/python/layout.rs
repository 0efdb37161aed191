//! Which CPython a binary is, and where its structures keep what a frame
//! walk reads. 3.13 says it in `_Py_DebugOffsets`, at the start of
//! `_PyRuntime` (its static initializer is in the file); 3.10 to 3.12 get
//! per-version tables, trusted only when `_PyRuntime` has the size the table
//! was made for. Anything else is refused with what is missing: offsets are
//! never guessed.

use object::{Object, ObjectSegment, ObjectSymbol, RelocationFlags, RelocationTarget};
use std::ops::Range;
use std::path::Path;

/// Where a walk finds things, in bytes from the start of each structure.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub rt_interp_head: u16,
    pub interp_next: u16,
    pub interp_threads: u16,
    pub ts_next: u16,
    /// The thread state's frame pointer (3.10), cframe (3.11, 3.12) or
    /// current frame (3.13).
    pub ts_frame: u16,
    /// `native_thread_id`, or on 3.10 `thread_id` (pthread_self).
    pub ts_id: u16,
    /// `current_frame` in `_PyCFrame` (3.11, 3.12).
    pub cframe_current: Option<u16>,
    pub f_code: u16,
    pub f_back: u16,
    pub f_instr: u16,
    /// `is_entry` (3.11) or `owner` (3.12+); unused on 3.10.
    pub f_entry: u16,
    pub co_adaptive: u16,
    pub co_firstlineno: u16,
    pub co_filename: u16,
    /// `co_qualname`, or `co_name` on 3.10.
    pub co_name: u16,
    pub co_linetable: u16,
    pub str_ascii_data: u16,
    pub str_compact_data: u16,
    /// Where the GIL is, to name its holder; `None` when unknown (3.10,
    /// whose thread states have no kernel thread id to name it by).
    pub gil: Option<GilAt>,
    /// Where the interpreter counts the code objects it makes, and where a
    /// code object keeps the number it took (`co_version`, 3.12+): an
    /// unchanged count proves that a code object met before is still the
    /// one at its address. `None`: code objects are checked at every sample.
    pub code_counter: Option<CodeCounter>,
}

/// Where an interpreter counts the code objects it made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeCounter {
    pub at: CounterAt,
    /// `co_version` in a code object.
    pub co_version: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterAt {
    /// A variable of its own, at this stated address (3.12's
    /// `_Py_next_func_version`).
    Global(u64),
    /// In the interpreter state, at this offset (3.13's
    /// `func_state.next_version`).
    Interpreter(u16),
}

/// Where an interpreter keeps its GIL (`struct _gil_runtime_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GilAt {
    /// In `_PyRuntime`, at this offset (3.11).
    Runtime(u16),
    /// Pointed to from the interpreter state, at this offset (3.12+).
    Interpreter(u16),
}

/// One interpreter binary, as a frame walk needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interpreter {
    /// (3, 12)
    pub version: (u8, u8),
    /// Stated addresses (before the load bias) of `_PyRuntime` and
    /// `PyCode_Type`.
    pub runtime: u64,
    pub code_type: u64,
    /// File offsets of the evaluator (`_PyEval_EvalFrameDefault`, and its
    /// cold part where the symbol table has it): the native frames the
    /// interpreter frames stand in for.
    pub evaluator: Vec<Range<u64>>,
    pub layout: Layout,
    /// The file offset of the code type's deallocator (`code_dealloc`),
    /// where a uprobe counts the code objects freed (see [`code_dealloc`]).
    pub code_dealloc: Option<u64>,
    /// Loadable segments: (file offset, stated address, bytes in the file).
    pub loads: Vec<(u64, u64, u64)>,
}

impl Interpreter {
    /// The load bias of a mapping of this file at `start` from file offset
    /// `pgoff` (page-aligned down from its segment's offset).
    pub fn bias(&self, start: u64, pgoff: u64) -> Option<u64> {
        let &(offset, vaddr, _) = self
            .loads
            .iter()
            .find(|&&(o, _, size)| o & !0xfff <= pgoff && pgoff < o + size)?;
        Some(start.wrapping_sub(vaddr.wrapping_sub(offset).wrapping_add(pgoff)))
    }

    pub fn version_text(&self) -> String {
        format!("{}.{}", self.version.0, self.version.1)
    }
}

/// Why a CPython binary's frames cannot be walked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

/// `_PyRuntime` sizes the per-version tables were made for (read from the
/// DWARF of 3.10.13, 3.11.7 (and Debian's 3.11.2), 3.12.1).
const RUNTIME_SIZES: [((u8, u8), u64); 3] =
    [((3, 10), 672), ((3, 11), 0x28b20), ((3, 12), 0x704a8)];

/// The per-version tables (gdb on the DWARF of the builds above), one row
/// each in the order of [`Layout`]'s fields; `cframe_current` is
/// `NO_CFRAME` where there is no `_PyCFrame`.
const NO_CFRAME: u16 = u16::MAX;
#[rustfmt::skip]
const TABLES: [((u8, u8), [u16; 18]); 3] = [
    //         interp    ts: next frame id cframe  f: code back instr entry  co: adaptive first file name table  str
    ((3, 10), [0x20, 0, 8,     8, 24, 176, NO_CFRAME,  32, 24, 96, 0,    0, 40, 104, 112, 120,  48, 72]),
    ((3, 11), [0x28, 0, 0x10,  8, 56, 160, 8,          32, 48, 56, 68,   184, 72, 112, 128, 136,  48, 72]),
    ((3, 12), [0x28, 0, 0x48,  8, 56, 144, 0,          0, 8, 56, 70,     192, 68, 112, 128, 136,  40, 56]),
];

/// `_PyRuntime.ceval.gil` (3.11) and `PyInterpreterState.ceval.gil`
/// (3.12), from the same DWARF.
const GILS: [((u8, u8), GilAt); 2] = [
    ((3, 11), GilAt::Runtime(0x168)),
    ((3, 12), GilAt::Interpreter(0x180)),
];

fn table(version: (u8, u8)) -> Option<Layout> {
    let &(_, r) = TABLES.iter().find(|(v, _)| *v == version)?;
    let gil = GILS.iter().find(|(v, _)| *v == version).map(|&(_, g)| g);
    Some(Layout {
        gil,
        ..layout_of(r)
    })
}

/// A layout from a row in the order of its fields.
fn layout_of(r: [u16; 18]) -> Layout {
    Layout {
        rt_interp_head: r[0],
        interp_next: r[1],
        interp_threads: r[2],
        ts_next: r[3],
        ts_frame: r[4],
        ts_id: r[5],
        cframe_current: (r[6] != NO_CFRAME).then_some(r[6]),
        f_code: r[7],
        f_back: r[8],
        f_instr: r[9],
        f_entry: r[10],
        co_adaptive: r[11],
        co_firstlineno: r[12],
        co_filename: r[13],
        co_name: r[14],
        co_linetable: r[15],
        str_ascii_data: r[16],
        str_compact_data: r[17],
        gil: None,
        code_counter: None,
    }
}

/// `_Py_DebugOffsets` of 3.13: every field is a u64, at these places.
mod debug_offsets {
    pub const COOKIE: &[u8; 8] = b"xdebugpy";
    pub const FREE_THREADED: usize = 16;
    pub const INTERPRETERS_HEAD: usize = 40;
    pub const INTERP_SIZE: usize = 48;
    pub const INTERP_NEXT: usize = 64;
    pub const INTERP_THREADS_HEAD: usize = 72;
    pub const INTERP_CEVAL_GIL: usize = 112;
    pub const TS_NEXT: usize = 168;
    pub const TS_CURRENT_FRAME: usize = 184;
    pub const TS_NATIVE_THREAD_ID: usize = 200;
    pub const FRAME_PREVIOUS: usize = 232;
    pub const FRAME_EXECUTABLE: usize = 240;
    pub const FRAME_INSTR_PTR: usize = 248;
    pub const FRAME_OWNER: usize = 264;
    pub const CODE_FILENAME: usize = 280;
    pub const CODE_QUALNAME: usize = 296;
    pub const CODE_LINETABLE: usize = 304;
    pub const CODE_FIRSTLINENO: usize = 312;
    pub const CODE_ADAPTIVE: usize = 344;
    pub const OB_TYPE: usize = 360;
    pub const ASCII_OBJECT_SIZE: usize = 560;
    pub const SIZE: usize = 568;
}

/// The 3.13 layout from the `_Py_DebugOffsets` at the start of
/// `_PyRuntime`'s initial bytes.
fn from_debug_offsets(d: &[u8]) -> Result<Layout, Refusal> {
    use debug_offsets::*;
    if d.len() < SIZE || &d[..8] != COOKIE {
        return Err(Refusal(
            "no _Py_DebugOffsets at the start of _PyRuntime".into(),
        ));
    }
    let at = |i: usize| u64::from_le_bytes(d[i..i + 8].try_into().unwrap());
    if at(FREE_THREADED) != 0 {
        return Err(Refusal(
            "a free-threaded build (its frames are not walked)".into(),
        ));
    }
    if at(OB_TYPE) != 8 {
        return Err(Refusal(format!(
            "objects whose type is at {} (a debug build), not 8",
            at(OB_TYPE)
        )));
    }
    let field =
        |i: usize| u16::try_from(at(i)).map_err(|_| Refusal(format!("an offset of {:#x}", at(i))));
    let ascii = field(ASCII_OBJECT_SIZE)?;
    // In the order of a table's row (TABLES).
    let fields = [
        INTERPRETERS_HEAD,
        INTERP_NEXT,
        INTERP_THREADS_HEAD,
        TS_NEXT,
        TS_CURRENT_FRAME,
        TS_NATIVE_THREAD_ID,
    ];
    let code = [
        FRAME_EXECUTABLE,
        FRAME_PREVIOUS,
        FRAME_INSTR_PTR,
        FRAME_OWNER,
        CODE_ADAPTIVE,
        CODE_FIRSTLINENO,
        CODE_FILENAME,
        CODE_QUALNAME,
        CODE_LINETABLE,
    ];
    let mut row = [0u16; 18];
    for (slot, &i) in row.iter_mut().zip(&fields) {
        *slot = field(i)?;
    }
    row[6] = NO_CFRAME;
    for (slot, &i) in row[7..].iter_mut().zip(&code) {
        *slot = field(i)?;
    }
    // PyCompactUnicodeObject: the ASCII header, utf8_length, utf8.
    row[16] = ascii;
    row[17] = ascii + 16;
    let layout = layout_of(row);
    Ok(Layout {
        gil: Some(GilAt::Interpreter(field(INTERP_CEVAL_GIL)?)),
        code_counter: counter_313(at(INTERP_SIZE), &layout),
        ..layout
    })
}

/// 3.12's code objects take their number from `_Py_next_func_version`
/// (found by name), at this place in a code object (the DWARF of 3.12.1).
const CO_VERSION_312: u16 = 92;

/// 3.13 keeps its count in the interpreter state, whose layout the debug
/// offsets do not give: trusted on the build it was read from (the DWARF of
/// 3.13.0: `func_state.next_version`, `co_version`), recognised by the
/// size of its interpreter state and the offsets of its code objects.
fn counter_313(interp_size: u64, l: &Layout) -> Option<CodeCounter> {
    let known = interp_size == 194_968 && (l.co_firstlineno, l.co_adaptive) == (68, 200);
    known.then_some(CodeCounter {
        at: CounterAt::Interpreter(0x4268),
        co_version: 92,
    })
}

/// `libpython3.12.so.1.0` or `python3.10` → (3, 12) / (3, 10).
pub fn version_in_name(path: &str) -> Option<(u8, u8)> {
    let name = path.rsplit('/').next()?;
    let rest = name
        .strip_prefix("lib")
        .unwrap_or(name)
        .strip_prefix("python")?;
    let (major, rest) = rest.split_once('.')?;
    let minor: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// Whether a mapped file may be a CPython interpreter (its executable or
/// its shared library), by name: only those are opened.
pub fn may_be_python(path: &str) -> bool {
    version_in_name(path).is_some()
}

/// The file offset of stated address `addr`, and the bytes there, of the
/// segment that holds it in the file.
pub(crate) fn file_bytes<'d>(
    elf: &object::File<'d>,
    data: &'d [u8],
    addr: u64,
    len: u64,
) -> Option<&'d [u8]> {
    elf.segments().find_map(|s| {
        let (off, size) = s.file_range();
        let start = addr.checked_sub(s.address())?;
        if start.checked_add(len)? > size {
            return None;
        }
        data.get((off + start) as usize..(off + start + len) as usize)
    })
}

/// The file offsets of stated address range `r`.
pub(crate) fn file_range(elf: &object::File<'_>, r: Range<u64>) -> Option<Range<u64>> {
    elf.segments().find_map(|s| {
        let (off, size) = s.file_range();
        let start = r.start.checked_sub(s.address())?;
        (start < size).then(|| off + start..off + start + (r.end - r.start))
    })
}

/// Where `PyTypeObject` keeps `tp_dealloc`: after the object head
/// (refcount, type, size) and `tp_name`, `tp_basicsize`, `tp_itemsize`.
const TP_DEALLOC: u64 = 48;
/// The file offset of the function `PyCode_Type.tp_dealloc` points to (the
/// code type at stated address `code_type`), which every code object freed
/// goes through: from the dynamic relocation that sets the pointer (a
/// position-independent file), else from the address the file holds there
/// (an executable at a fixed address, or relocations packed as RELR, which
/// keep the address in place). It must lie in executable code, and be
/// `code_dealloc` where the symbol table names it; else None, and the
/// recorder does not count frees.
pub(crate) fn code_dealloc(elf: &object::File<'_>, data: &[u8], code_type: u64) -> Option<u64> {
    let at = code_type + TP_DEALLOC;
    let relocated = elf.dynamic_relocations().and_then(|mut relocs| {
        relocs.find_map(|(offset, r)| {
            // "Load bias + addend": how a position-independent file's
            // pointers are set.
            let relative = r.flags()
                == RelocationFlags::Elf {
                    r_type: object::elf::R_X86_64_RELATIVE,
                }
                && r.target() == RelocationTarget::Absolute;
            (offset == at && relative).then(|| r.addend() as u64)
        })
    });
    let addr = match relocated {
        Some(a) => a,
        None => u64::from_le_bytes(file_bytes(elf, data, at, 8)?.try_into().ok()?),
    };
    let in_code = elf.segments().any(|s| {
        let executable = match s.flags() {
            object::SegmentFlags::Elf { p_flags, .. } => p_flags.0 & object::elf::PF_X.0 != 0,
            _ => false,
        };
        executable && s.address() <= addr && addr < s.address() + s.file_range().1
    });
    if !in_code {
        return None;
    }
    if let Some(sym) = elf.symbols().find(|s| s.name() == Ok("code_dealloc")) {
        if sym.address() != addr {
            return None;
        }
    }
    file_range(elf, addr..addr + 1).map(|r| r.start)
}

/// Inspect a mapped file: None when it is no CPython interpreter (no
/// `_PyRuntime`), a refusal when it is one whose frames cannot be walked.
pub fn inspect(path: &Path) -> Result<Option<Interpreter>, Refusal> {
    let contents = crate::traced::read(path).map_err(|e| Refusal(format!("unreadable: {e}")))?;
    let data: &[u8] = &contents;
    let elf = object::File::parse(data).map_err(|e| Refusal(format!("not an ELF file: {e}")))?;
    let mut runtime = None;
    let mut code_type = None;
    let mut py_version = None;
    let mut code_count = None;
    let mut evaluator = Vec::new();
    for sym in elf.dynamic_symbols().chain(elf.symbols()) {
        let range = sym.address()..sym.address() + sym.size();
        match sym.name().unwrap_or("") {
            "_PyRuntime" => runtime = Some((sym.address(), sym.size())),
            "PyCode_Type" => code_type = Some(sym.address()),
            "Py_Version" => py_version = Some(sym.address()),
            "_Py_next_func_version" => code_count = Some(sym.address()),
            "_PyEval_EvalFrameDefault" | "_PyEval_EvalFrameDefault.cold" if sym.size() > 0 => {
                if let Some(r) = file_range(&elf, range) {
                    if !evaluator.contains(&r) {
                        evaluator.push(r);
                    }
                }
            }
            _ => {}
        }
    }
    let Some((runtime, runtime_size)) = runtime else {
        return Ok(None);
    };
    let name = path.to_string_lossy();
    // 3.11+ says its version in Py_Version (PY_VERSION_HEX); 3.10 only in
    // its file name.
    let version = match py_version.and_then(|a| file_bytes(&elf, data, a, 4)) {
        Some(b) => {
            let hex = u32::from_le_bytes(b.try_into().unwrap());
            ((hex >> 24) as u8, (hex >> 16) as u8)
        }
        None => version_in_name(&name).ok_or_else(|| Refusal("no version found".into()))?,
    };
    let text = format!("{}.{}", version.0, version.1);
    let code_type =
        code_type.ok_or_else(|| Refusal(format!("CPython {text} without PyCode_Type")))?;
    if evaluator.is_empty() {
        return Err(Refusal(format!(
            "CPython {text} without _PyEval_EvalFrameDefault"
        )));
    }
    if name.contains(&format!("{text}t")) {
        return Err(Refusal(format!(
            "CPython {text}: a free-threaded build (its frames are not walked)"
        )));
    }
    let layout = match version {
        (3, 13) => {
            let head =
                file_bytes(&elf, data, runtime, debug_offsets::SIZE as u64).ok_or_else(|| {
                    Refusal("CPython 3.13: _PyRuntime's initial bytes are not in the file".into())
                })?;
            from_debug_offsets(head).map_err(|r| Refusal(format!("CPython 3.13: {r}")))?
        }
        (3, 10..=12) => {
            let want = RUNTIME_SIZES
                .iter()
                .find(|(v, _)| *v == version)
                .map(|(_, s)| *s);
            if want != Some(runtime_size) {
                return Err(Refusal(format!(
                    "CPython {text}: _PyRuntime is {runtime_size} bytes, not the {} of the layout known for {text} (another build: a debug one?)",
                    want.unwrap_or(0)
                )));
            }
            let mut l = table(version).expect("a table for every size");
            if version == (3, 12) {
                l.code_counter = code_count.map(|a| CodeCounter {
                    at: CounterAt::Global(a),
                    co_version: CO_VERSION_312,
                });
            }
            l
        }
        _ => {
            return Err(Refusal(format!(
                "CPython {text}: no frame layout known (3.10 to 3.13 are)"
            )))
        }
    };
    let loads = elf
        .segments()
        .map(|s| (s.file_range().0, s.address(), s.file_range().1))
        .collect();
    Ok(Some(Interpreter {
        version,
        runtime,
        code_type,
        evaluator,
        layout,
        code_dealloc: code_dealloc(&elf, data, code_type),
        loads,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_come_from_file_names() {
        assert_eq!(
            version_in_name("/usr/lib/libpython3.12.so.1.0"),
            Some((3, 12))
        );
        assert_eq!(version_in_name("/usr/bin/python3.10"), Some((3, 10)));
        assert_eq!(version_in_name("/x/libpython3.13t.so.1.0"), Some((3, 13)));
        assert_eq!(version_in_name("/usr/bin/python"), None);
        assert_eq!(version_in_name("/usr/lib/libc.so.6"), None);
        assert!(!may_be_python("/usr/bin/pythonic"));
    }

    #[test]
    fn debug_offsets_refuse_what_is_not_walked() {
        let mut d = vec![0u8; debug_offsets::SIZE];
        assert!(from_debug_offsets(&d).is_err(), "no cookie");
        d[..8].copy_from_slice(debug_offsets::COOKIE);
        d[debug_offsets::OB_TYPE..][..8].copy_from_slice(&8u64.to_le_bytes());
        d[debug_offsets::ASCII_OBJECT_SIZE..][..8].copy_from_slice(&40u64.to_le_bytes());
        d[debug_offsets::TS_NATIVE_THREAD_ID..][..8].copy_from_slice(&160u64.to_le_bytes());
        let l = from_debug_offsets(&d).unwrap();
        assert_eq!(
            (l.ts_id, l.str_ascii_data, l.str_compact_data),
            (160, 40, 56)
        );
        d[debug_offsets::FREE_THREADED] = 1;
        assert!(from_debug_offsets(&d)
            .unwrap_err()
            .0
            .contains("free-threaded"));
    }

    /// A stripped interpreter (the distribution's, when it is one) has
    /// its code deallocator found all the same, in its code.
    #[test]
    fn a_stripped_interpreter_has_its_code_deallocator() {
        use object::ObjectSection;
        let Ok(path) = std::fs::canonicalize("/usr/bin/python3") else {
            return;
        };
        let path = path.as_path();
        let Ok(Some(i)) = inspect(path) else {
            eprintln!("skipped: no walkable /usr/bin/python3");
            return;
        };
        let data = std::fs::read(path).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        if elf.symbols().next().is_some() {
            eprintln!("skipped: /usr/bin/python3 is not stripped");
            return;
        }
        let at = i.code_dealloc.expect("found through PyCode_Type");
        let text = elf.section_by_name(".text").unwrap().file_range().unwrap();
        assert!((text.0..text.0 + text.1).contains(&at), "{at:#x}");
    }

    /// The interpreters installed here (pyenv's), when there are.
    #[test]
    fn installed_interpreters_have_their_layouts() {
        let Some(home) = std::env::var_os("HOME") else {
            return;
        };
        let lib = |v: &str, l: &str| {
            Path::new(&home).join(format!(".pyenv/versions/{v}/lib/libpython{l}.so.1.0"))
        };
        for (v, l, threads_head, ts_id, gil) in [
            ("3.10.13", "3.10", 8, 176, None),
            ("3.11.7", "3.11", 0x10, 160, Some(GilAt::Runtime(0x168))),
            ("3.12.1", "3.12", 0x48, 144, Some(GilAt::Interpreter(0x180))),
            (
                "3.13.0",
                "3.13",
                0x1cb0,
                160,
                Some(GilAt::Interpreter(0x10)),
            ),
        ] {
            let path = lib(v, l);
            if !path.exists() {
                eprintln!("skipped: no {}", path.display());
                continue;
            }
            let i = inspect(&path).unwrap().expect("an interpreter");
            assert_eq!(i.version_text(), l);
            assert_eq!(
                (i.layout.interp_threads, i.layout.ts_id, i.layout.gil),
                (threads_head, ts_id, gil),
                "{v}"
            );
            assert!(!i.evaluator.is_empty());
            // Its deallocator, found through PyCode_Type, is the function
            // the symbol table names (read here by itself).
            let data = std::fs::read(&path).unwrap();
            let elf = object::File::parse(&*data).unwrap();
            let sym = elf
                .symbols()
                .find(|s| s.name() == Ok("code_dealloc"))
                .expect("pyenv's builds have a symbol table");
            let want = file_range(&elf, sym.address()..sym.address() + 1).map(|r| r.start);
            assert_eq!(i.code_dealloc, want, "{v}");
            assert!(want.is_some());
            // A shared library's first segment maps at its load address.
            assert_eq!(i.bias(0x7f00_0000_0000, 0), Some(0x7f00_0000_0000));
            if l == "3.13" {
                assert_eq!(
                    i.layout,
                    Layout {
                        rt_interp_head: 0x278,
                        interp_next: 0x1c60,
                        interp_threads: 0x1cb0,
                        ts_next: 8,
                        ts_frame: 72,
                        ts_id: 160,
                        cframe_current: None,
                        f_code: 0,
                        f_back: 8,
                        f_instr: 56,
                        f_entry: 70,
                        co_adaptive: 200,
                        co_firstlineno: 68,
                        co_filename: 112,
                        co_name: 128,
                        co_linetable: 136,
                        str_ascii_data: 40,
                        str_compact_data: 56,
                        gil: Some(GilAt::Interpreter(0x10)),
                        code_counter: Some(CodeCounter {
                            at: CounterAt::Interpreter(0x4268),
                            co_version: 92,
                        }),
                    }
                );
            }
            if l == "3.12" {
                // A local symbol: in the symbol table pyenv's build keeps.
                assert!(
                    matches!(
                        i.layout.code_counter,
                        Some(CodeCounter {
                            at: CounterAt::Global(_),
                            co_version: 92
                        })
                    ),
                    "{:?}",
                    i.layout.code_counter
                );
            }
        }
        // Not an interpreter: no _PyRuntime.
        let me = std::env::current_exe().unwrap();
        assert_eq!(inspect(&me), Ok(None));
    }
}
