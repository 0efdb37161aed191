//! User-stack unwinding: DWARF CFI over the stack copy, then the kernel's
//! frame-pointer chain.
//!
//! Why both: the recorder copies only the top of the stack (a few KiB) but
//! walks the frame-pointer chain in the kernel as far as it goes. CFI is
//! exact wherever it can read memory, and it is the only way through code
//! built without frame pointers (Debian's glibc): from `pread` the caller is
//! found at `[rsp]`, which a frame-pointer walk never looks at. Once CFI runs
//! out of copied memory, the application frames further up usually do have
//! frame pointers, and the chain picks up at the frame CFI had reached.

use crate::elf::{Bytes, ElfUnwindInfo};
use crate::maps::{AddressSpaces, Mapping};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{FrameAddress, Unwinder as _};
use holdup_bpf::records::{fp_continue, UNMAPPED_OK};
use holdup_trace::fxhash::FxHashMap;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use holdup_bpf::records::UserStack;

/// No stack is longer than this.
pub const MAX_FRAMES: usize = 128;

/// Drop per-process state of processes that vanished, every so many stacks.
const PRUNE_EVERY: u64 = 4096;

/// Registers remembered at most (see [`Memo`]); past that the memory starts
/// afresh.
const MEMO_MAX: usize = 8192;

/// Unwinds remembered at the same registers: one call site can block in
/// one place from several callers (a loop that reads one descriptor, then
/// another, through the same function).
const MEMOS_PER_KEY: usize = 4;

/// framehop tags cached rules with a global 16-bit module-list generation
/// (one per unwinder created and per module added) that wraps. Once this many
/// were used, every per-process module list is rebuilt and the cache starts
/// afresh, so no two live module lists can share a generation and take each
/// other's cached rules.
const GENERATIONS_PER_EPOCH: usize = 16384;

/// How the frames of the stacks unwound so far were found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnwindStats {
    pub stacks: u64,
    /// Return addresses found by CFI (or framehop's frame-pointer rule on the
    /// copy, for code without CFI).
    pub cfi_frames: u64,
    /// Return addresses taken from the kernel's frame-pointer chain.
    pub fp_frames: u64,
    /// Stacks that ended at the thread's outermost frame.
    pub complete: u64,
    /// Stacks whose CFI part was replayed from an earlier unwind.
    pub remembered: u64,
    /// Bytes of stack copies the unwinds had (what the recorder sent).
    pub copy_bytes: u64,
}

/// Where the CFI part of an unwind ended.
#[derive(Clone, Copy)]
enum CfiEnd {
    /// At the thread's outermost frame.
    Complete,
    /// At the frame limit, or an address that cannot be a return address.
    Stop,
    /// CFI could not go on from the frame with these registers; the
    /// frame-pointer chain continues from there.
    Fallback { sp: u64, bp: u64 },
}

/// The CFI part of an unwind, with every word of the copy it read: a thread
/// that blocks at the same place again (same registers, same process
/// layout) has the same stack when those words hold the same values, and
/// checking a few words is far cheaper than finding and applying each
/// frame's rule again (a context-switch storm blocks in one `read` at the
/// same stack depth thousands of times).
struct Memo {
    reads: Vec<(u64, Option<u64>)>,
    /// Return addresses CFI found, after the leaf.
    frames: Vec<u64>,
    end: CfiEnd,
}

/// Registers of a stack in a process layout (see [`Unwinder::sync`]).
type MemoKey = (u64, u64, u64, u64);

#[derive(Clone, PartialEq, Eq, Hash)]
enum FileKey {
    BuildId(PathBuf, Vec<u8>),
    Stat {
        path: PathBuf,
        dev: u64,
        ino: u64,
        mtime: i64,
        mtime_nsec: i64,
    },
}

struct ProcState {
    generation: u64,
    unwinder: Arc<UnwinderX86_64<Bytes>>,
    /// Which of the layouts seen its mappings are: processes with the same
    /// executable mappings unwind the same stack memory the same way.
    layout: u64,
}

/// What a module list is built from: processes with the same mappings
/// (every child a server forks) share one module list, and so share
/// framehop's cached unwind rules, which are keyed by module list.
type Fingerprint = Vec<(u64, u64, u64, SameInfo)>;

/// A file's unwind info compared by identity; holding it keeps the
/// address from being reused by another file's info.
#[derive(Clone)]
struct SameInfo(Arc<ElfUnwindInfo>);

impl PartialEq for SameInfo {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SameInfo {}

impl std::hash::Hash for SameInfo {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        Arc::as_ptr(&self.0).hash(h);
    }
}

/// Unwinds user stacks; caches parsed unwind info per ELF file and a module
/// list per process.
pub struct Unwinder {
    files: HashMap<FileKey, Option<Arc<ElfUnwindInfo>>>,
    procs: FxHashMap<u32, ProcState>,
    shared: HashMap<Fingerprint, Arc<UnwinderX86_64<Bytes>>>,
    /// For processes we know no mappings of: framehop then applies its
    /// frame-pointer rule on the copy.
    empty: UnwinderX86_64<Bytes>,
    cache: CacheX86_64,
    /// framehop generations used since the cache was last reset.
    generations: usize,
    /// Every process layout seen, numbered (never reused: memos name them).
    layouts: HashMap<Vec<Mapping>, u64>,
    last_layout: u64,
    /// Module list and layout by the generation of the mappings they were
    /// made from: forked processes keep their parent's generation, so a
    /// storm of forks makes them once.
    by_generation: FxHashMap<u64, (Arc<UnwinderX86_64<Bytes>>, u64)>,
    /// The latest first.
    memos: FxHashMap<MemoKey, Vec<Memo>>,
    stats: UnwindStats,
    /// Paths refused by `traced::open`, with why.
    refused: BTreeMap<String, String>,
}

impl Default for Unwinder {
    fn default() -> Self {
        Self::new()
    }
}

impl Unwinder {
    pub fn new() -> Self {
        Self {
            files: HashMap::new(),
            procs: FxHashMap::default(),
            shared: HashMap::new(),
            empty: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
            generations: 0,
            layouts: HashMap::new(),
            last_layout: 0,
            by_generation: FxHashMap::default(),
            memos: FxHashMap::default(),
            refused: BTreeMap::new(),
            stats: UnwindStats::default(),
        }
    }

    /// Which process layout `pid` had at its last unwind: processes with
    /// the same executable mappings (a server's forked children) share one,
    /// and a number is never used for another layout.
    pub fn layout(&self, pid: u32) -> Option<u64> {
        self.procs.get(&pid).map(|p| p.layout)
    }

    /// Counters over every stack unwound by this unwinder.
    pub fn stats(&self) -> UnwindStats {
        self.stats
    }

    /// Leaf first. `frames[0] == ip`; the rest are return addresses exactly
    /// as found on the stack (not minus 1). Empty only when `ip` is 0.
    pub fn unwind(&mut self, spaces: &AddressSpaces, pid: u32, stack: &UserStack) -> Vec<u64> {
        let mut out = Vec::new();
        self.unwind_into(spaces, pid, stack, &mut out);
        out
    }

    /// Like [`Unwinder::unwind`], reusing `out`'s allocation.
    pub fn unwind_into(
        &mut self,
        spaces: &AddressSpaces,
        pid: u32,
        stack: &UserStack,
        out: &mut Vec<u64>,
    ) {
        out.clear();
        self.stats.stacks += 1;
        self.stats.copy_bytes += stack.copy.len() as u64;
        if self.stats.stacks % PRUNE_EVERY == 0 {
            self.prune(spaces);
        }
        if stack.ip == 0 {
            return;
        }
        out.push(stack.ip);
        self.sync(spaces, pid);
        let key = self
            .procs
            .get(&pid)
            .map(|p| (p.layout, stack.ip, stack.sp, stack.bp));
        let remembered = key.and_then(|k| self.memos.get(&k)).and_then(|ms| {
            ms.iter().find(|m| {
                m.reads
                    .iter()
                    .all(|&(addr, value)| stack.read(addr) == value)
            })
        });
        let end = match remembered {
            Some(m) => {
                self.stats.remembered += 1;
                out.extend_from_slice(&m.frames);
                m.end
            }
            None => {
                let mut reads = Vec::new();
                let end = self.cfi(spaces, pid, stack, out, &mut reads);
                if let Some(k) = key {
                    if self.memos.len() >= MEMO_MAX {
                        self.memos.clear();
                    }
                    let frames = out[1..].to_vec();
                    let ms = self.memos.entry(k).or_default();
                    ms.truncate(MEMOS_PER_KEY - 1);
                    ms.insert(0, Memo { reads, frames, end });
                }
                end
            }
        };
        self.stats.cfi_frames += out.len() as u64 - 1;
        match end {
            CfiEnd::Complete => self.stats.complete += 1,
            CfiEnd::Stop => {}
            CfiEnd::Fallback { sp, bp } => self.fp_continue(spaces, pid, stack, sp, bp, out),
        }
    }

    /// The CFI part of an unwind: appends to `out` (which holds the leaf)
    /// the return addresses CFI finds, and to `reads` every word of the copy
    /// it looked at.
    fn cfi(
        &mut self,
        spaces: &AddressSpaces,
        pid: u32,
        stack: &UserStack,
        out: &mut Vec<u64>,
        reads: &mut Vec<(u64, Option<u64>)>,
    ) -> CfiEnd {
        let unwinder = self.procs.get(&pid).map_or(&self.empty, |p| &*p.unwinder);
        let mapped =
            |addr: u64, depth: usize| depth < UNMAPPED_OK || spaces.find(pid, addr).is_some();

        let mut regs = UnwindRegsX86_64::new(stack.ip, stack.sp, stack.bp);
        let mut address = FrameAddress::from_instruction_pointer(stack.ip);
        let mut read = |addr| {
            let value = stack.read(addr);
            reads.push((addr, value));
            value.ok_or(())
        };
        loop {
            if out.len() >= MAX_FRAMES {
                return CfiEnd::Stop;
            }
            let before = regs;
            match unwinder.unwind_frame(address, &mut regs, &mut self.cache, &mut read) {
                // CFI marks the outermost frame (_start, clone3): done.
                Ok(None) => return CfiEnd::Complete,
                Ok(Some(ra)) if regs.sp() > before.sp() && mapped(ra, out.len()) => {
                    out.push(ra);
                    match FrameAddress::from_return_address(ra) {
                        Some(a) => address = a,
                        None => return CfiEnd::Stop,
                    }
                }
                Ok(Some(_)) | Err(_) => {
                    return CfiEnd::Fallback {
                        sp: before.sp(),
                        bp: before.bp(),
                    }
                }
            }
        }
    }

    /// Append return addresses from the kernel's frame-pointer chain from the
    /// frame CFI could not unwind (see [`fp_continue`]).
    fn fp_continue(
        &mut self,
        spaces: &AddressSpaces,
        pid: u32,
        stack: &UserStack,
        sp: u64,
        bp: u64,
        out: &mut Vec<u64>,
    ) {
        let Some(chain) = fp_continue(stack.fp_chain, sp, bp) else {
            return;
        };
        for ra in chain {
            if out.len() >= MAX_FRAMES
                || (out.len() >= UNMAPPED_OK && spaces.find(pid, ra).is_none())
            {
                return;
            }
            out.push(ra);
            self.stats.fp_frames += 1;
        }
    }

    /// Bring the framehop module list of `pid` up to date with `spaces`.
    fn sync(&mut self, spaces: &AddressSpaces, pid: u32) {
        let Some(generation) = spaces.generation(pid) else {
            self.procs.remove(&pid);
            return;
        };
        if self
            .procs
            .get(&pid)
            .is_some_and(|p| p.generation == generation)
        {
            return;
        }
        if self.generations > GENERATIONS_PER_EPOCH {
            self.procs.clear();
            self.shared.clear();
            self.by_generation.clear();
            self.cache = CacheX86_64::new();
            self.empty = UnwinderX86_64::new();
            self.generations = 1;
        }
        // A fork of a process seen already, with the same mappings, takes
        // what was made for it.
        let (unwinder, layout) = match self.by_generation.get(&generation) {
            Some(made) => made.clone(),
            None => {
                let made = self.module_list(spaces, pid);
                self.by_generation.insert(generation, made.clone());
                made
            }
        };
        self.procs.insert(
            pid,
            ProcState {
                generation,
                unwinder,
                layout,
            },
        );
    }

    /// The framehop module list of `pid`'s mappings (shared with every
    /// process whose mappings have the same unwind info), and its layout.
    fn module_list(
        &mut self,
        spaces: &AddressSpaces,
        pid: u32,
    ) -> (Arc<UnwinderX86_64<Bytes>>, u64) {
        let mut fingerprint = Fingerprint::new();
        let mut paths = Vec::new();
        for m in spaces.mappings(pid) {
            let Some(info) = self.file(pid, m) else {
                continue;
            };
            if !info.has_cfi() {
                // framehop's fallback rule for unknown code is the same
                // frame-pointer step it would take here.
                continue;
            }
            let bias = info.bias(m.start, m.file_offset);
            // framehop works on 32-bit offsets from the bias.
            if m.end.wrapping_sub(bias) > u64::from(u32::MAX) || m.start < bias {
                continue;
            }
            fingerprint.push((m.start, m.end, bias, SameInfo(info)));
            paths.push(m.path.clone());
        }
        let unwinder = match self.shared.get(&fingerprint) {
            Some(u) => u.clone(),
            None => {
                self.generations += 1 + fingerprint.len();
                let mut u = UnwinderX86_64::new();
                for ((start, end, bias, info), path) in fingerprint.iter().zip(&paths) {
                    u.add_module(info.0.module(path, *start..*end, *bias));
                }
                let u = Arc::new(u);
                self.shared.insert(fingerprint, u.clone());
                u
            }
        };
        let maps = spaces.mappings(pid);
        let layout = match self.layouts.get(maps) {
            Some(&id) => id,
            None => {
                self.last_layout += 1;
                self.layouts.insert(maps.to_vec(), self.last_layout);
                self.last_layout
            }
        };
        (unwinder, layout)
    }

    /// The unwind info of a mapping's file, loaded once per file version.
    fn file(&mut self, pid: u32, m: &Mapping) -> Option<Arc<ElfUnwindInfo>> {
        let path = Path::new(&m.path);
        let key = match &m.build_id {
            Some(id) => FileKey::BuildId(path.to_path_buf(), id.clone()),
            None => {
                use std::os::unix::fs::MetadataExt;
                let md = std::fs::metadata(path).ok()?;
                FileKey::Stat {
                    path: path.to_path_buf(),
                    dev: md.dev(),
                    ino: md.ino(),
                    mtime: md.mtime(),
                    mtime_nsec: md.mtime_nsec(),
                }
            }
        };
        if let Some(cached) = self.files.get(&key) {
            return cached.clone();
        }
        let mut refusal = None;
        let loaded = m
            .candidates(pid)
            .into_iter()
            .filter_map(|p| match ElfUnwindInfo::load(&p) {
                Ok(info) => info,
                Err(e) => {
                    if crate::traced::is_refusal(&e) {
                        refusal.get_or_insert(e.to_string());
                    }
                    None
                }
            })
            .find(|info| m.build_id.is_none() || info.build_id == m.build_id)
            .map(Arc::new);
        if let (None, Some(why)) = (&loaded, refusal) {
            self.refused.entry(m.path.clone()).or_insert(why);
        }
        self.files.insert(key, loaded.clone());
        loaded
    }

    /// Files of traced processes that were refused (not regular files, or
    /// too large to copy), each once, with why.
    pub fn refused_files(&self) -> &BTreeMap<String, String> {
        &self.refused
    }

    /// Forget processes that left `spaces` and files no process uses.
    fn prune(&mut self, spaces: &AddressSpaces) {
        self.procs
            .retain(|&pid, _| spaces.generation(pid).is_some());
        let generations: std::collections::HashSet<u64> =
            self.procs.values().map(|p| p.generation).collect();
        self.by_generation.retain(|g, _| generations.contains(g));
        // Module lists no process uses any more.
        self.shared.retain(|_, u| Arc::strong_count(u) > 1);
        self.files
            .retain(|_, info| info.as_ref().is_some_and(|i| i.in_use()));
        let live: std::collections::HashSet<u64> = self.procs.values().map(|p| p.layout).collect();
        self.layouts.retain(|_, id| live.contains(id));
        self.memos.retain(|k, _| live.contains(&k.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny deterministic generator: no dependency for a property test.
    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    fn mapping(start: u64, end: u64, path: &str) -> Mapping {
        Mapping {
            start,
            end,
            file_offset: 0,
            path: path.into(),
            build_id: None,
        }
    }

    #[test]
    fn unwinder_and_spaces_can_move_to_the_drainer_thread() {
        fn send<T: Send>() {}
        send::<Unwinder>();
        send::<AddressSpaces>();
    }

    #[test]
    fn zero_ip_gives_no_frames() {
        let stack = UserStack {
            ip: 0,
            sp: 0,
            bp: 0,
            fp_chain: &[],
            copy: &[],
        };
        assert!(Unwinder::new()
            .unwind(&AddressSpaces::new(), 1, &stack)
            .is_empty());
    }

    #[test]
    fn empty_copy_follows_the_fp_chain() {
        let mut spaces = AddressSpaces::new();
        spaces.add_mapping(1, mapping(0x1000, 0x9000, "/nonexistent/app"));
        let chain = [
            (0x7000_0100, 0x1111),
            (0x7000_0200, 0x2222),
            (0x7000_0300, 0x3333),
        ];
        let stack = UserStack {
            ip: 0x1000,
            sp: 0x7000_0000,
            bp: 0x7000_0100,
            fp_chain: &chain,
            copy: &[],
        };
        let mut u = Unwinder::new();
        assert_eq!(
            u.unwind(&spaces, 1, &stack),
            [0x1000, 0x1111, 0x2222, 0x3333]
        );
        // bp not on the chain (used as a data register): start at the first
        // frame at or above sp.
        let stack = UserStack {
            bp: 0x42,
            sp: 0x7000_0150,
            ..stack
        };
        assert_eq!(u.unwind(&spaces, 1, &stack), [0x1000, 0x2222, 0x3333]);
        assert_eq!(u.stats().fp_frames, 5);
    }

    #[test]
    fn fp_chain_stops_on_zero_decreasing_and_unmapped() {
        let mut spaces = AddressSpaces::new();
        spaces.add_mapping(1, mapping(0x1000, 0x9000, "/nonexistent/app"));
        let mut u = Unwinder::new();
        let run = |u: &mut Unwinder, chain: &[(u64, u64)]| {
            let stack = UserStack {
                ip: 0x1000,
                sp: 0x100,
                bp: chain[0].0,
                fp_chain: chain,
                copy: &[],
            };
            u.unwind(&spaces, 1, &stack)
        };
        assert_eq!(
            run(&mut u, &[(0x200, 0x1001), (0x300, 0), (0x400, 0x1003)]),
            [0x1000, 0x1001]
        );
        assert_eq!(
            run(&mut u, &[(0x200, 0x1001), (0x180, 0x1002)]),
            [0x1000, 0x1001]
        );
        // Unmapped return addresses are kept among the first few frames only.
        assert_eq!(
            run(
                &mut u,
                &[
                    (0x200, 0xdead),
                    (0x300, 0x1002),
                    (0x400, 0xbeef),
                    (0x500, 0x1004)
                ]
            ),
            [0x1000, 0xdead, 0x1002]
        );
    }

    #[test]
    fn frame_pointer_rule_on_the_copy_then_chain() {
        // No unwind info for this code: framehop's frame-pointer rule walks
        // the copy (frames at sp+0x10 and sp+0x40), then the copy ends and
        // the kernel chain supplies the rest from the frame reached.
        let sp = 0x7fff_0000u64;
        let mut copy = vec![0u8; 0x60];
        let mut put = |off: usize, v: u64| copy[off..off + 8].copy_from_slice(&v.to_le_bytes());
        put(0x10, sp + 0x40); // saved bp of frame 0
        put(0x18, 0x2001); // return address of frame 0
        put(0x40, sp + 0x100); // saved bp of frame 1 (outside the copy)
        put(0x48, 0x2002);
        let chain = [
            (sp + 0x10, 0x2001),
            (sp + 0x40, 0x2002),
            (sp + 0x100, 0x2003),
            (sp + 0x200, 0x2004),
        ];
        let mut spaces = AddressSpaces::new();
        spaces.add_mapping(5, mapping(0x2000, 0x3000, "/nonexistent/jit"));
        let stack = UserStack {
            ip: 0x2000,
            sp,
            bp: sp + 0x10,
            fp_chain: &chain,
            copy: &copy,
        };
        let mut u = Unwinder::new();
        assert_eq!(
            u.unwind(&spaces, 5, &stack),
            [0x2000, 0x2001, 0x2002, 0x2003, 0x2004]
        );
        let s = u.stats();
        assert_eq!((s.cfi_frames, s.fp_frames), (2, 2));
    }

    #[test]
    fn a_stack_is_replayed_only_when_every_word_read_and_the_layout_are_the_same() {
        // As in frame_pointer_rule_on_the_copy_then_chain: two frames found
        // on the copy, the rest from the chain.
        let sp = 0x7fff_0000u64;
        let mut copy = vec![0u8; 0x60];
        let put = |copy: &mut Vec<u8>, off: usize, v: u64| {
            copy[off..off + 8].copy_from_slice(&v.to_le_bytes())
        };
        put(&mut copy, 0x10, sp + 0x40);
        put(&mut copy, 0x18, 0x2001);
        put(&mut copy, 0x40, sp + 0x100);
        put(&mut copy, 0x48, 0x2002);
        let chain = [(sp + 0x100, 0x2003), (sp + 0x200, 0x2004)];
        let mut spaces = AddressSpaces::new();
        spaces.add_mapping(5, mapping(0x2000, 0x3000, "/nonexistent/jit"));
        let mut u = Unwinder::new();
        let unwind_in = |pid: u32, u: &mut Unwinder, spaces: &AddressSpaces, copy: &[u8]| {
            let stack = UserStack {
                ip: 0x2000,
                sp,
                bp: sp + 0x10,
                fp_chain: &chain,
                copy,
            };
            (u.unwind(spaces, pid, &stack), u.stats().remembered)
        };
        let unwind =
            |u: &mut Unwinder, spaces: &AddressSpaces, copy: &[u8]| unwind_in(5, u, spaces, copy);
        let all = vec![0x2000, 0x2001, 0x2002, 0x2003, 0x2004];
        assert_eq!(unwind(&mut u, &spaces, &copy), (all.clone(), 0));
        assert_eq!(unwind(&mut u, &spaces, &copy), (all.clone(), 1));
        // A word the unwind never read (a local) does not matter.
        put(&mut copy, 0x28, 0x1234);
        assert_eq!(unwind(&mut u, &spaces, &copy), (all.clone(), 2));
        // A return address it read does.
        put(&mut copy, 0x48, 0x2999);
        assert_eq!(
            unwind(&mut u, &spaces, &copy),
            (vec![0x2000, 0x2001, 0x2999, 0x2003, 0x2004], 2)
        );
        // Both are remembered now (one function called from two places).
        put(&mut copy, 0x48, 0x2002);
        assert_eq!(unwind(&mut u, &spaces, &copy), (all.clone(), 3));
        put(&mut copy, 0x48, 0x2999);
        assert_eq!(unwind(&mut u, &spaces, &copy).1, 4);
        put(&mut copy, 0x48, 0x2002);
        // So does any change of the process's mappings.
        spaces.exec(5);
        spaces.add_mapping(5, mapping(0x2000, 0x2003, "/nonexistent/jit"));
        let (frames, remembered) = unwind(&mut u, &spaces, &copy);
        assert_eq!((&frames[..], remembered), (&all[..3], 4));
        // Another process with the same mappings shares the memory.
        spaces.fork(5, 6);
        assert_eq!(unwind_in(6, &mut u, &spaces, &copy), (frames, 5));
    }

    #[test]
    fn module_lists_follow_mapping_changes_across_cache_epochs() {
        let sp = 0x7fff_0000u64;
        let mut copy = vec![0u8; 0x20];
        copy[0x10..0x18].copy_from_slice(&(sp + 0x100).to_le_bytes());
        copy[0x18..0x20].copy_from_slice(&0x2001u64.to_le_bytes());
        let chain = [(sp + 0x10, 0x2001), (sp + 0x100, 0x2002)];
        let stack = UserStack {
            ip: 0x2000,
            sp,
            bp: sp + 0x10,
            fp_chain: &chain,
            copy: &copy,
        };
        let exe = std::env::current_exe().unwrap();
        let mut spaces = AddressSpaces::new();
        spaces.add_mapping(5, mapping(0x2000, 0x3000, "/nonexistent/jit"));
        let mut u = Unwinder::new();
        for i in 0..(GENERATIONS_PER_EPOCH as u64 / 2 + 100) {
            // Each change makes a new module list: an unwinder and a module.
            let base = 0x10_0000_0000 + (i % 7) * 0x100_0000;
            spaces.add_mapping(5, mapping(base, base + 0x10_0000, exe.to_str().unwrap()));
            assert_eq!(
                u.unwind(&spaces, 5, &stack),
                [0x2000, 0x2001, 0x2002],
                "round {i}"
            );
        }
        assert!(u.generations < GENERATIONS_PER_EPOCH, "the cache was reset");
        assert_eq!(
            u.procs[&5].unwinder.max_known_code_address() % 0x100_0000,
            0x10_0000
        );
        spaces.exec(5);
        u.unwind(&spaces, 5, &stack);
        assert_eq!(
            u.procs[&5].unwinder.max_known_code_address(),
            0,
            "exec forgot the modules"
        );
    }

    #[test]
    fn forked_processes_share_one_module_list() {
        let exe = std::env::current_exe().unwrap();
        let mut spaces = AddressSpaces::new();
        spaces.add_mapping(20, mapping(0x10000, 0x20_0000, exe.to_str().unwrap()));
        spaces.fork(20, 21);
        spaces.fork(20, 22);
        spaces.add_mapping(22, mapping(0x4000_0000, 0x4020_0000, exe.to_str().unwrap()));
        let stack = UserStack {
            ip: 0x10010,
            sp: 0x1000,
            bp: 0,
            fp_chain: &[],
            copy: &[],
        };
        let mut u = Unwinder::new();
        for pid in [20, 21, 22] {
            u.unwind(&spaces, pid, &stack);
        }
        // The parent and the unchanged child share rules; the child that
        // mapped more has a list of its own.
        assert!(Arc::ptr_eq(&u.procs[&20].unwinder, &u.procs[&21].unwinder));
        assert!(!Arc::ptr_eq(&u.procs[&20].unwinder, &u.procs[&22].unwinder));
        assert_eq!(u.layout(20), u.layout(21));
        assert_ne!(u.layout(20), u.layout(22));
        // pid 21 reused by a fork of 22: 22's mappings, not the old ones.
        spaces.exit(21);
        spaces.fork(22, 21);
        u.unwind(&spaces, 21, &stack);
        assert!(Arc::ptr_eq(&u.procs[&22].unwinder, &u.procs[&21].unwinder));
        assert_eq!(u.layout(21), u.layout(22));
    }

    #[test]
    fn garbage_never_panics_loops_or_exceeds_the_limit() {
        let mut spaces = AddressSpaces::new();
        // Real files with real CFI, mapped at made-up addresses.
        let exe = std::env::current_exe().unwrap();
        spaces.add_mapping(9, mapping(0x10000, 0x20_0000, exe.to_str().unwrap()));
        spaces.add_mapping(
            9,
            mapping(
                0x7f00_0000_0000,
                0x7f00_0020_0000,
                "/lib/x86_64-linux-gnu/libc.so.6",
            ),
        );
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        let mut u = Unwinder::new();
        let mut copy = vec![0u8; 4096];
        let mut chain = Vec::new();
        for round in 0..3000 {
            let pick = |rng: &mut XorShift| match rng.next() % 4 {
                0 => 0x10000 + rng.next() % 0x1f_0000,
                1 => 0x7f00_0000_0000 + rng.next() % 0x20_0000,
                2 => 0x7fff_0000_0000 + rng.next() % 0x2000,
                _ => rng.next(),
            };
            let sp = match round % 3 {
                0 => 0x7fff_0000_0000 + (rng.next() % 0x1000) * 8,
                1 => u64::MAX - (rng.next() % 64),
                _ => rng.next(),
            };
            let len = (rng.next() % 4097) as usize;
            for w in copy[..len].chunks_mut(8) {
                let v = if rng.next() % 3 == 0 {
                    pick(&mut rng)
                } else {
                    sp.wrapping_add(rng.next() % 0x1000)
                };
                w.copy_from_slice(&v.to_le_bytes()[..w.len()]);
            }
            chain.clear();
            for _ in 0..rng.next() % 70 {
                chain.push((pick(&mut rng), pick(&mut rng)));
            }
            let stack = UserStack {
                ip: pick(&mut rng),
                sp,
                bp: pick(&mut rng),
                fp_chain: &chain,
                copy: &copy[..len],
            };
            let frames = u.unwind(&spaces, 9, &stack);
            assert!(frames.len() <= MAX_FRAMES);
        }
    }
}
