//! The objects loaded in this process (main executable, shared libraries,
//! the vDSO, this runtime), from `dl_iterate_phdr`.
//!
//! The runtime lives inside the target, so it reads unwind tables straight
//! from the mapped `.eh_frame_hdr`/`.eh_frame` instead of opening files: no
//! I/O on the sample path, and the vDSO (which has no file) unwinds too.

use std::ffi::CStr;

/// What a module is to the profiler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Main,
    /// This runtime: samples taken inside it are the profiler's own work
    /// (delays, sample processing), never the program's.
    Runtime,
    Other,
}

#[derive(Debug)]
pub struct EhTables {
    pub hdr: &'static [u8],
    pub hdr_avma: u64,
    pub frame: &'static [u8],
    pub frame_avma: u64,
}

#[derive(Debug)]
pub struct Module {
    /// Path of the object file ("" for the vDSO).
    pub path: String,
    /// Load bias: run-time address − static address.
    pub bias: u64,
    /// Executable ranges, run-time addresses.
    pub text: Vec<(u64, u64)>,
    pub eh: Option<EhTables>,
    pub role: Role,
    /// A CPython interpreter (its executable or libpython), by name: where
    /// the recorder walks its Python frames, they stand for its code.
    pub interpreter: bool,
    /// Index into the profiler's line tables, when in scope.
    pub lines: Option<usize>,
}

#[derive(Default, Debug)]
pub struct Modules {
    pub list: Vec<Module>,
    /// (start, end, module index), sorted.
    index: Vec<(u64, u64, usize)>,
}

impl Modules {
    /// Enumerate what is loaded now. `runtime_addr` is any address inside
    /// this runtime.
    pub fn load(runtime_addr: u64) -> Modules {
        let mut list: Vec<Module> = Vec::new();
        crate::fork::with_loader(|| unsafe {
            libc::dl_iterate_phdr(
                Some(collect),
                &mut list as *mut Vec<Module> as *mut libc::c_void,
            )
        });
        let exe = std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut first = true;
        for m in &mut list {
            // The first entry is the main program, reported with an empty name.
            if first && m.path.is_empty() {
                m.path = exe.clone();
                m.role = Role::Main;
            }
            first = false;
            m.interpreter = holdup_symbolize::python::layout::may_be_python(&m.path);
            if m.text
                .iter()
                .any(|&(s, e)| runtime_addr >= s && runtime_addr < e)
            {
                m.role = Role::Runtime;
            }
        }
        let mut index: Vec<(u64, u64, usize)> = list
            .iter()
            .enumerate()
            .flat_map(|(i, m)| m.text.iter().map(move |&(s, e)| (s, e, i)))
            .collect();
        index.sort_unstable();
        Modules { list, index }
    }

    /// The module whose code contains `avma`.
    pub fn find(&self, avma: u64) -> Option<usize> {
        let i = self.index.partition_point(|&(s, _, _)| s <= avma);
        let &(_, e, m) = self.index.get(i.checked_sub(1)?)?;
        (avma < e).then_some(m)
    }
}

unsafe extern "C" fn collect(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    let list = &mut *(data as *mut Vec<Module>);
    let info = &*info;
    let path = if info.dlpi_name.is_null() {
        String::new()
    } else {
        CStr::from_ptr(info.dlpi_name)
            .to_string_lossy()
            .into_owned()
    };
    let bias = info.dlpi_addr;
    let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
    let mut text = Vec::new();
    let mut hdr = None;
    for ph in phdrs {
        if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
            text.push((bias + ph.p_vaddr, bias + ph.p_vaddr + ph.p_memsz));
        }
        if ph.p_type == libc::PT_GNU_EH_FRAME {
            hdr = Some((bias + ph.p_vaddr, ph.p_memsz));
        }
    }
    let eh = hdr.and_then(|(hdr_avma, len)| {
        let hdr = std::slice::from_raw_parts(hdr_avma as *const u8, len as usize);
        let frame_avma = eh_frame_ptr(hdr, hdr_avma)?;
        // .eh_frame's length is not recorded anywhere at run time: give
        // the parser the rest of the segment that holds it.
        let seg_end = phdrs
            .iter()
            .filter(|p| p.p_type == libc::PT_LOAD)
            .map(|p| {
                (
                    bias + p.p_vaddr,
                    bias + p.p_vaddr + p.p_filesz.min(p.p_memsz),
                )
            })
            .find(|&(s, e)| frame_avma >= s && frame_avma < e)?
            .1;
        let frame =
            std::slice::from_raw_parts(frame_avma as *const u8, (seg_end - frame_avma) as usize);
        Some(EhTables {
            hdr,
            hdr_avma,
            frame,
            frame_avma,
        })
    });
    if !text.is_empty() {
        list.push(Module {
            path,
            bias,
            text,
            eh,
            role: Role::Other,
            interpreter: false,
            lines: None,
        });
    }
    0
}

/// The address of `.eh_frame` recorded in `.eh_frame_hdr`.
fn eh_frame_ptr(hdr: &'static [u8], hdr_avma: u64) -> Option<u64> {
    let bases = gimli::BaseAddresses::default().set_eh_frame_hdr(hdr_avma);
    let parsed = gimli::EhFrameHdr::new(hdr, gimli::NativeEndian)
        .parse(&bases, 8)
        .ok()?;
    match parsed.eh_frame_ptr() {
        gimli::Pointer::Direct(a) => Some(a),
        gimli::Pointer::Indirect(_) => None,
    }
}
