//! The ring-buffer records of `bpf/intf.h` (their Rust types generated from
//! it) and their parser.
//!
//! The parser is pure (no libbpf) so that consumers of the ring buffer outside
//! the recorder, such as the causal runtime, can use it.

use crate::bindings::intf as c;
use crate::bindings::{u16_of, u8_of};
use std::mem::size_of;

pub const MAX_KSTACK: usize = c::MAX_KSTACK as usize;
pub const MAX_FP: usize = c::MAX_FP as usize;
pub const STACK_COPY_MAX: usize = c::STACK_COPY_MAX as usize;
pub const COMM_LEN: usize = c::COMM_LEN as usize;
pub const PATH_LEN: usize = c::PATH_LEN as usize;
pub const MAX_PY_FRAMES: usize = c::MAX_PY_FRAMES as usize;
pub const MAX_GO_FRAMES: usize = c::MAX_GO_FRAMES as usize;

/// A sample's `waker_ustack` with this bit names the `REC_WAKER_USTACK`
/// record of its thread with the same `waker_ustack`, not a table id.
pub use c::WAKER_USTACK_REC;
/// Record kinds (u32): `REC_SYSCALL_STACK` is the stack of the
/// `REC_SYSCALL` that follows, `REC_WAKER_USTACK` a waker's user stack at
/// a wakeup, both sample-shaped records.
pub use c::{
    REC_BIO_DONE, REC_BIO_ISSUE, REC_COMM, REC_EXEC, REC_EXIT, REC_FORK, REC_GO_WAIT, REC_PY_CODE,
    REC_SAMPLE, REC_SEGMENT, REC_SYSCALL, REC_SYSCALL_STACK, REC_WAKER_STACK, REC_WAKER_USTACK,
};
/// Record kinds are below this.
pub const REC_KINDS: usize = c::REC_KIND_SLOTS as usize;

/// Why a record was not written (`enum lost_cause`): the ring buffer was
/// full; the kernel could not allocate the thread's state; a kernel table
/// (system-call totals) was full; the table of wakers' stacks had no room
/// (`REC_WAKER_STACK`: no record, the slot of those stacks).
pub use c::{LOST_NO_STATE, LOST_RING_FULL, LOST_STACK_TABLE, LOST_TABLE_FULL};
pub const LOST_CAUSES: usize = c::LOST_CAUSES as usize;
pub const SYS_HIST: usize = c::SYS_HIST as usize;

pub const CLASS_CPU: u8 = u8_of(c::CLASS_CPU);
pub const CLASS_IO: u8 = u8_of(c::CLASS_IO);
pub const CLASS_LOCK: u8 = u8_of(c::CLASS_LOCK);
pub const CLASS_SCHED: u8 = u8_of(c::CLASS_SCHED);
pub const CLASS_OTHER: u8 = u8_of(c::CLASS_OTHER);

pub const WAKER_NONE: u8 = u8_of(c::WAKER_NONE);
pub const WAKER_THREAD: u8 = u8_of(c::WAKER_THREAD);
pub const WAKER_IRQ: u8 = u8_of(c::WAKER_IRQ);
pub const WAKER_SOFTIRQ: u8 = u8_of(c::WAKER_SOFTIRQ);
pub const WAKER_TIMER: u8 = u8_of(c::WAKER_TIMER);
/// `waker_id` of `WAKER_IRQ` for inter-processor interrupts and unknown vectors.
pub use c::{IRQ_IPI, IRQ_UNKNOWN};

pub const SF_KSTACK_LEAF_IS_IP: u16 = u16_of(c::SF_KSTACK_LEAF_IS_IP);
pub const SF_USER_REGS: u16 = u16_of(c::SF_USER_REGS);
pub const SF_BLOCKED_TAIL: u16 = u16_of(c::SF_BLOCKED_TAIL);
pub const SF_LATE_USTACK: u16 = u16_of(c::SF_LATE_USTACK);
pub const SF_EXIT_TAIL: u16 = u16_of(c::SF_EXIT_TAIL);
pub const SF_SEGMENT: u16 = u16_of(c::SF_SEGMENT);

/// `cpu` of a segment that was still open when the recording ended.
pub const CPU_OPEN: u16 = u16_of(c::CPU_OPEN);

/// The records as C lays them out (`intf.h`, generated).
pub use c::{
    bio_rec as BioRec, exec_rec as ExecRec, fork_rec as ForkRec, rec_hdr as RecHdr,
    sample_rec as SampleRec, segment_rec as SegmentRec, syscall_key as SyscallKey,
    syscall_rec as SyscallRec, syscall_totals as SyscallTotals, task_rec as TaskRec,
};
/// Go: a process's runtime layout, the probes' counts (`goroutines.bpf.h`).
pub use c::{go_config as GoConfig, go_counts as GoCounts};
/// CPython: a code object's first sight, a process's interpreter layout,
/// the walks' counts (`python.bpf.h`).
pub use c::{py_code_rec as PyCodeRec, py_config as PyConfig, py_counts as PyCounts};
pub use c::{PY_ENTRY_FLAG, PY_FRAME_OBJECT, PY_NO_CFRAME, PY_SHIM_OWNER};

impl GoCounts {
    pub fn add(&mut self, o: &GoCounts) {
        self.parks += o.parks;
        self.readies += o.readies;
        self.runs += o.runs;
        self.records += o.records;
        self.bad_layout += o.bad_layout;
        self.no_slot += o.no_slot;
        self.truncated += o.truncated;
    }
}

/// A goroutine's park that passed a sampling point (`struct go_wait_rec`
/// without its stack), and its stack: where it parked, then return
/// addresses, innermost first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoWait<'a> {
    pub pid: u32,
    pub tid: u32,
    pub goid: u64,
    pub start: u64,
    pub wake: u64,
    pub end: u64,
    pub waker_goid: u64,
    pub waker_tid: u32,
    pub weight: u32,
    pub sched_weight: u32,
    /// The descriptor the network poller waited on, if any.
    pub fd: Option<i32>,
    /// The runtime's waitReason number.
    pub reason: u8,
    stack: &'a [u8],
}

impl<'a> GoWait<'a> {
    /// Where it parked, then return addresses, innermost first.
    pub fn stack(&self) -> impl Iterator<Item = u64> + 'a {
        self.stack
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
    }
}

fn go_wait(bytes: &[u8]) -> Result<GoWait<'_>, ParseError> {
    let base = std::mem::offset_of!(c::go_wait_rec, pc);
    let field = |at: usize, n: usize| -> Result<&[u8], ParseError> {
        bytes.get(at..at + n).ok_or(ParseError::Short(bytes.len()))
    };
    let u32_at = |f: usize| field(f, 4).map(|b| u32::from_ne_bytes(b.try_into().unwrap()));
    let u64_at = |f: usize| field(f, 8).map(|b| u64::from_ne_bytes(b.try_into().unwrap()));
    use std::mem::offset_of;
    type R = c::go_wait_rec;
    let frames = u32::from(u16::from_ne_bytes(
        field(offset_of!(R, frames), 2)?.try_into().unwrap(),
    )) as usize;
    if frames > MAX_GO_FRAMES {
        return Err(ParseError::BadSize {
            kind: REC_GO_WAIT,
            size: bytes.len(),
        });
    }
    let stack = field(base, frames * 8)?;
    let flags = field(offset_of!(R, flags), 1)?[0];
    Ok(GoWait {
        pid: u32_at(offset_of!(R, pid))?,
        tid: u32_at(offset_of!(R, tid))?,
        goid: u64_at(offset_of!(R, goid))?,
        start: u64_at(offset_of!(R, start))?,
        wake: u64_at(offset_of!(R, wake))?,
        end: u64_at(offset_of!(R, end))?,
        waker_goid: u64_at(offset_of!(R, waker_goid))?,
        waker_tid: u32_at(offset_of!(R, waker_tid))?,
        weight: u32_at(offset_of!(R, weight))?,
        sched_weight: u32_at(offset_of!(R, sched_weight))?,
        fd: (u32::from(flags) & c::GOW_IO_FD != 0)
            .then(|| u32_at(offset_of!(R, fd)).map(|v| v as i32))
            .transpose()?,
        reason: field(offset_of!(R, reason), 1)?[0],
        stack,
    })
}

impl PyCounts {
    pub fn add(&mut self, o: &PyCounts) {
        let fields = [
            (&mut self.samples, o.samples),
            (&mut self.frames, o.frames),
            (&mut self.no_tstate, o.no_tstate),
            (&mut self.stale_tstate, o.stale_tstate),
            (&mut self.truncated, o.truncated),
            (&mut self.bad_pointer, o.bad_pointer),
            (&mut self.loops, o.loops),
            (&mut self.codes, o.codes),
            (&mut self.not_code, o.not_code),
            (&mut self.cached, o.cached),
            (&mut self.counter_wrong, o.counter_wrong),
            (&mut self.frees, o.frees),
            (&mut self.forks, o.forks),
        ];
        for (sum, v) in fields {
            *sum += v;
        }
    }
}

/// One interpreter frame of a sample, innermost first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PyFrame {
    /// The code object's address in the process.
    pub code: u64,
    /// 3.10: `f_lasti`; 3.11+: code units from the start of the code;
    /// `u32::MAX` when unknown.
    pub instr: u32,
    /// The last frame one evaluator call runs (`PYF_GROUP_END`).
    pub group_end: bool,
    /// Tells apart code objects that had the same address in turn: the
    /// frame's code is the code record of the same address and check.
    pub check: u16,
}

/// The strings of a code record, decoded.
impl PyCodeRec {
    /// A record of code object `code` of process `pid` as the recorder
    /// writes one: its qualified name, file (Latin-1, cut to fit) and line
    /// table; the other fields zero, for the caller to set (tests of the
    /// readers of records).
    pub fn named(pid: u32, code: u64, name: &str, file: &str, table: &[u8]) -> Box<PyCodeRec> {
        let mut r: Box<PyCodeRec> = Box::default();
        r.pid = pid;
        r.code = code;
        let fill = |dst: &mut [u8], src: &[u8]| {
            let n = src.len().min(dst.len());
            dst[..n].copy_from_slice(&src[..n]);
            n as u16
        };
        r.name_len = fill(&mut r.name, name.as_bytes());
        r.file_len = fill(&mut r.file, file.as_bytes());
        r.table_len = fill(&mut r.table, table);
        r.name_kind = 1;
        r.file_kind = 1;
        r
    }

    /// The qualified name (the name on 3.10).
    pub fn name(&self) -> String {
        py_string(&self.name, self.name_len, self.name_kind)
    }

    pub fn file(&self) -> String {
        py_string(&self.file, self.file_len, self.file_kind)
    }

    /// The line table as far as it was copied.
    pub fn table(&self) -> &[u8] {
        &self.table[..(self.table_len as usize).min(self.table.len())]
    }

    /// The record decoded into what naming its frames needs.
    pub fn decoded(&self) -> PyCode {
        PyCode {
            name: self.name(),
            file: self.file(),
            first_line: self.firstlineno,
            units: self.units,
            table: self.table().to_vec(),
            v310: self.version == 0x030a,
        }
    }
}

/// A code object as a code record copied it, decoded.
#[derive(Clone, Debug)]
pub struct PyCode {
    /// The qualified name (the name on 3.10).
    pub name: String,
    pub file: String,
    pub first_line: i32,
    /// Code units (3.11+), 0 when not known.
    pub units: u32,
    pub table: Vec<u8>,
    /// The 3.10 line table (by byte offset), not the location table.
    pub v310: bool,
}

/// Characters of `width` bytes each (1: Latin-1, 2: UCS-2, 4: UCS-4), as
/// CPython keeps a compact string; a cut character is dropped.
fn py_string(bytes: &[u8], len: u16, width: u8) -> String {
    let bytes = &bytes[..(len as usize).min(bytes.len())];
    let char_of = |v: u32| char::from_u32(v).unwrap_or(char::REPLACEMENT_CHARACTER);
    match width {
        2 => bytes
            .chunks_exact(2)
            .map(|c| char_of(u16::from_le_bytes([c[0], c[1]]) as u32))
            .collect(),
        4 => bytes
            .chunks_exact(4)
            .map(|c| char_of(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        _ => bytes.iter().map(|&b| b as char).collect(),
    }
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
    py: &'a [u8],
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

    /// Interpreter frames, innermost first.
    pub fn python(&self) -> impl Iterator<Item = PyFrame> + 'a {
        let size = size_of::<c::py_frame>();
        self.py.chunks_exact(size).filter_map(|b| {
            let f: c::py_frame = crate::bindings::read(b)?;
            Some(PyFrame {
                code: f.code,
                instr: f.instr,
                group_end: u32::from(f.flags) & c::PYF_GROUP_END != 0,
                check: f.check,
            })
        })
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
    /// A waker's user stack at its wakeup of thread `rec.waker_id`, named
    /// by that thread's next blocked sample (see [`WAKER_USTACK_REC`]).
    WakerUstack(RawSample<'a>),
    /// A CPython code object, the first time a sample had it.
    PyCode(&'a PyCodeRec),
    /// A goroutine's park that passed a sampling point.
    GoWait(GoWait<'a>),
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

fn read<T: crate::bindings::Plain>(bytes: &[u8]) -> Result<T, ParseError> {
    crate::bindings::read(bytes).ok_or(ParseError::Short(bytes.len()))
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
        REC_SAMPLE | REC_SYSCALL_STACK | REC_WAKER_USTACK => {
            let rec: SampleRec = read(bytes)?;
            let k = rec.kstack_len as usize * 8;
            let f = rec.fp_len as usize * 16;
            let c = rec.copy_len as usize;
            let p = rec.py_len as usize * size_of::<c::py_frame>();
            let base = size_of::<SampleRec>();
            fixed(base + k + f + c + p)?;
            let s = RawSample {
                rec,
                kstack: &bytes[base..base + k],
                fp: &bytes[base + k..base + k + f],
                copy: &bytes[base + k + f..base + k + f + c],
                py: &bytes[base + k + f + c..base + k + f + c + p],
            };
            match hdr.kind {
                REC_SAMPLE => RawRecord::Sample(s),
                REC_SYSCALL_STACK => RawRecord::SyscallStack(s),
                _ => RawRecord::WakerUstack(s),
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
        REC_PY_CODE => {
            fixed(size_of::<PyCodeRec>())?;
            // SAFETY: the size is checked; the record is plain bytes, and
            // the ring keeps records 8-byte aligned.
            let rec = bytes.as_ptr().cast::<PyCodeRec>();
            if !rec.is_aligned() {
                return Err(ParseError::BadSize {
                    kind: hdr.kind,
                    size: bytes.len(),
                });
            }
            RawRecord::PyCode(unsafe { &*rec })
        }
        REC_GO_WAIT => RawRecord::GoWait(go_wait(bytes)?),
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
    fn interpreter_frames_follow_the_stack_copy() {
        let frame = c::py_frame {
            code: 0x7f00_1000,
            instr: 12,
            flags: c::PYF_GROUP_END as u16,
            check: 0xbeef,
        };
        let mut rec = SampleRec {
            hdr: RecHdr {
                kind: REC_SAMPLE,
                size: 0,
            },
            copy_len: 3,
            py_len: 1,
            ..Default::default()
        };
        let base = size_of::<SampleRec>();
        rec.hdr.size = (base + 3 + size_of::<c::py_frame>()) as u32;
        let mut bytes = vec![0u8; rec.hdr.size as usize];
        unsafe {
            std::ptr::write_unaligned(bytes.as_mut_ptr() as *mut SampleRec, rec);
            std::ptr::write_unaligned(bytes.as_mut_ptr().add(base + 3) as *mut c::py_frame, frame);
        }
        let RawRecord::Sample(s) = parse(&bytes).unwrap() else {
            panic!("not a sample")
        };
        assert_eq!(s.copy.len(), 3);
        let frames: Vec<PyFrame> = s.python().collect();
        assert_eq!(
            frames,
            [PyFrame {
                code: 0x7f00_1000,
                instr: 12,
                group_end: true,
                check: 0xbeef
            }]
        );
        // A record that claims more frames than it holds is refused.
        assert!(matches!(
            parse(&bytes[..bytes.len() - 1]),
            Err(ParseError::BadSize { .. })
        ));
    }

    #[test]
    fn code_names_are_decoded_by_character_width() {
        assert_eq!(py_string(b"run\0\0", 3, 1), "run");
        assert_eq!(py_string(b"caf\xe9", 4, 1), "café");
        let wide: Vec<u8> = "naïve→".encode_utf16().flat_map(u16::to_le_bytes).collect();
        assert_eq!(py_string(&wide, wide.len() as u16, 2), "naïve→");
        // Cut inside a character: the part is dropped.
        assert_eq!(py_string(&wide, wide.len() as u16 - 1, 2), "naïve");
        let four: Vec<u8> = "🐍x"
            .chars()
            .flat_map(|c| (c as u32).to_le_bytes())
            .collect();
        assert_eq!(py_string(&four, 8, 4), "🐍x");
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

    #[test]
    fn truncated_and_unknown_records_are_errors() {
        assert_eq!(parse(&[1, 0]).unwrap_err(), ParseError::Short(2));
        let mut bytes = vec![0u8; 48];
        bytes[0] = 99;
        assert_eq!(parse(&bytes).unwrap_err(), ParseError::UnknownKind(99));
        let mut sample = vec![0u8; size_of::<SampleRec>()];
        sample[0] = REC_SAMPLE as u8;
        sample[std::mem::offset_of!(SampleRec, copy_len)] = 10; // more than present
        assert!(matches!(parse(&sample), Err(ParseError::BadSize { .. })));
    }
}
