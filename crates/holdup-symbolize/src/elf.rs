//! ELF files as the unwinder needs them: the location of their unwind
//! sections and load segments, and the bytes of those sections — in a map
//! of the whole file when only root can change it, else copied (a file its
//! owner can truncate must not be mapped: see `traced.rs`).

use crate::traced::{self, Contents};
use object::{Object, ObjectSection, ObjectSegment, ReadCache, ReadRef};
use std::ops::{Deref, Range};
use std::path::Path;
use std::sync::Arc;

/// The GNU build-id of the ELF file at `path`, if it has one and can be
/// read. Only the headers and the note are read.
pub fn read_build_id(path: impl AsRef<Path>) -> Option<Vec<u8>> {
    let (file, _) = traced::open(path.as_ref()).ok()?;
    build_id_of(&file).ok()?
}

/// What symbolizing needs of an ELF file besides its symbols.
#[derive(Clone, Debug, Default)]
pub(crate) struct ElfFacts {
    pub build_id: Option<Vec<u8>>,
    /// It carries DWARF: no separate debug file is needed.
    pub has_dwarf: bool,
    /// Its load segments, (file offset, size in the file, stated address):
    /// what turns file offsets into the addresses a debug file speaks in.
    pub loads: Vec<(u64, u64, u64)>,
}

impl ElfFacts {
    /// The stated address of file offset `offset`.
    pub fn address_of(&self, offset: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|&&(off, size, _)| off <= offset && offset - off < size)
            .map(|&(off, _, vaddr)| offset - off + vaddr)
    }
}

/// The build-id, DWARF and segments of an open ELF file (headers only are
/// read); `Err` if it is not an ELF file, or one that blazesym must not be
/// given.
pub(crate) fn facts_of(file: &std::fs::File) -> Result<ElfFacts, String> {
    let cache = ReadCache::new(file);
    let elf = object::File::parse(&cache).map_err(|e| e.to_string())?;
    compressed_sizes_are_possible(&elf)?;
    let has_dwarf = elf
        .section_by_name(".debug_info")
        .is_some_and(|s| s.file_range().is_some_and(|(_, size)| size > 0));
    let loads = elf
        .segments()
        .map(|seg| {
            let (offset, size) = seg.file_range();
            (offset, size, seg.address())
        })
        .collect();
    Ok(ElfFacts {
        build_id: elf.build_id().ok().flatten().map(<[u8]>::to_vec),
        has_dwarf,
        loads,
    })
}

/// The build-id of an open ELF file; `Err` if it is not an ELF file.
pub(crate) fn build_id_of(file: &std::fs::File) -> Result<Option<Vec<u8>>, String> {
    facts_of(file).map(|f| f.build_id)
}

/// Deflate shrinks data by about 1032 to 1 at most.
const MAX_DEFLATE_RATIO: u64 = 1032;
/// No debug section of a real program comes near this, uncompressed.
const MAX_UNCOMPRESSED: u64 = 2 << 30;

/// Whether every compressed section of `file` claims a size that its
/// compressed bytes can hold. blazesym allocates the claimed size before
/// decompressing, and a failed allocation aborts the process: a program's
/// own file (which its user controls) must not be able to stop a recording
/// that way.
fn compressed_sizes_are_possible<'d, R: ReadRef<'d>>(
    file: &object::File<'d, R>,
) -> Result<(), String> {
    for s in file.sections() {
        let Ok(c) = s.compressed_file_range() else {
            continue;
        };
        if c.format == object::CompressionFormat::None {
            continue;
        }
        let most = c
            .compressed_size
            .saturating_mul(MAX_DEFLATE_RATIO)
            .min(MAX_UNCOMPRESSED);
        if c.uncompressed_size > most {
            return Err(format!(
                "section {} claims {} bytes uncompressed from {} compressed",
                s.name().unwrap_or("?"),
                c.uncompressed_size,
                c.compressed_size
            ));
        }
    }
    Ok(())
}

/// A section of a file's bytes, cheap to clone: framehop keeps one per
/// module.
#[derive(Clone)]
pub(crate) struct Bytes {
    data: Arc<Contents>,
    range: Range<usize>,
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data[self.range.clone()]
    }
}

#[derive(Clone, Debug)]
struct Section {
    /// Where its bytes are in `ElfUnwindInfo::data`.
    data: Range<usize>,
    svma: Range<u64>,
}

#[derive(Clone, Copy, Debug)]
struct Load {
    offset: u64,
    filesz: u64,
    vaddr: u64,
    exec: bool,
}

/// What unwinding needs from one ELF file.
pub(crate) struct ElfUnwindInfo {
    data: Arc<Contents>,
    pub build_id: Option<Vec<u8>>,
    loads: Vec<Load>,
    text: Option<Range<u64>>,
    got: Option<Range<u64>>,
    eh_frame: Option<Section>,
    eh_frame_hdr: Option<Section>,
    debug_frame: Option<Section>,
}

impl ElfUnwindInfo {
    /// The unwind information of the ELF file at `path`: `Err` if it
    /// cannot be opened (or is refused: see `traced.rs`), `Ok(None)` if it
    /// is not an x86-64 ELF file we can read.
    pub fn load(path: &Path) -> std::io::Result<Option<Self>> {
        let (file, md) = traced::open(path)?;
        if traced::may_map(&md) {
            let map = Arc::new(traced::contents(&file, &md)?);
            let len = map.len();
            let Ok(elf) = object::File::parse(&**map) else {
                return Ok(None);
            };
            let whole = |off: u64, size: u64| {
                let start = usize::try_from(off).ok()?;
                let end = start.checked_add(usize::try_from(size).ok()?)?;
                (end <= len).then_some(start..end)
            };
            let info = Self::describe(&elf, whole);
            drop(elf);
            return Ok(info.map(|i| i.with_data(map)));
        }
        // Only the unwind sections, read through the descriptor: the
        // rest of a large binary is not needed.
        let cache = ReadCache::new(&file);
        let Ok(elf) = object::File::parse(&cache) else {
            return Ok(None);
        };
        let mut copied = Vec::new();
        let info = Self::describe(&elf, |off, size| {
            let bytes = (&cache).read_bytes_at(off, size).ok()?;
            let start = copied.len();
            copied.extend_from_slice(bytes);
            Some(start..copied.len())
        });
        drop(elf);
        Ok(info.map(|i| i.with_data(Arc::new(Contents::Copied(copied)))))
    }

    fn with_data(mut self, data: Arc<Contents>) -> Self {
        self.data = data;
        // framehop reads one of the two. Code built with -g but without
        // unwind tables has its CFI in .debug_frame only, while the C
        // runtime objects linked with it still bring a small .eh_frame:
        // take whichever describes more functions.
        if let (Some(eh), Some(debug)) = (&self.eh_frame, &self.debug_frame) {
            if count_fdes(&self.data[debug.data.clone()], false)
                > count_fdes(&self.data[eh.data.clone()], true)
            {
                self.eh_frame = None;
                self.eh_frame_hdr = None;
            }
        }
        self
    }

    /// Segments and sections of `elf`; `take(offset, size)` says where the
    /// bytes of a section of the file will be (None: unreadable).
    fn describe<'d, R: ReadRef<'d>>(
        elf: &object::File<'d, R>,
        mut take: impl FnMut(u64, u64) -> Option<Range<usize>>,
    ) -> Option<Self> {
        if elf.architecture() != object::Architecture::X86_64 {
            return None;
        }
        let mut section = |name: &str| -> Option<Section> {
            let s = elf.section_by_name(name)?;
            // Compressed sections (only ever .debug_frame) would need a copy;
            // .eh_frame is never compressed, so do without.
            let c = s.compressed_file_range().ok()?;
            if c.format != object::CompressionFormat::None {
                return None;
            }
            let (off, size) = s.file_range()?;
            // A section that ends past the address space is corrupt.
            let svma_end = s.address().checked_add(s.size())?;
            Some(Section {
                data: take(off, size)?,
                svma: s.address()..svma_end,
            })
        };
        let eh_frame = section(".eh_frame");
        let eh_frame_hdr = section(".eh_frame_hdr");
        let debug_frame = section(".debug_frame");
        let svma = |name: &str| {
            let s = elf.section_by_name(name)?;
            Some(s.address()..s.address().checked_add(s.size())?)
        };
        let loads = elf
            .segments()
            .map(|seg| {
                let (offset, filesz) = seg.file_range();
                Load {
                    offset,
                    filesz,
                    vaddr: seg.address(),
                    exec: seg.permissions().executable(),
                }
            })
            .collect();
        Some(Self {
            data: Arc::new(Contents::Copied(Vec::new())),
            build_id: elf.build_id().ok().flatten().map(<[u8]>::to_vec),
            loads,
            text: svma(".text"),
            got: svma(".got"),
            eh_frame,
            eh_frame_hdr,
            debug_frame,
        })
    }

    /// Whether any unwind information is present.
    pub fn has_cfi(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some()
    }

    /// The load bias of a mapping of this file: actual address minus the
    /// address stated in the file. A mapping's file offset is page-aligned
    /// down from its segment's offset, so look for the segment whose
    /// page-aligned range contains it; `vaddr - offset` is constant within a
    /// segment. This is right for non-PIE executables (bias 0), PIE
    /// executables and shared libraries alike.
    pub fn bias(&self, start: u64, file_offset: u64) -> u64 {
        let candidates = self.loads.iter().filter(|l| {
            l.offset & !0xfff <= file_offset && file_offset < l.offset.saturating_add(l.filesz)
        });
        let load = candidates
            .clone()
            .find(|l| l.exec)
            .or_else(|| candidates.clone().next());
        let svma = match load {
            Some(l) => l.vaddr.wrapping_sub(l.offset).wrapping_add(file_offset),
            None => file_offset,
        };
        start.wrapping_sub(svma)
    }

    fn bytes(&self, s: &Option<Section>) -> Option<Bytes> {
        s.as_ref().map(|s| Bytes {
            data: self.data.clone(),
            range: s.data.clone(),
        })
    }

    /// A framehop module for one executable mapping of this file.
    pub fn module(&self, name: &str, avma: Range<u64>, bias: u64) -> framehop::Module<Bytes> {
        let info = framehop::ExplicitModuleSectionInfo {
            // ELF CFI speaks in stated addresses (SVMAs) and framehop's ELF
            // convention is base_svma 0, so base_avma is the bias.
            base_svma: 0,
            text_svma: self.text.clone(),
            got_svma: self.got.clone(),
            eh_frame_svma: self.eh_frame.as_ref().map(|s| s.svma.clone()),
            eh_frame: self.bytes(&self.eh_frame),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|s| s.svma.clone()),
            eh_frame_hdr: self.bytes(&self.eh_frame_hdr),
            debug_frame: self.bytes(&self.debug_frame),
            stubs_svma: None,
            stub_helper_svma: None,
            unwind_info: None,
            text: None,
            text_segment_svma: None,
            text_segment: None,
        };
        framehop::Module::new(name.to_string(), avma, bias, info)
    }

    /// Whether the file's bytes are still referenced by a module.
    pub fn in_use(&self) -> bool {
        Arc::strong_count(&self.data) > 1
    }
}

/// Number of FDEs (function descriptions) in a .eh_frame or .debug_frame.
fn count_fdes(data: &[u8], eh_frame: bool) -> usize {
    let word = |off: usize, n: usize| -> Option<u64> {
        let b = data.get(off..off.checked_add(n)?)?;
        Some(match n {
            4 => u64::from(u32::from_le_bytes(b.try_into().ok()?)),
            _ => u64::from_le_bytes(b.try_into().ok()?),
        })
    };
    let (mut off, mut fdes) = (0usize, 0);
    while let Some(len32) = word(off, 4) {
        off += 4;
        let (len, id_size) = if len32 == 0xffff_ffff {
            let Some(len) = word(off, 8) else { break };
            off += 8;
            (len, 8)
        } else {
            (len32, 4)
        };
        if len == 0 {
            if eh_frame {
                break; // terminator
            }
            continue;
        }
        let Some(id) = word(off, id_size) else { break };
        let cie = if eh_frame {
            id == 0
        } else {
            id == 0xffff_ffff || id == u64::MAX
        };
        if !cie {
            fdes += 1;
        }
        let Some(next) = usize::try_from(len).ok().and_then(|l| off.checked_add(l)) else {
            break;
        };
        off = next;
    }
    fdes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(loads: Vec<Load>) -> ElfUnwindInfo {
        ElfUnwindInfo {
            data: Arc::new(Contents::Copied(Vec::new())),
            build_id: None,
            loads,
            text: None,
            got: None,
            eh_frame: None,
            eh_frame_hdr: None,
            debug_frame: None,
        }
    }

    #[test]
    fn bias_for_pie_non_pie_and_unaligned_segments() {
        // PIE / shared library with separate code: r-x segment at offset
        // 0x1000, vaddr 0x1000, mapped at 0x5555_0000_1000 with offset 0x1000.
        let pie = info(vec![
            Load {
                offset: 0,
                filesz: 0x1000,
                vaddr: 0,
                exec: false,
            },
            Load {
                offset: 0x1000,
                filesz: 0x2000,
                vaddr: 0x1000,
                exec: true,
            },
        ]);
        assert_eq!(pie.bias(0x5555_0000_1000, 0x1000), 0x5555_0000_0000);
        // Non-PIE: stated addresses are actual addresses.
        let exe = info(vec![
            Load {
                offset: 0,
                filesz: 0x1000,
                vaddr: 0x400000,
                exec: false,
            },
            Load {
                offset: 0x1000,
                filesz: 0x2000,
                vaddr: 0x401000,
                exec: true,
            },
        ]);
        assert_eq!(exe.bias(0x401000, 0x1000), 0);
        // Segment whose offset and vaddr are not page aligned (and differ):
        // the mapping starts at the page containing the segment start.
        let odd = info(vec![Load {
            offset: 0x1234,
            filesz: 0x5000,
            vaddr: 0x3234,
            exec: true,
        }]);
        // Mapping of file page 0x1000 at 0x7f00_0000_3000 ⇒ file 0x1234 is at
        // 0x7f00_0000_3234, stated 0x3234 ⇒ bias 0x7f00_0000_0000.
        assert_eq!(odd.bias(0x7f00_0000_3000, 0x1000), 0x7f00_0000_0000);
    }
}
