//! Rust mirror of the ring-buffer records in `bpf/intf.h`, and their parser.
//!
//! The parser is pure (no libbpf) so that consumers of the ring buffer outside
//! the recorder, such as the causal runtime, can use it.

use std::mem::size_of;

pub const MAX_KSTACK: usize = 64;
pub const MAX_FP: usize = 64;
pub const STACK_COPY_MAX: usize = 4096;
pub const COMM_LEN: usize = 16;
pub const PATH_LEN: usize = 256;

pub const REC_SAMPLE: u32 = 1;
pub const REC_SEGMENT: u32 = 2;
pub const REC_FORK: u32 = 3;
pub const REC_EXEC: u32 = 4;
pub const REC_COMM: u32 = 5;
pub const REC_EXIT: u32 = 6;
pub const REC_BIO_ISSUE: u32 = 7;
pub const REC_BIO_DONE: u32 = 8;
/// The stack of the `REC_SYSCALL` that follows: a sample-shaped record.
pub const REC_SYSCALL_STACK: u32 = 16;
pub const REC_SYSCALL: u32 = 17;
/// Record kinds are below this.
pub const REC_KINDS: usize = 32;

/// Why a record was not written (`enum lost_cause`): the ring buffer was
/// full; the kernel could not allocate the thread's state; a kernel table
/// (system-call totals) was full.
pub const LOST_RING_FULL: u32 = 0;
pub const LOST_NO_STATE: u32 = 1;
pub const LOST_TABLE_FULL: u32 = 2;
pub const LOST_CAUSES: usize = 3;
pub const SYS_HIST: usize = 48;

pub const CLASS_CPU: u8 = 0;
pub const CLASS_IO: u8 = 1;
pub const CLASS_LOCK: u8 = 2;
pub const CLASS_SCHED: u8 = 3;
pub const CLASS_OTHER: u8 = 4;

pub const WAKER_NONE: u8 = 0;
pub const WAKER_THREAD: u8 = 1;
pub const WAKER_IRQ: u8 = 2;
pub const WAKER_SOFTIRQ: u8 = 3;
pub const WAKER_TIMER: u8 = 4;
/// `waker_id` of `WAKER_IRQ` for inter-processor interrupts and unknown vectors.
pub const IRQ_IPI: u32 = 0xffff_fffe;
pub const IRQ_UNKNOWN: u32 = 0xffff_ffff;

pub const SF_KSTACK_LEAF_IS_IP: u16 = 1 << 0;
pub const SF_USER_REGS: u16 = 1 << 1;
pub const SF_BLOCKED_TAIL: u16 = 1 << 2;
pub const SF_LATE_USTACK: u16 = 1 << 3;
pub const SF_EXIT_TAIL: u16 = 1 << 4;
pub const SF_SEGMENT: u16 = 1 << 5;

/// `cpu` of a segment that was still open when the recording ended.
pub const CPU_OPEN: u16 = 0xffff;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RecHdr {
    pub kind: u32,
    pub size: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SampleRec {
    pub hdr: RecHdr,
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
    pub wake: u64,
    pub end: u64,
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    pub weight: u32,
    pub sched_weight: u32,
    pub waker_id: u32,
    pub cpu: u16,
    pub class: u8,
    pub waker_kind: u8,
    pub flags: u16,
    pub kstack_len: u16,
    pub fp_len: u16,
    pub copy_len: u16,
    pub _pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SegmentRec {
    pub hdr: RecHdr,
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
    pub wake: u64,
    pub end: u64,
    pub waker_id: u32,
    pub cpu: u16,
    pub class: u8,
    pub waker_kind: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ForkRec {
    pub hdr: RecHdr,
    pub time: u64,
    pub parent_pid: u32,
    pub parent_tid: u32,
    pub pid: u32,
    pub tid: u32,
    pub comm: [u8; COMM_LEN],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExecRec {
    pub hdr: RecHdr,
    pub time: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: [u8; COMM_LEN],
    pub filename: [u8; PATH_LEN],
}

/// `REC_COMM` and `REC_EXIT`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TaskRec {
    pub hdr: RecHdr,
    pub time: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: [u8; COMM_LEN],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BioRec {
    pub hdr: RecHdr,
    pub time: u64,
    pub sector: u64,
    pub dev: u32,
    pub bytes: u32,
    pub pid: u32,
    pub tid: u32,
    pub op: u8,
    pub tracked: u8,
    pub error: u16,
    pub _pad: u32,
}

/// One system call invocation (`struct syscall_rec`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SyscallRec {
    pub hdr: RecHdr,
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
    pub end: u64,
    /// Off-CPU time by subclass: io, lock, sched, other.
    pub blocked: [u64; 4],
    pub nr: u32,
    pub sleeps: u32,
    pub min_flt: u32,
    pub maj_flt: u32,
    pub waker_id: u32,
    pub waker_kind: u8,
    pub sampled: u8,
    pub _pad: u16,
}

/// Key of the in-kernel per-process per-call totals.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SyscallKey {
    pub pid: u32,
    pub nr: u32,
}

/// Value of the in-kernel totals (one per CPU).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SyscallTotals {
    pub count: u64,
    pub total_ns: u64,
    pub blocked: [u64; 4],
    pub min_flt: u64,
    pub maj_flt: u64,
    pub hist: [u64; SYS_HIST],
}

impl SyscallTotals {
    pub fn add(&mut self, o: &SyscallTotals) {
        self.count += o.count;
        self.total_ns += o.total_ns;
        for (a, b) in self.blocked.iter_mut().zip(o.blocked) {
            *a += b;
        }
        self.min_flt += o.min_flt;
        self.maj_flt += o.maj_flt;
        for (a, b) in self.hist.iter_mut().zip(o.hist) {
            *a += b;
        }
    }
}

const _: () = assert!(size_of::<SyscallRec>() == 88);
const _: () = assert!(size_of::<SyscallKey>() == 8);
const _: () = assert!(size_of::<SyscallTotals>() == 8 * (8 + SYS_HIST));
const _: () = assert!(size_of::<SampleRec>() == 96);
const _: () = assert!(size_of::<SegmentRec>() == 48);
const _: () = assert!(size_of::<ForkRec>() == 48);
const _: () = assert!(size_of::<ExecRec>() == 296);
const _: () = assert!(size_of::<TaskRec>() == 40);
const _: () = assert!(size_of::<BioRec>() == 48);

/// What a sample carries of a thread's user stack, for the unwinders (the
/// recorder's and the causal runtime's).
#[derive(Clone, Copy, Debug)]
pub struct UserStack<'a> {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// Frame-pointer walk done in the kernel starting at bp: (frame address,
    /// return address) pairs, i.e. pair i = (bp_i, *(bp_i + 8)) with
    /// bp_0 = bp, bp_{i+1} = *bp_i.
    pub fp_chain: &'a [(u64, u64)],
    /// Copy of user stack memory starting at `sp` (typically 1–4 KiB, may be
    /// shorter or empty).
    pub copy: &'a [u8],
}

impl UserStack<'_> {
    /// The 8 bytes at `addr`, if they lie in the copy.
    pub fn read(&self, addr: u64) -> Option<u64> {
        let off = usize::try_from(addr.checked_sub(self.sp)?).ok()?;
        let bytes = self.copy.get(off..off.checked_add(8)?)?;
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    }
}

/// A sample with its variable-length tail.
#[derive(Clone, Copy, Debug)]
pub struct RawSample<'a> {
    pub rec: SampleRec,
    kstack: &'a [u8],
    fp: &'a [u8],
    pub copy: &'a [u8],
}

impl<'a> RawSample<'a> {
    /// What the unwinders need of the user stack, with `fp_chain` from
    /// [`RawSample::fp_chain`].
    pub fn user_stack<'b>(&'b self, fp_chain: &'b [(u64, u64)]) -> UserStack<'b> {
        UserStack {
            ip: self.rec.ip,
            sp: self.rec.sp,
            bp: self.rec.bp,
            fp_chain,
            copy: self.copy,
        }
    }

    /// Kernel frames, leaf first.
    pub fn kstack(&self) -> impl Iterator<Item = u64> + 'a {
        self.kstack
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
    }

    /// Frame-pointer chain: (frame address, return address), leaf first.
    pub fn fp_chain(&self) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        self.fp_chain_into(&mut v);
        v
    }

    /// [`RawSample::fp_chain`] into `out`, reusing its allocation.
    pub fn fp_chain_into(&self, out: &mut Vec<(u64, u64)>) {
        out.clear();
        out.extend(self.fp.chunks_exact(16).map(|c| {
            (
                u64::from_ne_bytes(c[..8].try_into().unwrap()),
                u64::from_ne_bytes(c[8..].try_into().unwrap()),
            )
        }));
    }

    pub fn is_on_cpu(&self) -> bool {
        self.rec.class == CLASS_CPU
    }
}

#[derive(Clone, Copy, Debug)]
pub enum RawRecord<'a> {
    Sample(RawSample<'a>),
    Segment(SegmentRec),
    Fork(ForkRec),
    Exec(ExecRec),
    Comm(TaskRec),
    Exit(TaskRec),
    BioIssue(BioRec),
    BioDone(BioRec),
    /// The stacks of the next [`RawRecord::Syscall`] of the same thread.
    SyscallStack(RawSample<'a>),
    Syscall(SyscallRec),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    #[error("record of {0} bytes is too short")]
    Short(usize),
    #[error("unknown record kind {0}")]
    UnknownKind(u32),
    #[error("record of kind {kind} has an inconsistent size {size}")]
    BadSize { kind: u32, size: usize },
}

/// A key of the system-call totals map.
pub fn syscall_key(bytes: &[u8]) -> Result<SyscallKey, ParseError> {
    read(bytes)
}

/// One CPU's value of the system-call totals map.
pub fn syscall_totals(bytes: &[u8]) -> Result<SyscallTotals, ParseError> {
    read(bytes)
}

fn read<T: Copy>(bytes: &[u8]) -> Result<T, ParseError> {
    if bytes.len() < size_of::<T>() {
        return Err(ParseError::Short(bytes.len()));
    }
    // SAFETY: length checked; all record types are plain old data, and the
    // read is unaligned-safe.
    Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const T) })
}

/// Parse one ring-buffer record.
pub fn parse(bytes: &[u8]) -> Result<RawRecord<'_>, ParseError> {
    let hdr: RecHdr = read(bytes)?;
    let fixed = |size: usize| -> Result<(), ParseError> {
        if bytes.len() < size {
            Err(ParseError::BadSize {
                kind: hdr.kind,
                size: bytes.len(),
            })
        } else {
            Ok(())
        }
    };
    Ok(match hdr.kind {
        REC_SAMPLE | REC_SYSCALL_STACK => {
            let rec: SampleRec = read(bytes)?;
            let k = rec.kstack_len as usize * 8;
            let f = rec.fp_len as usize * 16;
            let c = rec.copy_len as usize;
            let base = size_of::<SampleRec>();
            fixed(base + k + f + c)?;
            let s = RawSample {
                rec,
                kstack: &bytes[base..base + k],
                fp: &bytes[base + k..base + k + f],
                copy: &bytes[base + k + f..base + k + f + c],
            };
            if hdr.kind == REC_SAMPLE {
                RawRecord::Sample(s)
            } else {
                RawRecord::SyscallStack(s)
            }
        }
        REC_SYSCALL => RawRecord::Syscall(read(bytes)?),
        REC_SEGMENT => RawRecord::Segment(read(bytes)?),
        REC_FORK => RawRecord::Fork(read(bytes)?),
        REC_EXEC => RawRecord::Exec(read(bytes)?),
        REC_COMM => RawRecord::Comm(read(bytes)?),
        REC_EXIT => RawRecord::Exit(read(bytes)?),
        REC_BIO_ISSUE => RawRecord::BioIssue(read(bytes)?),
        REC_BIO_DONE => RawRecord::BioDone(read(bytes)?),
        k => return Err(ParseError::UnknownKind(k)),
    })
}

/// A NUL-terminated C string from a fixed array.
pub fn c_str(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Among the first this many frames of a user stack, an address outside
/// every mapping is accepted (JIT code, a mapping whose mmap event has not
/// arrived yet); deeper in the stack it means the walk went astray.
pub const UNMAPPED_OK: usize = 3;

/// Continue a user stack on the recorder's frame-pointer walk (`chain`:
/// (frame address, return address) pairs as the BPF program walked them,
/// leaf first) from the frame an unwinder could not step out of (its `sp`
/// and `bp`): from the link for frame `bp`, or, when `bp` is no frame on the
/// chain (the function uses rbp for data), from the first link at or above
/// `sp`; None when no link qualifies. The return addresses come for as long
/// as the chain is plausible: it stops at a zero return address or a frame
/// that is not above the one before (garbage may loop). Callers cap the
/// depth and check the addresses are mapped (see [`UNMAPPED_OK`]).
pub fn fp_continue(
    chain: &[(u64, u64)],
    sp: u64,
    bp: u64,
) -> Option<impl Iterator<Item = u64> + '_> {
    let first = chain
        .iter()
        .position(|&(frame, _)| frame == bp)
        .or_else(|| chain.iter().position(|&(frame, _)| frame >= sp))?;
    let mut prev: Option<u64> = None;
    Some(chain[first..].iter().map_while(move |&(frame, ra)| {
        if ra == 0 || prev.is_some_and(|p| frame <= p) {
            return None;
        }
        prev = Some(frame);
        Some(ra)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_tail_is_split_by_lengths() {
        let mut rec = SampleRec {
            hdr: RecHdr {
                kind: REC_SAMPLE,
                size: 0,
            },
            kstack_len: 2,
            fp_len: 1,
            copy_len: 3,
            ..Default::default()
        };
        rec.hdr.size = (size_of::<SampleRec>() + 16 + 16 + 3) as u32;
        let mut bytes = vec![0u8; rec.hdr.size as usize];
        unsafe { std::ptr::write_unaligned(bytes.as_mut_ptr() as *mut SampleRec, rec) };
        let base = size_of::<SampleRec>();
        bytes[base..base + 8].copy_from_slice(&0xffff_ffff_8100_0000u64.to_ne_bytes());
        bytes[base + 16..base + 24].copy_from_slice(&0x7ffc_0000_1000u64.to_ne_bytes());
        bytes[base + 24..base + 32].copy_from_slice(&0x40_1234u64.to_ne_bytes());
        bytes[base + 32..].copy_from_slice(&[1, 2, 3]);
        let RawRecord::Sample(s) = parse(&bytes).unwrap() else {
            panic!("not a sample")
        };
        assert_eq!(s.kstack().next(), Some(0xffff_ffff_8100_0000));
        assert_eq!(s.fp_chain(), vec![(0x7ffc_0000_1000, 0x40_1234)]);
        assert_eq!(s.copy, &[1, 2, 3]);
    }

    #[test]
    fn the_fp_chain_continues_from_bp_or_sp_while_it_moves_up() {
        let chain = [(0x100, 0xa), (0x200, 0xb), (0x300, 0xc)];
        let from = |sp, bp| fp_continue(&chain, sp, bp).map(|it| it.collect::<Vec<_>>());
        assert_eq!(from(0, 0x200), Some(vec![0xb, 0xc]));
        // bp holds data: the first frame at or above sp.
        assert_eq!(from(0x180, 0x1234), Some(vec![0xb, 0xc]));
        assert_eq!(from(0x400, 0x1234), None);
        // A link that does not move up, or a zero return address, ends it.
        let looping = [(0x100, 0xa), (0x80, 0xb), (0x300, 0xc)];
        assert_eq!(
            fp_continue(&looping, 0, 0x100).unwrap().collect::<Vec<_>>(),
            vec![0xa]
        );
        let zero = [(0x100, 0xa), (0x200, 0), (0x300, 0xc)];
        assert_eq!(
            fp_continue(&zero, 0, 0x100).unwrap().collect::<Vec<_>>(),
            vec![0xa]
        );
    }

    /// The value of enum constant `name` in a header of src/bpf.
    fn header_value(header: &str, name: &str) -> u64 {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/bpf/").to_string() + header;
        let text = std::fs::read_to_string(&path).unwrap();
        let at = text
            .find(&format!("\t{name} = "))
            .unwrap_or_else(|| panic!("no {name} in {header}"));
        let value = text[at..].split('=').nth(1).unwrap();
        let value = value.split([',', '\n']).next().unwrap().trim();
        value.parse().unwrap_or_else(|_| panic!("{name} = {value}"))
    }

    /// The mirror and the header C and Rust share say the same.
    #[test]
    fn constants_match_the_shared_header() {
        for (name, value) in [
            ("REC_SAMPLE", REC_SAMPLE as u64),
            ("REC_SEGMENT", REC_SEGMENT as u64),
            ("REC_FORK", REC_FORK as u64),
            ("REC_EXIT", REC_EXIT as u64),
            ("REC_BIO_DONE", REC_BIO_DONE as u64),
            ("REC_SYSCALL_STACK", REC_SYSCALL_STACK as u64),
            ("REC_SYSCALL", REC_SYSCALL as u64),
            ("REC_KIND_SLOTS", REC_KINDS as u64),
            ("LOST_RING_FULL", LOST_RING_FULL as u64),
            ("LOST_NO_STATE", LOST_NO_STATE as u64),
            ("LOST_TABLE_FULL", LOST_TABLE_FULL as u64),
            ("LOST_CAUSES", LOST_CAUSES as u64),
            ("MAX_KSTACK", MAX_KSTACK as u64),
            ("STACK_COPY_MAX", STACK_COPY_MAX as u64),
        ] {
            assert_eq!(header_value("intf.h", name), value, "{name}");
        }
        #[cfg(feature = "loader")]
        for (kind, _) in crate::latency::LOST {
            let names = [
                "LAT_LOST_HIST_FULL",
                "LAT_LOST_START_FULL",
                "LAT_LOST_NO_STACK",
                "LAT_LOST_SITES_FULL",
            ];
            assert_eq!(header_value("latency.h", names[kind as usize]), kind as u64);
        }
        #[cfg(feature = "loader")]
        assert_eq!(
            header_value("latency.h", "LAT_LOST_KINDS"),
            crate::latency::LOST.len() as u64
        );
    }

    #[test]
    fn truncated_and_unknown_records_are_errors() {
        assert_eq!(parse(&[1, 0]).unwrap_err(), ParseError::Short(2));
        let mut bytes = vec![0u8; 48];
        bytes[0] = 99;
        assert_eq!(parse(&bytes).unwrap_err(), ParseError::UnknownKind(99));
        let mut sample = vec![0u8; 100];
        sample[0] = REC_SAMPLE as u8;
        sample[std::mem::offset_of!(SampleRec, copy_len)] = 10; // more than present
        assert!(matches!(parse(&sample), Err(ParseError::BadSize { .. })));
    }
}
