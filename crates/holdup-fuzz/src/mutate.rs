//! The mutator of the stable fuzzer. Inputs are derived from (seed, index)
//! alone, so any input a run reports can be made again with `--replay`.
//!
//! Bytes are mutated everywhere, and with knowledge of the formats: half
//! of the mutations of a trace go inside one chunk's payload (or the
//! header's JSON) or drop, repeat or swap whole chunks, keeping the framing
//! intact; half of those of a latency file change one value of its JSON
//! body (a number, a list, a name). The targets make checksums right
//! themselves (see [`with_trace_checksums`]), so mutations reach the
//! decoders and the analyses instead of stopping at a checksum mismatch.

use holdup_trace::file::MAGIC;
use serde_json::Value;
use std::borrow::Cow;

/// splitmix64: small, fast, and good enough to pick mutations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, index: u64) -> Self {
        Rng(seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// Values that find edge cases in varints, lengths, ids and times.
const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0xffff_ffff,
    0x1_0000_0000,
    u64::MAX / 2,
    u64::MAX - 1,
    u64::MAX,
];

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// One byte-level mutation of `b`; `other` is another corpus entry to
/// splice from.
fn mutate_bytes(rng: &mut Rng, b: &mut Vec<u8>, other: &[u8]) {
    let len = b.len();
    match rng.below(9) {
        0 if len > 0 => {
            let i = rng.below(len);
            b[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            b[i] = [0, 0xff, 0x7f, 0x80, 1][rng.below(5)];
        }
        2 if len > 0 => {
            let i = rng.below(len);
            b[i] = rng.next_u64() as u8;
        }
        3 => b.truncate(rng.below(len + 1)),
        4 if len > 0 => {
            // Delete a range.
            let i = rng.below(len);
            let n = 1 + rng.below((len - i).min(64));
            b.drain(i..i + n);
        }
        5 => {
            // Insert a varint of an interesting value (a length, id, time).
            let mut v = Vec::new();
            let x = INTERESTING[rng.below(INTERESTING.len())];
            varint(x.wrapping_add(rng.below(3) as u64), &mut v);
            let i = rng.below(len + 1);
            b.splice(i..i, v);
        }
        6 if len >= 4 => {
            // Overwrite 4 bytes with an interesting little-endian u32.
            let i = rng.below(len - 3);
            let x = INTERESTING[rng.below(INTERESTING.len())] as u32;
            b[i..i + 4].copy_from_slice(&x.to_le_bytes());
        }
        7 if !other.is_empty() => {
            // Splice in a piece of another input.
            let i = rng.below(other.len());
            let n = 1 + rng.below((other.len() - i).min(256));
            let at = rng.below(len + 1);
            b.splice(at..at, other[i..i + n].iter().copied());
        }
        _ if len > 0 => {
            // Duplicate a range (repeated records, stacks, ids).
            let i = rng.below(len);
            let n = 1 + rng.below((len - i).min(64));
            let piece: Vec<u8> = b[i..i + n].to_vec();
            let at = rng.below(len + 1);
            b.splice(at..at, piece);
        }
        _ => b.push(rng.next_u64() as u8),
    }
}

/// A trace split into its parts: fixed header, JSON, chunk payloads (and
/// whatever follows the last well-formed chunk).
struct Parts {
    fixed: Vec<u8>,
    json: Vec<u8>,
    chunks: Vec<Vec<u8>>,
    tail: Vec<u8>,
}

fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?))
}

fn split(b: &[u8]) -> Option<Parts> {
    if !b.starts_with(MAGIC) {
        return None;
    }
    let len = u32_at(b, 16)? as usize;
    let json = b.get(20..20 + len)?.to_vec();
    let mut pos = 20 + len + 4;
    let mut chunks = Vec::new();
    while let (Some(_), Some(n)) = (u32_at(b, pos), u32_at(b, pos + 4)) {
        let Some(payload) = b.get(pos + 12..pos + 12 + n as usize) else {
            break;
        };
        chunks.push(payload.to_vec());
        pos += 12 + n as usize;
    }
    Some(Parts {
        fixed: b[..16].to_vec(),
        json,
        chunks,
        tail: b.get(pos..).unwrap_or_default().to_vec(),
    })
}

fn join(p: &Parts) -> Vec<u8> {
    let mut out = p.fixed.clone();
    out.extend_from_slice(&(p.json.len() as u32).to_le_bytes());
    out.extend_from_slice(&p.json);
    out.extend_from_slice(&crc32fast::hash(&p.json).to_le_bytes());
    for c in &p.chunks {
        out.extend_from_slice(&CHUNK_MAGIC.to_le_bytes());
        out.extend_from_slice(&(c.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(c).to_le_bytes());
        out.extend_from_slice(c);
    }
    out.extend_from_slice(&p.tail);
    out
}

const CHUNK_MAGIC: u32 = 0x4b4e_4843;

/// `b` with the checksums of its trace header and of every complete chunk
/// made right (nothing else changed), if it is a trace.
pub fn with_trace_checksums(b: &[u8]) -> Cow<'_, [u8]> {
    let Some(len) = u32_at(b, 16).filter(|_| b.starts_with(MAGIC)) else {
        return Cow::Borrowed(b);
    };
    let mut out = b.to_vec();
    let json_end = 20 + len as usize;
    let Some(json) = b.get(20..json_end) else {
        return Cow::Owned(out);
    };
    if let Some(crc) = out.get_mut(json_end..json_end + 4) {
        crc.copy_from_slice(&crc32fast::hash(json).to_le_bytes());
    }
    let mut pos = json_end + 4;
    while let (Some(CHUNK_MAGIC), Some(n)) = (u32_at(b, pos), u32_at(b, pos + 4)) {
        let start = pos + 12;
        let Some(payload) = b.get(start..start + n as usize) else {
            break;
        };
        out[pos + 8..start].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
        pos = start + n as usize;
    }
    Cow::Owned(out)
}

/// The fixed part of a latency file: magic, version, body length, CRC.
const LATENCY_HEADER: usize = 24;

/// `b` with the body length and checksum of a latency file made right (the
/// body being the rest of `b`), if it is one.
pub fn with_latency_checksum(b: &[u8]) -> Cow<'_, [u8]> {
    if b.len() < LATENCY_HEADER || !b.starts_with(holdup_trace::latency::MAGIC) {
        return Cow::Borrowed(b);
    }
    let mut out = b.to_vec();
    let body = &b[LATENCY_HEADER..];
    out[12..20].copy_from_slice(&(body.len() as u64).to_le_bytes());
    out[20..24].copy_from_slice(&crc32fast::hash(body).to_le_bytes());
    Cow::Owned(out)
}

/// Names a latency file or a trace header uses, to put in place of others.
const NAMES: &[&str] = &[
    "",
    "func:handle",
    "syscall:read",
    "kfunc:vfs_read",
    "block:vda",
    "lock",
    "iowait",
    "futex_wait",
    "preempted",
    "irq:timer",
    "softirq:net_rx",
];

/// Values in `v`, itself included.
fn count_values(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(count_values).sum(),
        Value::Object(o) => o.values().map(count_values).sum(),
        _ => 0,
    }
}

/// Value number `n` of `v` in a depth-first walk (`v` itself is 0). The
/// JSON parser refuses documents nested more than 128 deep, so the
/// recursion is bounded.
fn nth_value<'a>(v: &'a mut Value, n: &mut usize) -> Option<&'a mut Value> {
    if *n == 0 {
        return Some(v);
    }
    *n -= 1;
    let children: Box<dyn Iterator<Item = &'a mut Value>> = match v {
        Value::Array(a) => Box::new(a.iter_mut()),
        Value::Object(o) => Box::new(o.values_mut()),
        _ => return None,
    };
    for c in children {
        if let Some(found) = nth_value(c, n) {
            return Some(found);
        }
    }
    None
}

/// `json` with one value changed, added or taken out: None if it is not
/// JSON. Any value of the document may be picked.
fn mutate_json(rng: &mut Rng, json: &[u8]) -> Option<Vec<u8>> {
    let mut doc: Value = serde_json::from_slice(json).ok()?;
    let mut n = rng.below(count_values(&doc));
    let value = nth_value(&mut doc, &mut n)?;
    match value {
        Value::Array(a) if !a.is_empty() => {
            let k = rng.below(a.len());
            match rng.below(3) {
                0 => {
                    a.remove(k);
                }
                1 => a.insert(k, a[k].clone()),
                _ => {
                    let j = rng.below(a.len());
                    a.swap(k, j)
                }
            }
        }
        // Most fields must be there: a field taken out mostly makes a
        // file that does not parse.
        Value::Object(o) if !o.is_empty() && rng.below(4) == 0 => {
            let key = o.keys().nth(rng.below(o.len()))?.clone();
            o.remove(&key);
        }
        Value::Array(_) | Value::Object(_) => {}
        Value::String(s) => *s = NAMES[rng.below(NAMES.len())].to_string(),
        Value::Number(_) | Value::Bool(_) | Value::Null => {
            let x = INTERESTING[rng.below(INTERESTING.len())];
            *value = match rng.below(8) {
                0 => Value::Null,
                1 => Value::from(-1),
                2..=4 => Value::from(rng.below(70) as u64),
                _ => Value::from(x.wrapping_add(rng.below(3) as u64)),
            };
        }
    }
    serde_json::to_vec(&doc).ok()
}

fn is_latency_file(b: &[u8]) -> bool {
    b.len() >= LATENCY_HEADER && b.starts_with(holdup_trace::latency::MAGIC)
}

/// One mutation of a latency file's body: of one JSON value while it is
/// JSON, else of its bytes.
fn mutate_latency(rng: &mut Rng, b: &mut Vec<u8>, other: &[u8]) {
    let mut body = b.split_off(LATENCY_HEADER);
    match mutate_json(rng, &body) {
        Some(json) if rng.below(8) != 0 => body = json,
        _ => mutate_bytes(rng, &mut body, other),
    }
    b.extend_from_slice(&body);
}

/// Input number `index` of a run with `seed`.
pub fn input(seed: u64, index: u64, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut rng = Rng::new(seed, index);
    let mut b = corpus[rng.below(corpus.len())].clone();
    let other = &corpus[rng.below(corpus.len())];
    let rounds = 1 + rng.below(4) + if rng.below(4) == 0 { 8 } else { 0 };
    for _ in 0..rounds {
        match split(&b) {
            Some(mut parts) if rng.below(2) == 0 => {
                let n = parts.chunks.len();
                match rng.below(n + 3) {
                    // The header JSON (rarely: it is mostly strings).
                    0 => match mutate_json(&mut rng, &parts.json) {
                        Some(json) if rng.below(2) == 0 => parts.json = json,
                        _ => mutate_bytes(&mut rng, &mut parts.json, other),
                    },
                    // Drop, duplicate or swap whole chunks.
                    1 if n > 0 => {
                        let i = rng.below(n);
                        match rng.below(3) {
                            0 => {
                                parts.chunks.remove(i);
                            }
                            1 => parts.chunks.insert(i, parts.chunks[i].clone()),
                            _ => parts.chunks.swap(i, rng.below(n)),
                        }
                    }
                    _ if n > 0 => {
                        let i = rng.below(n);
                        mutate_bytes(&mut rng, &mut parts.chunks[i], other);
                    }
                    _ => mutate_bytes(&mut rng, &mut parts.tail, other),
                }
                b = join(&parts);
            }
            None if is_latency_file(&b) && rng.below(8) != 0 => {
                mutate_latency(&mut rng, &mut b, other)
            }
            _ => mutate_bytes(&mut rng, &mut b, other),
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_join_are_inverse_on_a_real_trace() {
        for seed in crate::seeds::traces() {
            let p = split(&seed).unwrap();
            assert_eq!(join(&p), seed);
            assert!(!p.chunks.is_empty());
        }
    }

    #[test]
    fn checksums_are_made_right_and_nothing_else_changes() {
        for seed in crate::seeds::traces() {
            assert_eq!(with_trace_checksums(&seed), seed);
            let mut bad = seed.clone();
            let last = bad.len() - 1;
            bad[last] ^= 1;
            let fixed = with_trace_checksums(&bad);
            assert_ne!(fixed, seed);
            let mut r = holdup_trace::Reader::new(&fixed[..], "t").unwrap();
            r.for_each(|_| {}).unwrap();
            assert_eq!(r.damage(), None, "the last chunk's checksum was not fixed");
        }
        for seed in crate::seeds::latency_files() {
            assert_eq!(with_latency_checksum(&seed), seed);
            let mut longer = seed.clone();
            longer.push(b' ');
            let fixed = with_latency_checksum(&longer);
            assert!(holdup_trace::latency::parse_latency(&fixed, "t").is_ok());
        }
    }

    #[test]
    fn json_mutations_change_one_value_and_stay_json() {
        let json = br#"{"a":[1,2,{"b":"x"}],"c":7}"#;
        let mut changed = 0;
        for i in 0..200 {
            let mut rng = Rng::new(3, i);
            let out = mutate_json(&mut rng, json).unwrap();
            let v: Value = serde_json::from_slice(&out).unwrap();
            changed += usize::from(out != json);
            assert!(v.is_object() || v.is_null() || v.is_number() || v.is_array() || v.is_string());
        }
        assert!(changed > 150, "{changed} of 200 changed");
    }
}
