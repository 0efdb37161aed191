//! The mutator. Inputs are derived from (seed, index) alone, so any input a
//! run reports can be made again with `--replay`.
//!
//! Half of the mutations go inside a chunk's payload (or the header's JSON)
//! and then fix the lengths and checksums, so that they reach the record
//! decoder and the analyses instead of stopping at a checksum mismatch; the
//! others damage the raw file, framing included.

use holdup_trace::file::MAGIC;

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
        out.extend_from_slice(&0x4b4e_4843u32.to_le_bytes());
        out.extend_from_slice(&(c.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(c).to_le_bytes());
        out.extend_from_slice(c);
    }
    out.extend_from_slice(&p.tail);
    out
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
                    0 => mutate_bytes(&mut rng, &mut parts.json, other),
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
        for seed in crate::seeds::seeds() {
            if let Some(p) = split(&seed) {
                assert_eq!(join(&p), seed);
                assert!(!p.chunks.is_empty());
            }
        }
    }
}
