//! profile.proto's wire format, enough to read what the exporters write:
//! the fields of a message in order, integers (packed or not), strings and
//! nested messages.

#[derive(Debug, Clone)]
pub enum Val {
    Int(u64),
    Bytes(Vec<u8>),
}

pub fn varint(b: &[u8], i: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = b[*i];
        *i += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return v;
        }
        shift += 7;
    }
}

/// The fields of one message, in order.
pub fn fields(b: &[u8]) -> Vec<(u32, Val)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i);
        let (field, wire) = ((key >> 3) as u32, key & 7);
        match wire {
            0 => out.push((field, Val::Int(varint(b, &mut i)))),
            1 => {
                let v = u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
                out.push((field, Val::Int(v)));
                i += 8;
            }
            2 => {
                let n = varint(b, &mut i) as usize;
                out.push((field, Val::Bytes(b[i..i + n].to_vec())));
                i += n;
            }
            w => panic!("unexpected wire type {w} for field {field}"),
        }
    }
    out
}

pub fn ints(fs: &[(u32, Val)], field: u32) -> Vec<u64> {
    let mut v = Vec::new();
    for (_, val) in fs.iter().filter(|(f, _)| *f == field) {
        match val {
            Val::Int(x) => v.push(*x),
            // Packed repeated.
            Val::Bytes(b) => {
                let mut i = 0;
                while i < b.len() {
                    v.push(varint(b, &mut i));
                }
            }
        }
    }
    v
}

pub fn int(fs: &[(u32, Val)], field: u32) -> u64 {
    ints(fs, field).first().copied().unwrap_or(0)
}

pub fn msgs(fs: &[(u32, Val)], field: u32) -> Vec<Vec<(u32, Val)>> {
    fs.iter()
        .filter(|(f, _)| *f == field)
        .map(|(_, v)| match v {
            Val::Bytes(b) => fields(b),
            Val::Int(_) => panic!("field {field} is not a message"),
        })
        .collect()
}
