//! The perf events the recorder needs besides BPF: the cpu-clock timer per CPU
//! that drives on-CPU sampling, and a dummy event per CPU that reports every
//! executable mmap (with its build-id), so that stacks of short-lived
//! processes can still be unwound and symbolized; and uprobes, counting
//! (progress points) or taking the stacks of some of their visits (who
//! calls a costly progress point).

use perf_event_open_sys as sys;
use std::io;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

fn open(attr: &mut sys::bindings::perf_event_attr, cpu: i32) -> io::Result<OwnedFd> {
    attr.size = std::mem::size_of::<sys::bindings::perf_event_attr>() as u32;
    // SAFETY: attr is a fully initialised perf_event_attr.
    let fd = unsafe {
        sys::perf_event_open(attr, -1, cpu, -1, sys::bindings::PERF_FLAG_FD_CLOEXEC as _)
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A cpu-clock event on `cpu` firing every `period_ns`; a BPF program is
/// attached to it, so it never writes samples of its own.
pub fn cpu_clock(cpu: i32, period_ns: u64) -> io::Result<OwnedFd> {
    let mut attr = sys::bindings::perf_event_attr {
        type_: sys::bindings::PERF_TYPE_SOFTWARE,
        config: sys::bindings::PERF_COUNT_SW_CPU_CLOCK as u64,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = period_ns;
    open(&mut attr, cpu)
}

/// Counters of the visits of a uprobe at `offset` in `binary` by any
/// process, one per online CPU: their sum is the number of visits. (A
/// counter that follows a process tree instead, with `inherit`, cannot be
/// used: the kernel re-reads the probe's path from the memory of every
/// process that forks or starts a thread.) They are not close-on-exec, so
/// that the program they are handed to can read them.
pub fn uprobe_counters(binary: &std::path::Path, offset: u64) -> io::Result<Vec<OwnedFd>> {
    uprobe_counters_raising(binary, offset, 0)
}

/// [`uprobe_counters`] for a USDT probe with a semaphore at file offset
/// `semaphore` of `binary` (0: none): the kernel raises the semaphore in
/// every process that maps the binary while the probe is attached, as a
/// tracer must for the program to reach the probe.
pub fn uprobe_counters_raising(
    binary: &std::path::Path,
    offset: u64,
    semaphore: u64,
) -> io::Result<Vec<OwnedFd>> {
    let probe = UprobeAttr::new(binary, offset)?;
    let mut fds = Vec::new();
    for cpu in online_cpus()? {
        let mut attr = probe.attr();
        // The uprobe PMU's format: ref_ctr_offset is config:32-63.
        attr.config = semaphore << 32;
        // Not close-on-exec: see uprobe_counters.
        // SAFETY: attr is initialised and the path outlives the call.
        let fd = unsafe { sys::perf_event_open(&mut attr, -1, cpu, -1, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    Ok(fds)
}

/// A uprobe at `offset` of a binary, as perf_event_open takes it.
struct UprobeAttr {
    pmu: u32,
    path: std::ffi::CString,
    offset: u64,
}

impl UprobeAttr {
    fn new(binary: &std::path::Path, offset: u64) -> io::Result<UprobeAttr> {
        use std::os::unix::ffi::OsStrExt;
        let pmu = std::fs::read_to_string("/sys/bus/event_source/devices/uprobe/type")?;
        let pmu: u32 = pmu
            .trim()
            .parse()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad uprobe PMU type"))?;
        let path = std::ffi::CString::new(binary.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path with a NUL byte"))?;
        Ok(UprobeAttr { pmu, path, offset })
    }

    /// The attributes; they point into `self`, which must outlive their use.
    fn attr(&self) -> sys::bindings::perf_event_attr {
        let mut attr = sys::bindings::perf_event_attr {
            type_: self.pmu,
            size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
            ..Default::default()
        };
        attr.__bindgen_anon_3.uprobe_path = self.path.as_ptr() as u64;
        attr.__bindgen_anon_4.probe_offset = self.offset;
        attr
    }
}

/// One visit of a sampled uprobe: the thread, and its user registers and
/// stack at the probed instruction.
pub struct UprobeVisit<'a> {
    pub pid: u32,
    pub tid: u32,
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// User stack memory from `sp` up.
    pub stack: &'a [u8],
}

/// perf's register numbers on x86-64 (`enum perf_event_x86_regs`).
const PERF_REG_X86_BP: u64 = 6;
const PERF_REG_X86_SP: u64 = 7;
const PERF_REG_X86_IP: u64 = 8;
/// Stack copied per sampled visit: enough for a few frames of callers.
const SAMPLED_STACK_BYTES: u32 = 16 << 10;
const SAMPLE_PAGES: usize = 64;

/// A uprobe that takes the user stack of one visit in `every`, one ring per
/// CPU. Samples of every process that runs the code.
pub struct UprobeStacks {
    rings: Vec<(OwnedFd, *mut u8)>,
    page: usize,
}

// SAFETY: the mapped rings are only accessed through &mut self.
unsafe impl Send for UprobeStacks {}

impl UprobeStacks {
    pub fn open(binary: &std::path::Path, offset: u64, every: u64) -> io::Result<UprobeStacks> {
        let probe = UprobeAttr::new(binary, offset)?;
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let mut rings = Vec::new();
        for cpu in online_cpus()? {
            let mut attr = probe.attr();
            attr.__bindgen_anon_1.sample_period = every.max(1);
            attr.sample_type = (sys::bindings::PERF_SAMPLE_TID
                | sys::bindings::PERF_SAMPLE_REGS_USER
                | sys::bindings::PERF_SAMPLE_STACK_USER) as u64;
            attr.sample_regs_user =
                (1 << PERF_REG_X86_BP) | (1 << PERF_REG_X86_SP) | (1 << PERF_REG_X86_IP);
            attr.sample_stack_user = SAMPLED_STACK_BYTES;
            let fd = open(&mut attr, cpu)?;
            let len = page * (1 + SAMPLE_PAGES);
            let base =
                crate::ringbuf::map_shared(fd.as_fd(), 0, len, libc::PROT_READ | libc::PROT_WRITE)?;
            rings.push((fd, base));
        }
        Ok(UprobeStacks { rings, page })
    }

    /// Hand every sampled visit so far to `f`.
    pub fn drain(&mut self, mut f: impl FnMut(&UprobeVisit<'_>)) {
        for &(_, base) in &self.rings {
            drain_ring(base, self.page, SAMPLE_PAGES, |kind, _, buf| {
                if kind == sys::bindings::PERF_RECORD_SAMPLE {
                    if let Some(v) = parse_uprobe_sample(&buf[8..]) {
                        f(&v);
                    }
                }
            });
        }
    }
}

impl Drop for UprobeStacks {
    fn drop(&mut self) {
        for &(_, base) in &self.rings {
            unsafe { libc::munmap(base as *mut libc::c_void, self.page * (1 + SAMPLE_PAGES)) };
        }
    }
}

/// The body of a sample with TID, REGS_USER (bp, sp, ip) and STACK_USER.
fn parse_uprobe_sample(b: &[u8]) -> Option<UprobeVisit<'_>> {
    let u32_at = |o: usize| Some(u32::from_ne_bytes(b.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_ne_bytes(b.get(o..o + 8)?.try_into().ok()?));
    let (pid, tid) = (u32_at(0)?, u32_at(4)?);
    // abi 0: no user registers (a kernel thread).
    if u64_at(8)? == 0 {
        return None;
    }
    let (bp, sp, ip) = (u64_at(16)?, u64_at(24)?, u64_at(32)?);
    let size = usize::try_from(u64_at(40)?).ok()?;
    let stack = b.get(48..48usize.checked_add(size)?)?;
    // The bytes the kernel could copy, after the stack.
    let copied = if size == 0 {
        0
    } else {
        usize::try_from(u64_at(48 + size)?).ok()?.min(size)
    };
    Some(UprobeVisit {
        pid,
        tid,
        ip,
        sp,
        bp,
        stack: &stack[..copied],
    })
}

/// CPUs that are online, from sysfs ("0-1,4").
pub fn online_cpus() -> io::Result<Vec<i32>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online")?;
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let parse = |s: &str| {
            s.parse::<i32>()
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad cpu list"))
        };
        cpus.extend(parse(a)?..=parse(b)?);
    }
    Ok(cpus)
}

/// What the kernel reports about address spaces, in the order it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddressEvent {
    Mmap(MmapEvent),
    /// A process replaced its image: every mapping before this is gone.
    /// Reported when the old address space is dropped, before the new
    /// image is mapped (unlike the exec tracepoint, which comes after).
    Exec {
        time: u64,
        pid: u32,
    },
}

impl AddressEvent {
    pub fn time(&self) -> u64 {
        match self {
            AddressEvent::Mmap(m) => m.time,
            AddressEvent::Exec { time, .. } => *time,
        }
    }
}

/// An executable file mapping reported by the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MmapEvent {
    pub time: u64,
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
    pub len: u64,
    pub pgoff: u64,
    pub build_id: Option<Vec<u8>>,
    pub path: String,
}

const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_COMM: u32 = 3;
const PERF_RECORD_MISC_COMM_EXEC: u16 = 1 << 13;
const PERF_RECORD_MMAP2: u32 = 10;
const PERF_RECORD_MISC_MMAP_BUILD_ID: u16 = 1 << 14;
const DATA_PAGES: usize = 64;

/// Per-CPU rings of a dummy event that records executable mmaps and execs.
pub struct MmapEvents {
    rings: Vec<(OwnedFd, *mut u8)>,
    page: usize,
    /// mmap events the kernel dropped because a ring was full.
    pub lost: u64,
}

// SAFETY: the mapped rings are only accessed through &mut self.
unsafe impl Send for MmapEvents {}

impl MmapEvents {
    pub fn open(cpus: &[i32]) -> io::Result<Self> {
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let mut rings = Vec::new();
        for &cpu in cpus {
            let mut attr = sys::bindings::perf_event_attr {
                type_: sys::bindings::PERF_TYPE_SOFTWARE,
                config: sys::bindings::PERF_COUNT_SW_DUMMY as u64,
                sample_type: (sys::bindings::PERF_SAMPLE_TID | sys::bindings::PERF_SAMPLE_TIME)
                    as u64,
                clockid: libc::CLOCK_MONOTONIC,
                ..Default::default()
            };
            attr.set_mmap(1);
            attr.set_mmap2(1);
            attr.set_comm(1);
            attr.set_comm_exec(1);
            attr.set_build_id(1);
            attr.set_sample_id_all(1);
            attr.set_use_clockid(1);
            let fd = open(&mut attr, cpu)?;
            let len = page * (1 + DATA_PAGES);
            let base =
                crate::ringbuf::map_shared(fd.as_fd(), 0, len, libc::PROT_READ | libc::PROT_WRITE)?;
            rings.push((fd, base));
        }
        Ok(Self {
            rings,
            page,
            lost: 0,
        })
    }

    /// Hand every pending event to `f`, per CPU in order (callers that
    /// need one order across CPUs sort by time).
    pub fn drain(&mut self, mut f: impl FnMut(AddressEvent)) {
        for &(_, base) in &self.rings {
            let lost = &mut self.lost;
            drain_ring(base, self.page, DATA_PAGES, |kind, misc, buf| match kind {
                PERF_RECORD_MMAP2 => {
                    if let Some(ev) = parse_mmap2(&buf[8..], misc) {
                        f(AddressEvent::Mmap(ev));
                    }
                }
                PERF_RECORD_COMM if misc & PERF_RECORD_MISC_COMM_EXEC != 0 && buf.len() >= 24 => {
                    let pid = u32::from_ne_bytes(buf[8..12].try_into().unwrap());
                    // sample_id_all puts {pid, tid, time} last.
                    let time = u64::from_ne_bytes(buf[buf.len() - 8..].try_into().unwrap());
                    f(AddressEvent::Exec { time, pid });
                }
                PERF_RECORD_LOST if buf.len() >= 24 => {
                    *lost += u64::from_ne_bytes(buf[16..24].try_into().unwrap());
                }
                _ => {}
            });
        }
    }
}

/// Hand every record of the perf ring mapped at `base` (a header page and
/// `pages` data pages) to `f` as (type, misc, the whole record), and free
/// their room.
fn drain_ring(base: *mut u8, page: usize, pages: usize, mut f: impl FnMut(u32, u16, &[u8])) {
    let data_size = (page * pages) as u64;
    // struct perf_event_mmap_page: data_head at 1024, data_tail at 1032.
    let head_pos = unsafe { &*(base.add(1024) as *const AtomicU64) };
    let tail_pos = unsafe { &*(base.add(1032) as *const AtomicU64) };
    let head = head_pos.load(Ordering::Acquire);
    let mut tail = tail_pos.load(Ordering::Relaxed);
    let data = unsafe { base.add(page) };
    let mut buf = Vec::new();
    let read = |off: u64, out: &mut Vec<u8>, n: usize| {
        out.clear();
        for i in 0..n as u64 {
            out.push(unsafe { *data.add(((off + i) % data_size) as usize) });
        }
    };
    while tail < head {
        read(tail, &mut buf, 8);
        let kind = u32::from_ne_bytes(buf[0..4].try_into().unwrap());
        let misc = u16::from_ne_bytes(buf[4..6].try_into().unwrap());
        let size = u16::from_ne_bytes(buf[6..8].try_into().unwrap()) as usize;
        if size < 8 {
            break;
        }
        read(tail, &mut buf, size);
        f(kind, misc, &buf);
        tail += size as u64;
    }
    tail_pos.store(tail, Ordering::Release);
}

impl Drop for MmapEvents {
    fn drop(&mut self) {
        for &(_, base) in &self.rings {
            unsafe { libc::munmap(base as *mut libc::c_void, self.page * (1 + DATA_PAGES)) };
        }
    }
}

/// Body of PERF_RECORD_MMAP2 followed by sample_id {pid, tid, time}.
fn parse_mmap2(b: &[u8], misc: u16) -> Option<MmapEvent> {
    let u32_at = |o: usize| Some(u32::from_ne_bytes(b.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_ne_bytes(b.get(o..o + 8)?.try_into().ok()?));
    let pid = u32_at(0)?;
    let tid = u32_at(4)?;
    let start = u64_at(8)?;
    let len = u64_at(16)?;
    let pgoff = u64_at(24)?;
    let build_id = if misc & PERF_RECORD_MISC_MMAP_BUILD_ID != 0 {
        let n = (*b.get(32)? as usize).min(20);
        Some(b.get(36..36 + n)?.to_vec()).filter(|id| !id.is_empty())
    } else {
        None
    };
    let prot = u32_at(56)?;
    let name = b.get(64..)?;
    let end = name.iter().position(|&c| c == 0)?;
    let path = String::from_utf8_lossy(&name[..end]).into_owned();
    // sample_id_all: pid, tid, time at the end of the record.
    let time = u64_at(b.len().checked_sub(8)?)?;
    if prot & libc::PROT_EXEC as u32 == 0 {
        return None;
    }
    Some(MmapEvent {
        time,
        pid,
        tid,
        start,
        len,
        pgoff,
        build_id,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mmap2_body_with_build_id() {
        let mut b = Vec::new();
        b.extend(42u32.to_ne_bytes());
        b.extend(43u32.to_ne_bytes());
        b.extend(0x5555_0000u64.to_ne_bytes());
        b.extend(0x2000u64.to_ne_bytes());
        b.extend(0x1000u64.to_ne_bytes());
        b.push(3); // build-id size
        b.extend([0u8; 3]);
        b.extend([0xab, 0xcd, 0xef]);
        b.extend([0u8; 17]);
        b.extend(((libc::PROT_READ | libc::PROT_EXEC) as u32).to_ne_bytes());
        b.extend(0u32.to_ne_bytes());
        b.extend(b"/usr/bin/x\0\0\0\0\0\0");
        b.extend(42u32.to_ne_bytes());
        b.extend(43u32.to_ne_bytes());
        b.extend(777u64.to_ne_bytes());
        let ev = parse_mmap2(&b, PERF_RECORD_MISC_MMAP_BUILD_ID).unwrap();
        assert_eq!(ev.pid, 42);
        assert_eq!(ev.start, 0x5555_0000);
        assert_eq!(ev.pgoff, 0x1000);
        assert_eq!(ev.build_id.as_deref(), Some(&[0xab, 0xcd, 0xef][..]));
        assert_eq!(ev.path, "/usr/bin/x");
        assert_eq!(ev.time, 777);
    }

    #[test]
    fn a_sampled_uprobe_visit_reads_back() {
        let mut b = Vec::new();
        b.extend(42u32.to_ne_bytes());
        b.extend(43u32.to_ne_bytes());
        b.extend(2u64.to_ne_bytes()); // abi 64
        b.extend(0x7ff0u64.to_ne_bytes()); // bp
        b.extend(0x7f00u64.to_ne_bytes()); // sp
        b.extend(0x401000u64.to_ne_bytes()); // ip
        b.extend(16u64.to_ne_bytes());
        b.extend(0x401234u64.to_ne_bytes());
        b.extend(0xdeadu64.to_ne_bytes());
        b.extend(8u64.to_ne_bytes()); // only 8 bytes could be copied
        let v = parse_uprobe_sample(&b).unwrap();
        assert_eq!(
            (v.pid, v.tid, v.bp, v.sp, v.ip),
            (42, 43, 0x7ff0, 0x7f00, 0x401000)
        );
        assert_eq!(v.stack, &0x401234u64.to_ne_bytes()[..]);
        // A kernel thread's sample has no user registers.
        let mut k = b[..8].to_vec();
        k.extend(0u64.to_ne_bytes());
        assert!(parse_uprobe_sample(&k).is_none());
        assert!(parse_uprobe_sample(&b[..30]).is_none());
    }

    #[test]
    fn cpu_list_ranges() {
        assert!(!online_cpus().unwrap().is_empty());
    }
}
