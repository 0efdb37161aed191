//! The file: a header, then self-describing chunks written as the recording
//! goes.
//!
//! ```text
//! magic "HOLDUPTR" | u16 major | u16 minor | u32 features | u32 len | header JSON | u32 crc32(JSON)
//! chunk*: u32 CHUNK_MAGIC | u32 payload len | u32 crc32(payload) | payload (encoded records)
//! ```
//! All integers little-endian. A reader keeps every complete chunk of a file
//! cut at any byte (a recorder killed with SIGKILL) and stops at the first
//! damaged one.

use crate::codec::{DecodeError, Decoder, Encoder};
use crate::record::Record;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::Path;

pub const MAGIC: &[u8; 8] = b"HOLDUPTR";
pub const MAJOR: u16 = 1;
pub const MINOR: u16 = 0;
const CHUNK_MAGIC: u32 = 0x4b4e_4843; // "CHNK"
/// A chunk larger than this is corrupt (the writer never makes one).
const MAX_CHUNK: u32 = 256 << 20;
/// Records are flushed into a chunk once this many bytes are buffered.
pub const CHUNK_TARGET: usize = 1 << 20;

/// Feature bits: what the recording contains.
pub mod features {
    pub const SEGMENTS: u32 = 1 << 0;
    pub const BLOCK_IO: u32 = 1 << 1;
}

/// What a recording was, in a form that can grow: unknown fields are kept
/// out of older readers' way by serde defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Header {
    pub holdup_version: String,
    /// Sampling period shared by on-CPU and blocked samples.
    pub period_ns: u64,
    /// CLOCK_MONOTONIC at the start of the recording; all times use it.
    pub start_ns: u64,
    /// Wall-clock time at the start, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    pub hostname: String,
    pub kernel: String,
    pub ncpus: u32,
    /// The launched command, empty with -p / -a.
    pub command: Vec<String>,
    /// "command", "pid", or "all".
    pub target: String,
    pub pids: Vec<u32>,
    /// Bytes of user stack copied per sample for unwinding.
    pub stack_copy_bytes: u32,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{path}: not a holdup trace (bad magic)")]
    NotATrace { path: String },
    #[error("{path}: trace format version {major}.{minor} is newer than this holdup understands ({MAJOR}.x); upgrade holdup")]
    Version {
        path: String,
        major: u16,
        minor: u16,
    },
    #[error("{path}: trace header is truncated or damaged")]
    Header { path: String },
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
}

/// Writes records into chunks. Every chunk is written with one `write` call
/// as soon as it is full or [`Writer::flush_chunk`] is called, so a killed
/// recorder loses at most the records not yet flushed.
pub struct Writer<W: Write> {
    out: W,
    enc: Encoder,
    records_in_chunk: usize,
    bytes_written: u64,
    /// Records and encoded bytes per record kind: a handful of kinds,
    /// looked up at every record.
    stats: Vec<(&'static str, u64, u64)>,
}

/// The chunk header (magic, payload length, CRC) is written in place in
/// front of the payload, which is encoded right after room left for it:
/// the chunk goes out in one `write` without being copied.
const CHUNK_HEADER: usize = 12;

/// Empty `enc` for the next chunk, leaving room for its header.
fn start_chunk(enc: &mut Encoder) {
    enc.clear();
    enc.buf.resize(CHUNK_HEADER, 0);
}

impl Writer<File> {
    pub fn create(path: &Path, header: &Header, features: u32) -> io::Result<Self> {
        Writer::new(crate::output::create_private(path)?, header, features)
    }
}

impl<W: Write> Writer<W> {
    pub fn new(mut out: W, header: &Header, features: u32) -> io::Result<Self> {
        let json = serde_json::to_vec(header).map_err(io::Error::other)?;
        let mut head = Vec::with_capacity(24 + json.len());
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&MAJOR.to_le_bytes());
        head.extend_from_slice(&MINOR.to_le_bytes());
        head.extend_from_slice(&features.to_le_bytes());
        head.extend_from_slice(&(json.len() as u32).to_le_bytes());
        head.extend_from_slice(&json);
        head.extend_from_slice(&crc32fast::hash(&json).to_le_bytes());
        out.write_all(&head)?;
        let mut enc = Encoder::new();
        start_chunk(&mut enc);
        Ok(Self {
            out,
            enc,
            records_in_chunk: 0,
            bytes_written: head.len() as u64,
            stats: Vec::new(),
        })
    }

    pub fn write(&mut self, r: &Record) -> io::Result<()> {
        let before = self.enc.buf.len();
        self.enc.record(r);
        let bytes = (self.enc.buf.len() - before) as u64;
        let kind = r.kind();
        match self.stats.iter_mut().find(|(k, _, _)| *k == kind) {
            Some(slot) => {
                slot.1 += 1;
                slot.2 += bytes;
            }
            None => self.stats.push((kind, 1, bytes)),
        }
        self.records_in_chunk += 1;
        if self.enc.buf.len() - CHUNK_HEADER >= CHUNK_TARGET {
            self.flush_chunk()?;
        }
        Ok(())
    }

    /// Write out the records buffered so far as one chunk.
    pub fn flush_chunk(&mut self) -> io::Result<()> {
        if self.records_in_chunk == 0 {
            return Ok(());
        }
        let chunk = &mut self.enc.buf;
        let (head, payload) = chunk.split_at_mut(CHUNK_HEADER);
        head[..4].copy_from_slice(&CHUNK_MAGIC.to_le_bytes());
        head[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        head[8..].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
        self.out.write_all(chunk)?;
        self.out.flush()?;
        self.bytes_written += chunk.len() as u64;
        start_chunk(&mut self.enc);
        self.records_in_chunk = 0;
        Ok(())
    }

    /// (kind, records, encoded bytes) for every kind written so far.
    pub fn stats(&self) -> impl Iterator<Item = (&'static str, u64, u64)> + '_ {
        let mut v = self.stats.clone();
        v.sort_unstable_by_key(|&(k, _, _)| k);
        v.into_iter()
    }

    /// Where the chunks go.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// Bytes in the file so far (flushed chunks only).
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    pub fn finish(mut self) -> io::Result<W> {
        self.flush_chunk()?;
        Ok(self.out)
    }
}

/// Why reading stopped before the end of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Damage {
    /// The file ends inside a chunk: the recording was interrupted.
    Truncated { offset: u64 },
    /// A chunk fails its checksum or does not decode.
    Corrupt { offset: u64, why: String },
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Truncated { offset } => write!(
                f,
                "trace ends inside a chunk at byte {offset} (recording interrupted?); using the complete chunks before it"
            ),
            Damage::Corrupt { offset, why } => {
                write!(f, "trace is damaged at byte {offset} ({why}); using the chunks before it")
            }
        }
    }
}

/// Reads a trace chunk by chunk.
pub struct Reader<R: Read> {
    input: R,
    pub header: Header,
    pub features: u32,
    pub minor: u16,
    offset: u64,
    chunk: Vec<u8>,
    damage: Option<Damage>,
    chunks: u64,
}

impl Reader<BufReader<File>> {
    pub fn open(path: &Path) -> Result<Self, Error> {
        let io_err = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let file = File::open(path).map_err(io_err)?;
        Reader::new(
            BufReader::with_capacity(1 << 20, file),
            &path.display().to_string(),
        )
    }
}

fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Read up to `len` bytes into `buf` (cleared first). Memory grows with
/// the bytes actually there, not with a length field a damaged or hostile
/// file may claim.
fn read_up_to<R: Read>(r: &mut R, len: usize, buf: &mut Vec<u8>) -> io::Result<usize> {
    buf.clear();
    r.by_ref().take(len as u64).read_to_end(buf)
}

impl<R: Read> Reader<R> {
    /// `name` is used in error messages.
    pub fn new(mut input: R, name: &str) -> Result<Self, Error> {
        let path = name.to_string();
        let io_err = |source| Error::Io {
            path: path.clone(),
            source,
        };
        let mut fixed = [0u8; 20];
        let n = read_full(&mut input, &mut fixed).map_err(io_err)?;
        if n < 8 || &fixed[..8] != MAGIC {
            return Err(Error::NotATrace { path });
        }
        if n < 20 {
            return Err(Error::Header { path });
        }
        let major = u16::from_le_bytes([fixed[8], fixed[9]]);
        let minor = u16::from_le_bytes([fixed[10], fixed[11]]);
        if major != MAJOR {
            return Err(Error::Version { path, major, minor });
        }
        let features = u32::from_le_bytes(fixed[12..16].try_into().unwrap());
        let len = u32::from_le_bytes(fixed[16..20].try_into().unwrap()) as usize;
        if len > 16 << 20 {
            return Err(Error::Header { path });
        }
        let mut json = Vec::new();
        if read_up_to(&mut input, len + 4, &mut json).map_err(io_err)? < len + 4 {
            return Err(Error::Header { path });
        }
        let crc = u32::from_le_bytes(json[len..].try_into().unwrap());
        if crc32fast::hash(&json[..len]) != crc {
            return Err(Error::Header { path });
        }
        let header: Header = serde_json::from_slice(&json[..len])
            .map_err(|_| Error::Header { path: path.clone() })?;
        Ok(Self {
            input,
            header,
            features,
            minor,
            offset: 20 + json.len() as u64,
            chunk: Vec::new(),
            damage: None,
            chunks: 0,
        })
    }

    /// Why reading stopped early, if it did.
    pub fn damage(&self) -> Option<&Damage> {
        self.damage.as_ref()
    }

    /// Complete chunks read so far.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// Read the next chunk and hand its records to `f`. Returns false at
    /// the end of the file or at the first damaged chunk (see [`Self::damage`]).
    /// A chunk that does not decode entirely yields none of its records.
    pub fn next_chunk(&mut self, records: &mut Vec<Record>) -> io::Result<bool> {
        records.clear();
        if self.damage.is_some() {
            return Ok(false);
        }
        let start = self.offset;
        let mut head = [0u8; 12];
        let n = read_full(&mut self.input, &mut head)?;
        if n == 0 {
            return Ok(false);
        }
        let truncated = Damage::Truncated { offset: start };
        if n < 12 {
            self.damage = Some(truncated);
            return Ok(false);
        }
        let magic = u32::from_le_bytes(head[0..4].try_into().unwrap());
        let len = u32::from_le_bytes(head[4..8].try_into().unwrap());
        let crc = u32::from_le_bytes(head[8..12].try_into().unwrap());
        if magic != CHUNK_MAGIC || len > MAX_CHUNK {
            self.damage = Some(Damage::Corrupt {
                offset: start,
                why: "bad chunk header".into(),
            });
            return Ok(false);
        }
        if read_up_to(&mut self.input, len as usize, &mut self.chunk)? < len as usize {
            self.damage = Some(truncated);
            return Ok(false);
        }
        if crc32fast::hash(&self.chunk) != crc {
            self.damage = Some(Damage::Corrupt {
                offset: start,
                why: "checksum mismatch".into(),
            });
            return Ok(false);
        }
        let mut dec = Decoder::new(&self.chunk);
        while !dec.is_empty() {
            match dec.record() {
                Ok(r) => records.push(r),
                Err(e) => {
                    records.clear();
                    self.damage = Some(Damage::Corrupt {
                        offset: start,
                        why: decode_why(e),
                    });
                    return Ok(false);
                }
            }
        }
        self.offset += 12 + len as u64;
        self.chunks += 1;
        Ok(true)
    }

    /// Every record of every complete chunk, in file order.
    pub fn for_each(&mut self, mut f: impl FnMut(Record)) -> io::Result<()> {
        let mut batch = Vec::new();
        while self.next_chunk(&mut batch)? {
            for r in batch.drain(..) {
                f(r);
            }
        }
        Ok(())
    }
}

fn decode_why(e: DecodeError) -> String {
    e.to_string()
}
