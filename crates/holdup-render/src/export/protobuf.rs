//! A small protobuf encoder for the flat messages of the exporters (pprof's
//! profile.proto, Perfetto's trace packets).

/// A protobuf message being written.
#[derive(Default)]
pub struct Msg(pub Vec<u8>);

impl Msg {
    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    pub fn key(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }
    /// An integer field; zero is the default and is left out.
    pub fn int(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.key(field, 0);
            self.varint(v);
        }
    }
    /// A `fixed64` field, written even when zero.
    pub fn fixed64(&mut self, field: u32, v: u64) {
        self.key(field, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    pub fn msg(&mut self, field: u32, m: Msg) {
        self.bytes(field, &m.0);
    }
    pub fn packed(&mut self, field: u32, vs: impl IntoIterator<Item = u64>) {
        let mut p = Msg::default();
        for v in vs {
            p.varint(v);
        }
        self.bytes(field, &p.0);
    }
}
