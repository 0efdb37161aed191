//! ELF files as the unwinder needs them: memory-mapped once, with the
//! location of their unwind sections and load segments.

use memmap2::Mmap;
use object::{Object, ObjectSection, ObjectSegment};
use std::fs::File;
use std::ops::{Deref, Range};
use std::path::Path;
use std::sync::Arc;

/// The GNU build-id of the ELF file at `path`, if it has one and can be read.
pub fn read_build_id(path: impl AsRef<Path>) -> Option<Vec<u8>> {
    let map = map_file(path.as_ref()).ok()?;
    let file = object::File::parse(&*map).ok()?;
    file.build_id().ok()?.map(<[u8]>::to_vec)
}

pub(crate) fn map_file(path: &Path) -> std::io::Result<Mmap> {
    let file = File::open(path)?;
    // SAFETY: the file is mapped read-only and private. If another process
    // truncates it while we hold the map, reads past the new end fault; that
    // is the accepted cost of not copying whole binaries (package managers
    // replace files by rename, which leaves our inode intact).
    unsafe { Mmap::map(&file) }
}

/// A section of a mapped file, cheap to clone: framehop keeps one per module.
#[derive(Clone)]
pub(crate) struct Bytes {
    map: Arc<Mmap>,
    range: Range<usize>,
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map[self.range.clone()]
    }
}

#[derive(Clone, Debug)]
struct Section {
    file: Range<usize>,
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
    map: Arc<Mmap>,
    pub build_id: Option<Vec<u8>>,
    loads: Vec<Load>,
    text: Option<Range<u64>>,
    got: Option<Range<u64>>,
    eh_frame: Option<Section>,
    eh_frame_hdr: Option<Section>,
    debug_frame: Option<Section>,
}

impl ElfUnwindInfo {
    pub fn load(path: &Path) -> Option<Self> {
        let map = Arc::new(map_file(path).ok()?);
        let file = object::File::parse(&**map).ok()?;
        if file.architecture() != object::Architecture::X86_64 {
            return None;
        }
        let len = map.len();
        let section = |name: &str| -> Option<Section> {
            let s = file.section_by_name(name)?;
            // Compressed sections (only ever .debug_frame) would need a copy;
            // .eh_frame is never compressed, so do without.
            let c = s.compressed_file_range().ok()?;
            if c.format != object::CompressionFormat::None {
                return None;
            }
            let (off, size) = s.file_range()?;
            let start = usize::try_from(off).ok()?;
            let end = start.checked_add(usize::try_from(size).ok()?)?;
            // A section that ends past the address space is corrupt.
            let svma_end = s.address().checked_add(s.size())?;
            (end <= len).then_some(Section {
                file: start..end,
                svma: s.address()..svma_end,
            })
        };
        let svma = |name: &str| {
            let s = file.section_by_name(name)?;
            Some(s.address()..s.address().checked_add(s.size())?)
        };
        let loads = file
            .segments()
            .map(|seg| {
                let (offset, filesz) = seg.file_range();
                let exec = seg.permissions().executable();
                Load {
                    offset,
                    filesz,
                    vaddr: seg.address(),
                    exec,
                }
            })
            .collect();
        let mut eh_frame = section(".eh_frame");
        let mut eh_frame_hdr = section(".eh_frame_hdr");
        let debug_frame = section(".debug_frame");
        // framehop reads one of the two. Code built with -g but without
        // unwind tables has its CFI in .debug_frame only, while the C runtime
        // objects linked with it still bring a small .eh_frame: take
        // whichever describes more functions.
        if let (Some(eh), Some(debug)) = (&eh_frame, &debug_frame) {
            if count_fdes(&map[debug.file.clone()], false) > count_fdes(&map[eh.file.clone()], true)
            {
                eh_frame = None;
                eh_frame_hdr = None;
            }
        }
        Some(Self {
            build_id: file.build_id().ok().flatten().map(<[u8]>::to_vec),
            loads,
            text: svma(".text"),
            got: svma(".got"),
            eh_frame,
            eh_frame_hdr,
            debug_frame,
            map,
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
            map: self.map.clone(),
            range: s.file.clone(),
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

    /// Whether the mapped file is still referenced by a module.
    pub fn in_use(&self) -> bool {
        Arc::strong_count(&self.map) > 1
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
            map: Arc::new(
                memmap2::MmapOptions::new()
                    .len(1)
                    .map_anon()
                    .unwrap()
                    .make_read_only()
                    .unwrap(),
            ),
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
