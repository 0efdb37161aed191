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
                    && t.nr.is_none_or(|nr| nr == s.nr)
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
        w.write(&Record::Note(format!(
            "flight recorder: the trace holds the last {:.1} s of a longer recording",
            self.keep_ns as f64 / 1e9
        )))?;
        if self.dropped_for_bytes > 0 {
            w.write(&Record::Note(format!(
                "flight recorder: {} events inside the window were dropped to stay within its memory bound (--flight-mb)",
                self.dropped_for_bytes
            )))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Class, Sample, Waker};
    use crate::{Reader, Trace};

    const S: u64 = 1_000_000_000;

    fn sample(end: u64) -> Record {
        Record::Sample(Sample {
            time: end - S / 2,
            wake: 0,
            end,
            pid: 7,
            tid: 7,
            cpu: 0,
            class: Class::Other,
            weight: 500,
            sched_weight: 0,
            waker: Waker::None,
            stack: 0,
            late_user_stack: false,
            waker_stack: 0,
        })
    }

    /// A recording of `secs` seconds from 100 s, one blocked sample ending
    /// each second and one chunk each, through a buffer keeping `keep`
    /// seconds within `max_bytes`: the trace it writes.
    fn flown(secs: u64, keep: u64, max_bytes: usize) -> Trace {
        let header = Header {
            period_ns: 1_000_000,
            start_ns: 100 * S,
            ..Default::default()
        };
        let buf = FlightBuffer::new(keep * S, max_bytes, None);
        let mut w = Writer::new(buf, &header, 0).unwrap();
        w.write(&Record::Comm {
            time: 100 * S,
            pid: 7,
            tid: 7,
            comm: "app".into(),
        })
        .unwrap();
        for i in 1..=secs {
            w.write(&sample((100 + i) * S)).unwrap();
            w.flush_chunk().unwrap();
        }
        let bytes = w
            .finish()
            .unwrap()
            .write_trace(Vec::new(), &header, 0)
            .unwrap();
        Trace::read(&mut Reader::new(&bytes[..], "flight").unwrap()).unwrap()
    }

    #[test]
    fn only_the_last_seconds_of_events_are_written_with_every_name() {
        let t = flown(20, 3, 1 << 20);
        let ends: Vec<u64> = t.samples.iter().map(|s| s.end / S).collect();
        assert_eq!(ends, [117, 118, 119, 120]);
        assert_eq!(t.header.start_ns, 117 * S);
        assert_eq!(t.threads.values().next().unwrap().comm, "app");
        assert!(t.notes[0].contains("last 3.0 s"), "{:?}", t.notes);
    }

    #[test]
    fn the_byte_bound_drops_the_oldest_and_says_so() {
        // Room for about two chunks of one sample.
        let t = flown(20, 10, 60);
        assert!(t.samples.len() < 4, "{}", t.samples.len());
        assert_eq!(t.samples.last().unwrap().end, 120 * S);
        assert!(
            t.notes.iter().any(|n| n.contains("dropped to stay within")),
            "{:?}",
            t.notes
        );
    }

    #[test]
    fn a_slow_system_call_is_the_trigger() {
        let header = Header::default();
        let trigger = SyscallTrigger {
            nr: Some(7),
            min_ns: 40_000_000,
        };
        let mut w = Writer::new(FlightBuffer::new(S, 1 << 20, Some(trigger)), &header, 0).unwrap();
        let call = |nr, ms: u64| {
            Record::Syscall(crate::record::Syscall {
                time: S,
                end: S + ms * 1_000_000,
                pid: 1,
                tid: 2,
                nr,
                blocked: [0; 4],
                sleeps: 0,
                min_flt: 0,
                maj_flt: 0,
                waker: Waker::None,
                stack: 0,
                sampled: false,
            })
        };
        for (nr, ms) in [(7, 39), (8, 90)] {
            w.write(&call(nr, ms)).unwrap();
        }
        w.flush_chunk().unwrap();
        assert_eq!(w.get_ref().trigger(), None);
        w.write(&call(7, 41)).unwrap();
        w.flush_chunk().unwrap();
        assert_eq!(w.get_ref().trigger(), Some((1, 2, 7, 41_000_000)));
    }
}
