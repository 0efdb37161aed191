//! Compact encoding of records inside a chunk.
//!
//! Every record is a tag byte followed by LEB128 varints. Times are zigzag
//! deltas from the previous time written in the same chunk (records arrive
//! nearly in time order, so most deltas are small), and the times inside a
//! record are deltas from its first time. Each chunk starts from time 0, so
//! chunks decode independently.

use crate::record::*;

const T_SAMPLE: u8 = 1;
const T_SEGMENT: u8 = 2;
const T_FORK: u8 = 3;
const T_EXEC: u8 = 4;
const T_COMM: u8 = 5;
const T_EXIT: u8 = 6;
const T_BIO_ISSUE: u8 = 7;
const T_BIO_DONE: u8 = 8;
const T_MMAP: u8 = 9;
const T_DSO: u8 = 10;
const T_STACK: u8 = 11;
const T_SYMBOL: u8 = 12;
const T_LOST: u8 = 13;
const T_IRQ_NAME: u8 = 14;
const T_FINISH: u8 = 15;
const T_SYSCALL: u8 = 16;
const T_SYSCALL_TOTALS: u8 = 17;
const T_SYSCALL_CONFIG: u8 = 18;
const T_NOTE: u8 = 19;
const T_GO_WAIT: u8 = 20;

/// Most frames in one stack. The recorder writes at most a few hundred
/// (kernel frames, then the user frames the unwinder finds); a record that
/// claims more is corrupt, and must not make a reader allocate for it.
pub const MAX_STACK_FRAMES: usize = 1024;
/// Most functions at one address (one inlined into the next).
pub const MAX_INLINED: usize = 64;
/// Longest string: a path, a function name, a thread name.
pub const MAX_STRING: usize = 64 << 10;
/// Longest build-id (GNU build-ids are 20 bytes, some are 8 or 16).
pub const MAX_BUILD_ID: usize = 64;

/// Flags beside a sample's class.
const S_LATE_USER_STACK: u64 = 8;
/// An on-CPU sample that also carries steal time.
const S_CPU_STEAL: u64 = 16;
/// A blocked sample that carries its waker's stack at the wakeup (after
/// its other fields: older traces have none).
const S_WAKER_STACK: u64 = 32;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("record ends early")]
    Eof,
    #[error("unknown record tag {0}")]
    Tag(u8),
    #[error("invalid value in a {0} record")]
    Invalid(&'static str),
}

#[derive(Default)]
pub struct Encoder {
    pub buf: Vec<u8>,
    last_time: u64,
}

impl Encoder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.last_time = 0;
    }

    fn u(&mut self, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.buf.push(byte);
                return;
            }
            self.buf.push(byte | 0x80);
        }
    }

    fn i(&mut self, v: i64) {
        self.u(((v << 1) ^ (v >> 63)) as u64);
    }

    fn time(&mut self, t: u64) {
        self.i(t.wrapping_sub(self.last_time) as i64);
        self.last_time = t;
    }

    /// A string, cut (at a character boundary) to what a reader accepts.
    fn str(&mut self, s: &str) {
        let mut end = s.len().min(MAX_STRING);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.bytes(&s.as_bytes()[..end]);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.u(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    fn waker(&mut self, w: Waker) {
        match w {
            Waker::None => self.u(0),
            Waker::Thread(t) => {
                self.u(1);
                self.u(t as u64)
            }
            Waker::Irq(n) => {
                self.u(2);
                self.u(n as u64)
            }
            Waker::Softirq(n) => {
                self.u(3);
                self.u(n as u64)
            }
            Waker::Timer => self.u(4),
        }
    }

    fn frame(&mut self, f: &Frame) {
        // Kernel and unknown dsos are common: keep their ids to one byte.
        let dso = match f.dso {
            UNKNOWN_DSO => 0,
            d => d as u64 + 1,
        };
        self.u(dso);
        self.u(f.addr);
    }

    fn bio(&mut self, b: &Bio) {
        self.time(b.time);
        self.u(b.dev as u64);
        self.u(b.sector);
        self.u(b.bytes as u64);
        self.u(b.op.as_u8() as u64 | (b.tracked as u64) << 3);
        self.u(b.pid as u64);
        self.u(b.tid as u64);
        self.u(b.error as u64);
    }

    pub fn record(&mut self, r: &Record) {
        match r {
            Record::Sample(s) => {
                self.buf.push(T_SAMPLE);
                self.time(s.time);
                self.u(s.pid as u64);
                self.u(s.tid as u64);
                self.u(s.cpu as u64);
                let steal = s.class == Class::Cpu && s.sched_weight > 0;
                let mut cl = s.class.index() as u64;
                if s.late_user_stack {
                    cl |= S_LATE_USER_STACK;
                }
                if steal {
                    cl |= S_CPU_STEAL;
                }
                let waker_stack = s.class != Class::Cpu && s.waker_stack != 0;
                if waker_stack {
                    cl |= S_WAKER_STACK;
                }
                self.u(cl);
                self.u(s.stack as u64);
                self.u(s.weight as u64);
                if steal {
                    self.u(s.sched_weight as u64);
                }
                if s.class != Class::Cpu {
                    self.u(s.wake.saturating_sub(s.time));
                    self.u(s.end - s.time);
                    self.u(s.sched_weight as u64);
                    self.waker(s.waker);
                    self.u((s.wake == 0) as u64);
                    if waker_stack {
                        self.u(s.waker_stack as u64);
                    }
                }
            }
            Record::Segment(s) => {
                self.buf.push(T_SEGMENT);
                self.time(s.start);
                self.u(s.tid as u64);
                self.u(s.pid as u64);
                // wake is 0 (none) or in [start, end]: store wake - start + 1.
                self.u(if s.wake == 0 { 0 } else { s.wake - s.start + 1 });
                self.u(s.end - s.start);
                let cpu = s.cpu.map_or(0, |c| c as u64 + 1);
                self.u(s.class.index() as u64 | cpu << 3);
                self.waker(s.waker);
            }
            Record::Fork {
                time,
                parent_pid,
                parent_tid,
                pid,
                tid,
            } => {
                self.buf.push(T_FORK);
                self.time(*time);
                self.u(*parent_pid as u64);
                self.u(*parent_tid as u64);
                self.u(*pid as u64);
                self.u(*tid as u64);
            }
            Record::Exec {
                time,
                pid,
                tid,
                filename,
            } => {
                self.buf.push(T_EXEC);
                self.time(*time);
                self.u(*pid as u64);
                self.u(*tid as u64);
                self.str(filename);
            }
            Record::Comm {
                time,
                pid,
                tid,
                comm,
            } => {
                self.buf.push(T_COMM);
                self.time(*time);
                self.u(*pid as u64);
                self.u(*tid as u64);
                self.str(comm);
            }
            Record::Exit { time, pid, tid } => {
                self.buf.push(T_EXIT);
                self.time(*time);
                self.u(*pid as u64);
                self.u(*tid as u64);
            }
            Record::BioIssue(b) => {
                self.buf.push(T_BIO_ISSUE);
                self.bio(b);
            }
            Record::BioDone(b) => {
                self.buf.push(T_BIO_DONE);
                self.bio(b);
            }
            Record::Mmap(m) => {
                self.buf.push(T_MMAP);
                self.time(m.time);
                self.u(m.pid as u64);
                self.u(m.start);
                self.u(m.end - m.start);
                self.u(m.file_offset);
                self.u(m.dso as u64);
            }
            Record::Dso(d) => {
                self.buf.push(T_DSO);
                self.u(d.id as u64);
                self.str(&d.path);
                // A build-id a reader would refuse is left out: frames of
                // the file then go unchecked, not the whole trace unread.
                let id = d.build_id.as_deref().unwrap_or(&[]);
                self.bytes(if id.len() <= MAX_BUILD_ID { id } else { &[] });
            }
            Record::Stack(s) => {
                // Leaf first: a stack deeper than a reader accepts loses
                // its outermost frames.
                let frames = &s.frames[..s.frames.len().min(MAX_STACK_FRAMES)];
                self.buf.push(T_STACK);
                self.u(s.id as u64);
                self.u(frames.len() as u64);
                for f in frames {
                    self.frame(f);
                }
            }
            Record::Symbol(s) => {
                // Innermost first, the real function last: too deep a
                // chain of inlined functions loses its innermost ones.
                let frames = &s.frames[s.frames.len().saturating_sub(MAX_INLINED)..];
                self.buf.push(T_SYMBOL);
                self.frame(&s.frame);
                self.u(frames.len() as u64);
                for f in frames {
                    self.str(&f.function);
                    self.str(f.file.as_deref().unwrap_or(""));
                    self.u(f.line as u64);
                }
            }
            Record::Lost(l) => {
                self.buf.push(T_LOST);
                self.str(&l.what);
                self.u(l.count);
            }
            Record::IrqName { irq, name } => {
                self.buf.push(T_IRQ_NAME);
                self.u(*irq as u64);
                self.str(name);
            }
            Record::Syscall(c) => {
                self.buf.push(T_SYSCALL);
                self.time(c.time);
                self.u(c.end.saturating_sub(c.time));
                self.u(c.pid as u64);
                self.u(c.tid as u64);
                self.u(c.nr as u64);
                for b in c.blocked {
                    self.u(b);
                }
                self.u(c.sleeps as u64);
                self.u(c.min_flt as u64);
                self.u(c.maj_flt as u64);
                self.waker(c.waker);
                self.u(c.stack as u64);
                self.u(c.sampled as u64);
            }
            Record::SyscallTotals(t) => {
                self.buf.push(T_SYSCALL_TOTALS);
                self.u(t.pid as u64);
                self.u(t.nr as u64);
                self.u(t.count);
                self.u(t.total_ns);
                for b in t.blocked {
                    self.u(b);
                }
                self.u(t.min_flt);
                self.u(t.maj_flt);
                self.u(t.hist.len() as u64);
                for &h in &t.hist {
                    self.u(h);
                }
            }
            Record::SyscallConfig(c) => {
                self.buf.push(T_SYSCALL_CONFIG);
                self.u(c.keep_ns);
                self.u(c.sample_every as u64);
            }
            Record::Note(text) => {
                self.buf.push(T_NOTE);
                self.str(text);
            }
            Record::GoWait(g) => {
                self.buf.push(T_GO_WAIT);
                self.time(g.time);
                // 0: no wakeup seen, else its distance from the park + 1.
                self.u(if g.wake == 0 {
                    0
                } else {
                    g.wake.saturating_sub(g.time) + 1
                });
                self.u(g.end.saturating_sub(g.time));
                self.u(g.pid as u64);
                self.u(g.tid as u64);
                self.u(g.goid);
                self.str(&g.reason);
                self.u(g.weight as u64);
                self.u(g.sched_weight as u64);
                self.u(g.waker_goid);
                self.u(g.waker_tid as u64);
                self.u(g.stack as u64);
                self.str(g.waited_on.as_deref().unwrap_or(""));
            }
            Record::Finish(f) => {
                self.buf.push(T_FINISH);
                self.time(f.time);
                match f.exit_code {
                    None => self.u(0),
                    Some(c) => {
                        self.u(1);
                        self.i(c as i64)
                    }
                }
            }
        }
    }
}

pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
    last_time: u64,
}

impl<'a> Decoder<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self {
            buf,
            pos: 0,
            last_time: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self.buf.get(self.pos).ok_or(DecodeError::Eof)?;
        self.pos += 1;
        Ok(b)
    }

    fn u(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::Invalid("varint"))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        u32::try_from(self.u()?).map_err(|_| DecodeError::Invalid(what))
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        u16::try_from(self.u()?).map_err(|_| DecodeError::Invalid(what))
    }

    fn i(&mut self) -> Result<i64, DecodeError> {
        let v = self.u()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn time(&mut self) -> Result<u64, DecodeError> {
        let t = self.last_time.wrapping_add(self.i()? as u64);
        self.last_time = t;
        Ok(t)
    }

    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u()?;
        if n > MAX_STRING as u64 {
            return Err(DecodeError::Invalid("string length"));
        }
        let end = self.pos.checked_add(n as usize).ok_or(DecodeError::Eof)?;
        let b = self.buf.get(self.pos..end).ok_or(DecodeError::Eof)?;
        self.pos = end;
        Ok(b)
    }

    fn str(&mut self) -> Result<String, DecodeError> {
        Ok(String::from_utf8_lossy(self.bytes()?).into_owned())
    }

    fn class(v: u64, what: &'static str) -> Result<Class, DecodeError> {
        Class::from_u8((v & 7) as u8).ok_or(DecodeError::Invalid(what))
    }

    fn waker(&mut self) -> Result<Waker, DecodeError> {
        Ok(match self.u()? {
            0 => Waker::None,
            1 => Waker::Thread(self.u32("waker")?),
            2 => Waker::Irq(self.u32("waker")?),
            3 => Waker::Softirq(self.u32("waker")?),
            4 => Waker::Timer,
            _ => return Err(DecodeError::Invalid("waker")),
        })
    }

    fn frame(&mut self) -> Result<Frame, DecodeError> {
        let dso = match self.u()? {
            0 => UNKNOWN_DSO,
            d => u32::try_from(d - 1).map_err(|_| DecodeError::Invalid("frame"))?,
        };
        Ok(Frame {
            dso,
            addr: self.u()?,
        })
    }

    fn bio(&mut self) -> Result<Bio, DecodeError> {
        let time = self.time()?;
        let dev = self.u32("bio")?;
        let sector = self.u()?;
        let bytes = self.u32("bio")?;
        let op = self.u()?;
        Ok(Bio {
            time,
            dev,
            sector,
            bytes,
            op: BioOp::from_u8((op & 7) as u8),
            tracked: op & 8 != 0,
            pid: self.u32("bio")?,
            tid: self.u32("bio")?,
            error: self.u16("bio")?,
        })
    }

    /// A count of elements, at most `max`. Every element takes at least
    /// one byte, so a count beyond the bytes left is corrupt too: neither
    /// may make a reader allocate for it.
    fn len(&mut self, what: &'static str, max: usize) -> Result<usize, DecodeError> {
        let n = self.u()?;
        if n > max.min(self.buf.len() - self.pos) as u64 {
            return Err(DecodeError::Invalid(what));
        }
        Ok(n as usize)
    }

    pub fn record(&mut self) -> Result<Record, DecodeError> {
        Ok(match self.byte()? {
            T_SAMPLE => {
                let time = self.time()?;
                let pid = self.u32("sample")?;
                let tid = self.u32("sample")?;
                let cpu = self.u16("sample")?;
                let cl = self.u()?;
                let class = Self::class(cl, "sample")?;
                let stack = self.u32("sample")?;
                let weight = self.u32("sample")?;
                let mut s = Sample {
                    time,
                    wake: 0,
                    end: time,
                    pid,
                    tid,
                    cpu,
                    class,
                    weight,
                    sched_weight: 0,
                    waker: Waker::None,
                    stack,
                    late_user_stack: cl & S_LATE_USER_STACK != 0,
                    waker_stack: 0,
                };
                if class == Class::Cpu && cl & S_CPU_STEAL != 0 {
                    s.sched_weight = self.u32("sample")?;
                }
                if class != Class::Cpu {
                    let wake = self.u()?;
                    s.end = time.saturating_add(self.u()?);
                    s.sched_weight = self.u32("sample")?;
                    s.waker = self.waker()?;
                    let no_wake = self.u()? != 0;
                    s.wake = if no_wake {
                        0
                    } else {
                        time.saturating_add(wake)
                    };
                    if cl & S_WAKER_STACK != 0 {
                        s.waker_stack = self.u32("sample")?;
                    }
                }
                Record::Sample(s)
            }
            T_SEGMENT => {
                let start = self.time()?;
                let tid = self.u32("segment")?;
                let pid = self.u32("segment")?;
                let wake = self.u()?;
                let end = start.saturating_add(self.u()?);
                let cc = self.u()?;
                // The CPU + 1, or 0 for none.
                let cpu = cc >> 3;
                if cpu > 1 << 16 {
                    return Err(DecodeError::Invalid("segment"));
                }
                Record::Segment(Segment {
                    pid,
                    tid,
                    start,
                    wake: if wake == 0 {
                        0
                    } else {
                        start.saturating_add(wake - 1)
                    },
                    end,
                    class: Self::class(cc, "segment")?,
                    cpu: if cpu == 0 {
                        None
                    } else {
                        Some((cpu - 1) as u16)
                    },
                    waker: self.waker()?,
                })
            }
            T_FORK => Record::Fork {
                time: self.time()?,
                parent_pid: self.u32("fork")?,
                parent_tid: self.u32("fork")?,
                pid: self.u32("fork")?,
                tid: self.u32("fork")?,
            },
            T_EXEC => Record::Exec {
                time: self.time()?,
                pid: self.u32("exec")?,
                tid: self.u32("exec")?,
                filename: self.str()?,
            },
            T_COMM => Record::Comm {
                time: self.time()?,
                pid: self.u32("comm")?,
                tid: self.u32("comm")?,
                comm: self.str()?,
            },
            T_EXIT => Record::Exit {
                time: self.time()?,
                pid: self.u32("exit")?,
                tid: self.u32("exit")?,
            },
            T_BIO_ISSUE => Record::BioIssue(self.bio()?),
            T_BIO_DONE => Record::BioDone(self.bio()?),
            T_MMAP => {
                let time = self.time()?;
                let pid = self.u32("mmap")?;
                let start = self.u()?;
                let len = self.u()?;
                Record::Mmap(Mmap {
                    time,
                    pid,
                    start,
                    end: start.saturating_add(len),
                    file_offset: self.u()?,
                    dso: self.u32("mmap")?,
                })
            }
            T_DSO => {
                let id = self.u32("dso")?;
                let path = self.str()?;
                let build_id = self.bytes()?;
                if build_id.len() > MAX_BUILD_ID {
                    return Err(DecodeError::Invalid("dso"));
                }
                Record::Dso(Dso {
                    id,
                    path,
                    build_id: (!build_id.is_empty()).then(|| build_id.to_vec()),
                })
            }
            T_STACK => {
                let id = self.u32("stack")?;
                let n = self.len("stack", MAX_STACK_FRAMES)?;
                let mut frames = Vec::with_capacity(n);
                for _ in 0..n {
                    frames.push(self.frame()?);
                }
                Record::Stack(Stack { id, frames })
            }
            T_SYMBOL => {
                let frame = self.frame()?;
                let n = self.len("symbol", MAX_INLINED)?;
                let mut frames = Vec::with_capacity(n);
                for _ in 0..n {
                    let function = self.str()?;
                    let file = self.str()?;
                    frames.push(SymFrame {
                        function,
                        file: (!file.is_empty()).then_some(file),
                        line: self.u32("symbol")?,
                    });
                }
                Record::Symbol(Symbol { frame, frames })
            }
            T_LOST => Record::Lost(Lost {
                what: self.str()?,
                count: self.u()?,
            }),
            T_NOTE => Record::Note(self.str()?),
            T_GO_WAIT => {
                let time = self.time()?;
                let wake = match self.u()? {
                    0 => 0,
                    d => time.saturating_add(d - 1),
                };
                let end = time.saturating_add(self.u()?);
                Record::GoWait(GoWait {
                    time,
                    wake,
                    end,
                    pid: self.u32("goroutine wait")?,
                    tid: self.u32("goroutine wait")?,
                    goid: self.u()?,
                    reason: self.str()?,
                    weight: self.u32("goroutine wait")?,
                    sched_weight: self.u32("goroutine wait")?,
                    waker_goid: self.u()?,
                    waker_tid: self.u32("goroutine wait")?,
                    stack: self.u32("goroutine wait")?,
                    waited_on: Some(self.str()?).filter(|s| !s.is_empty()),
                })
            }
            T_IRQ_NAME => Record::IrqName {
                irq: self.u32("irq name")?,
                name: self.str()?,
            },
            T_FINISH => Record::Finish(Finish {
                time: self.time()?,
                exit_code: match self.u()? {
                    0 => None,
                    _ => Some(self.i()? as i32),
                },
            }),
            T_SYSCALL => {
                let time = self.time()?;
                let end = time.saturating_add(self.u()?);
                let pid = self.u32("syscall")?;
                let tid = self.u32("syscall")?;
                let nr = self.u32("syscall")?;
                let mut blocked = [0u64; 4];
                for b in &mut blocked {
                    *b = self.u()?;
                }
                Record::Syscall(Syscall {
                    time,
                    end,
                    pid,
                    tid,
                    nr,
                    blocked,
                    sleeps: self.u32("syscall")?,
                    min_flt: self.u32("syscall")?,
                    maj_flt: self.u32("syscall")?,
                    waker: self.waker()?,
                    stack: self.u32("syscall")?,
                    sampled: self.u()? != 0,
                })
            }
            T_SYSCALL_TOTALS => {
                let pid = self.u32("syscall totals")?;
                let nr = self.u32("syscall totals")?;
                let count = self.u()?;
                let total_ns = self.u()?;
                let mut blocked = [0u64; 4];
                for b in &mut blocked {
                    *b = self.u()?;
                }
                let min_flt = self.u()?;
                let maj_flt = self.u()?;
                let n = self.len("syscall totals", 64)?;
                let mut hist = Vec::with_capacity(n);
                for _ in 0..n {
                    hist.push(self.u()?);
                }
                Record::SyscallTotals(SyscallTotals {
                    pid,
                    nr,
                    count,
                    total_ns,
                    blocked,
                    min_flt,
                    maj_flt,
                    hist,
                })
            }
            T_SYSCALL_CONFIG => Record::SyscallConfig(SyscallConfig {
                keep_ns: self.u()?,
                sample_every: self.u32("syscall config")?,
            }),
            t => return Err(DecodeError::Tag(t)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// A stack record of `n` frames of the unknown file, as bytes.
    fn stack_of(n: u64) -> Vec<u8> {
        let mut b = vec![T_STACK];
        varint(1, &mut b);
        varint(n, &mut b);
        for _ in 0..n {
            b.extend_from_slice(&[0, 1]);
        }
        b
    }

    #[test]
    fn a_stack_deeper_than_the_cap_is_an_error_not_an_allocation() {
        let ok = stack_of(MAX_STACK_FRAMES as u64);
        assert!(
            matches!(Decoder::new(&ok).record(), Ok(Record::Stack(s)) if s.frames.len() == MAX_STACK_FRAMES)
        );
        let deep = stack_of(MAX_STACK_FRAMES as u64 + 1);
        assert_eq!(
            Decoder::new(&deep).record(),
            Err(DecodeError::Invalid("stack"))
        );
        // What the issue found: a few bytes claiming ~128 M frames.
        let mut claim = vec![T_STACK, 1];
        varint(128 << 20, &mut claim);
        claim.extend_from_slice(&[0, 1, 0, 1]);
        assert_eq!(
            Decoder::new(&claim).record(),
            Err(DecodeError::Invalid("stack"))
        );
    }

    #[test]
    fn strings_inlined_chains_and_build_ids_are_capped() {
        let mut long = vec![T_COMM, 0, 1, 1];
        varint(MAX_STRING as u64 + 1, &mut long);
        long.resize(long.len() + MAX_STRING + 1, b'x');
        assert_eq!(
            Decoder::new(&long).record(),
            Err(DecodeError::Invalid("string length"))
        );
        let mut sym = vec![T_SYMBOL, 0, 1];
        varint(MAX_INLINED as u64 + 1, &mut sym);
        for _ in 0..=MAX_INLINED {
            sym.extend_from_slice(&[1, b'f', 0, 0]);
        }
        assert_eq!(
            Decoder::new(&sym).record(),
            Err(DecodeError::Invalid("symbol"))
        );
        let mut dso = vec![T_DSO, 1, 0];
        varint(MAX_BUILD_ID as u64 + 1, &mut dso);
        dso.resize(dso.len() + MAX_BUILD_ID + 1, 7);
        assert_eq!(
            Decoder::new(&dso).record(),
            Err(DecodeError::Invalid("dso"))
        );
    }

    /// The writer never writes what a reader refuses: what is beyond the
    /// caps is cut, and the rest reads back.
    #[test]
    fn the_writer_cuts_records_to_what_a_reader_accepts() {
        let frame = |addr| Frame { dso: 1, addr };
        let records = [
            Record::Stack(Stack {
                id: 1,
                frames: (0..MAX_STACK_FRAMES as u64 + 10).map(frame).collect(),
            }),
            Record::Symbol(Symbol {
                frame: frame(1),
                frames: (0..MAX_INLINED + 3)
                    .map(|i| SymFrame {
                        function: format!("f{i}"),
                        file: None,
                        line: 0,
                    })
                    .collect(),
            }),
            Record::Comm {
                time: 1,
                pid: 1,
                tid: 1,
                // A multi-byte character across the cut.
                comm: format!("a{}", "é".repeat(MAX_STRING)),
            },
            Record::Dso(Dso {
                id: 2,
                path: "/x".into(),
                build_id: Some(vec![1; MAX_BUILD_ID + 1]),
            }),
        ];
        let mut enc = Encoder::new();
        for r in &records {
            enc.record(r);
        }
        let mut dec = Decoder::new(&enc.buf);
        match dec.record().unwrap() {
            Record::Stack(s) => {
                assert_eq!(s.frames.len(), MAX_STACK_FRAMES);
                assert_eq!(s.frames[0], frame(0), "the leaf is kept");
            }
            r => panic!("{r:?}"),
        }
        match dec.record().unwrap() {
            Record::Symbol(s) => {
                assert_eq!(s.frames.len(), MAX_INLINED);
                let last = format!("f{}", MAX_INLINED + 2);
                assert_eq!(
                    s.frames.last().unwrap().function,
                    last,
                    "the outer function is kept"
                );
            }
            r => panic!("{r:?}"),
        }
        match dec.record().unwrap() {
            Record::Comm { comm, .. } => {
                assert!(comm.len() <= MAX_STRING && comm.len() > MAX_STRING - 2);
                assert!(!comm.contains('\u{fffd}'), "cut inside a character");
            }
            r => panic!("{r:?}"),
        }
        match dec.record().unwrap() {
            Record::Dso(d) => assert_eq!(d.build_id, None),
            r => panic!("{r:?}"),
        }
        assert!(dec.is_empty());
    }
}
