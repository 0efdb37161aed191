//! The flight recorder's memory: a [`Writer`](crate::Writer) writes into it
//! as into a file, and it keeps what describes the recording (processes,
//! mappings, stacks, symbols, notes, lost counts) whole, but of the events
//! (samples, wait segments, block requests, system calls) only the last
//! seconds, within a byte bound. [`FlightBuffer::write_trace`] then makes a
//! complete trace of what it holds; [`FlightBuffer::trigger`] says when an
//! event asked for that (a system call slower than a threshold).

use crate::codec::{Decoder, Encoder};
use crate::file::{Header, Writer};
use crate::record::Record;
use std::collections::VecDeque;
use std::io::{self, Write};

/// Which system calls end the flight: number (None: any) and the least
/// wall time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallTrigger {
    pub nr: Option<u32>,
    pub min_ns: u64,
}

/// The events of one chunk, encoded, with their time span.
struct Events {
    newest: u64,
    records: u64,
    payload: Vec<u8>,
}

pub struct FlightBuffer {
    keep_ns: u64,
    max_bytes: usize,
    trigger: Option<SyscallTrigger>,
    /// Bytes written and not yet a whole header or chunk.
    pending: Vec<u8>,
    header_done: bool,
    lasting: Vec<Record>,
    events: VecDeque<Events>,
    event_bytes: usize,
    newest: u64,
    /// Events dropped for the byte bound while younger than `keep_ns`.
    dropped_for_bytes: u64,
    /// The first event that asked for the trace: (pid, tid, nr, wall ns).
    triggered: Option<(u32, u32, u32, u64)>,
}

const CHUNK_HEADER: usize = 12;

/// Whether a record is an event the flight keeps only while recent.
fn is_event(r: &Record) -> bool {
    matches!(
        r,
        Record::Sample(_)
            | Record::Segment(_)
            | Record::BioIssue(_)
            | Record::BioDone(_)
            | Record::Syscall(_)
    )
}

/// The time an event is judged recent by: when it ended.
fn event_end(r: &Record) -> u64 {
    match r {
        Record::Sample(s) => s.end.max(s.time),
        Record::Segment(s) => s.end,
        Record::Syscall(s) => s.end,
        other => other.time().unwrap_or(0),
    }
}

impl FlightBuffer {
    /// Keep `keep_ns` of events, at most `max_bytes` of them encoded.
    pub fn new(keep_ns: u64, max_bytes: usize, trigger: Option<SyscallTrigger>) -> Self {
        Self {
            keep_ns,
            max_bytes,
            trigger,
            pending: Vec::new(),
            header_done: false,
            lasting: Vec::new(),
            events: VecDeque::new(),
            event_bytes: 0,
            newest: 0,
            dropped_for_bytes: 0,
            triggered: None,
        }
    }

    /// The system call that asked for the trace, if one did: (pid, tid,
    /// number, wall ns).
    pub fn trigger(&self) -> Option<(u32, u32, u32, u64)> {
        self.triggered
    }

    /// Events dropped for the byte bound before they were `keep_ns` old.
    pub fn dropped_for_bytes(&self) -> u64 {
        self.dropped_for_bytes
    }

    /// Take the whole headers and chunks written so far.
    fn take_units(&mut self) -> io::Result<()> {
        loop {
            if !self.header_done {
                // magic, major, minor, features, JSON length, JSON, CRC.
                let Some(len) = self.pending.get(16..20) else {
                    return Ok(());
                };
                let whole = 20 + u32::from_le_bytes(len.try_into().unwrap()) as usize + 4;
                if self.pending.len() < whole {
                    return Ok(());
                }
                self.pending.drain(..whole);
                self.header_done = true;
                continue;
            }
            let Some(len) = self.pending.get(4..8) else {
                return Ok(());
            };
            let whole = CHUNK_HEADER + u32::from_le_bytes(len.try_into().unwrap()) as usize;
            if self.pending.len() < whole {
                return Ok(());
            }
            let chunk: Vec<u8> = self.pending.drain(..whole).collect();
            self.take_chunk(&chunk[CHUNK_HEADER..])?;
        }
    }

    fn take_chunk(&mut self, payload: &[u8]) -> io::Result<()> {
        let mut dec = Decoder::new(payload);
        let mut enc = Encoder::new();
        let (mut records, mut newest) = (0, 0);
        while !dec.is_empty() {
            let r = dec
                .record()
                .map_err(|e| io::Error::other(format!("flight recorder: {e:?}")))?;
            if !is_event(&r) {
                self.lasting.push(r);
                continue;
            }
            if let (Some(t), Record::Syscall(s)) = (self.trigger, &r) {
                if self.triggered.is_none()
                    && t.nr.map_or(true, |nr| nr == s.nr)
                    && s.wall_ns() >= t.min_ns
                {
                    self.triggered = Some((s.pid, s.tid, s.nr, s.wall_ns()));
                }
            }
            newest = newest.max(event_end(&r));
            enc.record(&r);
            records += 1;
        }
        if records == 0 {
            return Ok(());
        }
        self.newest = self.newest.max(newest);
        self.event_bytes += enc.buf.len();
        self.events.push_back(Events {
            newest,
            records,
            payload: enc.buf,
        });
        self.forget_old();
        Ok(())
    }

    /// Drop the chunks of events that ended before the window, then the
    /// oldest while over the byte bound (never the newest).
    fn forget_old(&mut self) {
        let cutoff = self.newest.saturating_sub(self.keep_ns);
        while let Some(front) = self.events.front() {
            let old = front.newest < cutoff;
            if !old && (self.event_bytes <= self.max_bytes || self.events.len() == 1) {
                break;
            }
            if !old {
                self.dropped_for_bytes += front.records;
            }
            self.event_bytes -= front.payload.len();
            self.events.pop_front();
        }
    }

    /// Write the trace of what is held to `out`: `header` with its start
    /// moved to the window's (the events before it are left out), the
    /// records that describe the recording, the events, then the end.
    pub fn write_trace<W: Write>(
        mut self,
        out: W,
        header: &Header,
        features: u32,
    ) -> io::Result<W> {
        self.take_units()?;
        let cutoff = self
            .newest
            .saturating_sub(self.keep_ns)
            .max(header.start_ns);
        let mut h = header.clone();
        h.start_unix_ns += cutoff - header.start_ns;
        h.start_ns = cutoff;
        let mut w = Writer::new(out, &h, features)?;
        let (finish, lasting): (Vec<Record>, Vec<Record>) = self
            .lasting
            .into_iter()
            .partition(|r| matches!(r, Record::Finish(_)));
        for r in &lasting {
            w.write(r)?;
        }
        for chunk in &self.events {
            let mut dec = Decoder::new(&chunk.payload);
            while !dec.is_empty() {
                let r = dec
                    .record()
                    .map_err(|e| io::Error::other(format!("flight recorder: {e:?}")))?;
                if event_end(&r) >= cutoff {
                    w.write(&r)?;
                }
            }
        }
        for r in &finish {
            w.write(r)?;
        }
        w.finish()
    }
}

impl Write for FlightBuffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        self.take_units()?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
