//! pprof's profile.proto (github.com/google/pprof/proto/profile.proto),
//! gzipped, written with a small protobuf encoder: the message is flat and
//! a dozen fields do not warrant a code generator.
//!
//! Sample types: `wall` (on- and off-CPU, the default) and, per subclass,
//! `<class>_samples` (count) and `<class>` (nanoseconds). A location is one
//! frame; its inlined functions are its lines, innermost first. Blocked
//! stacks end in the subclass's pseudo frame (`[I] io wait`), as in
//! `holdup flame`. Labels: `thread`, `tid` (numeric), `subclass`,
//! `wait_reason`.

use super::{class_name, StackSample, CLASSES};
use holdup_analysis::folded::leaf_name;
use holdup_trace::{Class, Frame, Trace};
use std::collections::HashMap;
use std::rc::Rc;

/// Field numbers of profile.proto.
mod field {
    pub const SAMPLE_TYPE: u32 = 1;
    pub const SAMPLE: u32 = 2;
    pub const LOCATION: u32 = 4;
    pub const FUNCTION: u32 = 5;
    pub const STRING_TABLE: u32 = 6;
    pub const TIME_NANOS: u32 = 9;
    pub const DURATION_NANOS: u32 = 10;
    pub const PERIOD_TYPE: u32 = 11;
    pub const PERIOD: u32 = 12;
    pub const DEFAULT_SAMPLE_TYPE: u32 = 14;
}

/// A protobuf message being written.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn key(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }
    /// An integer field; zero is the default and is left out.
    fn int(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.key(field, 0);
            self.varint(v);
        }
    }
    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn msg(&mut self, field: u32, m: Msg) {
        self.bytes(field, &m.0);
    }
    fn packed(&mut self, field: u32, vs: impl IntoIterator<Item = u64>) {
        let mut p = Msg::default();
        for v in vs {
            p.varint(v);
        }
        self.bytes(field, &p.0);
    }
}

/// The string table: index 0 is the empty string.
struct Strings {
    index: HashMap<Rc<str>, u64>,
    list: Vec<Rc<str>>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Strings {
            index: HashMap::new(),
            list: Vec::new(),
        };
        s.get("");
        s
    }
    fn get(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.list.len() as u64;
        let r: Rc<str> = Rc::from(s);
        self.list.push(r.clone());
        self.index.insert(r, i);
        i
    }
}

/// What a sample is keyed by: samples with equal keys are merged.
#[derive(Clone, PartialEq, Eq, Hash)]
struct SampleKey {
    locations: Vec<u64>,
    tid: u32,
    class: Class,
    wait_reason: Option<Rc<str>>,
}

/// Where a location comes from: a real frame or a subclass's pseudo frame.
#[derive(PartialEq, Eq, Hash, Clone, Copy)]
enum LocKey {
    Frame(Frame),
    Leaf(Class),
}

/// (name, file, line) of one function at a location.
type Line = (Rc<str>, Option<Rc<str>>, u32);

struct Builder {
    strings: Strings,
    functions: HashMap<(Rc<str>, Rc<str>), u64>,
    function_msgs: Vec<Msg>,
    locations: HashMap<LocKey, u64>,
    location_msgs: Vec<Msg>,
}

impl Builder {
    fn function(&mut self, name: &Rc<str>, file: &Rc<str>) -> u64 {
        if let Some(&id) = self.functions.get(&(name.clone(), file.clone())) {
            return id;
        }
        let id = self.function_msgs.len() as u64 + 1;
        let mut m = Msg::default();
        m.int(1, id);
        let n = self.strings.get(name);
        m.int(2, n);
        m.int(3, n);
        m.int(4, self.strings.get(file));
        self.function_msgs.push(m);
        self.functions.insert((name.clone(), file.clone()), id);
        id
    }

    fn location(&mut self, key: LocKey, address: u64, lines: &[Line]) -> u64 {
        if let Some(&id) = self.locations.get(&key) {
            return id;
        }
        let id = self.location_msgs.len() as u64 + 1;
        let mut m = Msg::default();
        m.int(1, id);
        m.int(3, address);
        for (name, file, line) in lines {
            let file = file.clone().unwrap_or_else(|| Rc::from(""));
            let mut l = Msg::default();
            l.int(1, self.function(name, &file));
            l.int(2, u64::from(*line));
            m.msg(4, l);
        }
        self.location_msgs.push(m);
        self.locations.insert(key, id);
        id
    }
}

/// The names of the sample types, in value order: `wall` then a count and a
/// time per subclass.
pub fn sample_types() -> Vec<(String, &'static str)> {
    let mut v = vec![("wall".to_string(), "nanoseconds")];
    for c in CLASSES {
        v.push((format!("{}_samples", class_name(c)), "count"));
        v.push((class_name(c).to_string(), "nanoseconds"));
    }
    v
}

/// The profile, not yet compressed.
pub fn encode(trace: &Trace, samples: &[StackSample]) -> Vec<u8> {
    let period = trace.header.period_ns;
    let mut b = Builder {
        strings: Strings::new(),
        functions: HashMap::new(),
        function_msgs: Vec::new(),
        locations: HashMap::new(),
        location_msgs: Vec::new(),
    };
    // Merge equal samples, keeping the order in which they first appear.
    let mut merged: HashMap<SampleKey, usize> = HashMap::new();
    let mut rows: Vec<(SampleKey, Rc<str>, u64)> = Vec::new();
    for s in samples {
        let mut locations = Vec::with_capacity(s.frames.len() + 1);
        if let Some(leaf) = leaf_name(s.class) {
            locations.push(b.location(LocKey::Leaf(s.class), 0, &[(Rc::from(leaf), None, 0)]));
        }
        for f in s.frames.iter() {
            let lines: Vec<Line> = f
                .funcs
                .iter()
                .map(|func| {
                    let file = func.file.clone().or_else(|| Some(func.dso.clone()));
                    (func.name.clone(), file, func.line)
                })
                .collect();
            locations.push(b.location(LocKey::Frame(f.frame), f.frame.addr, &lines));
        }
        let key = SampleKey {
            locations,
            tid: s.tid,
            class: s.class,
            wait_reason: s.wait_reason.clone(),
        };
        match merged.get(&key) {
            Some(&i) => rows[i].2 += s.points,
            None => {
                merged.insert(key.clone(), rows.len());
                rows.push((key, s.thread.clone(), s.points));
            }
        }
    }

    let mut p = Msg::default();
    for (name, unit) in sample_types() {
        let mut vt = Msg::default();
        vt.int(1, b.strings.get(&name));
        vt.int(2, b.strings.get(unit));
        p.msg(field::SAMPLE_TYPE, vt);
    }
    let label_keys = [
        b.strings.get("thread"),
        b.strings.get("tid"),
        b.strings.get("subclass"),
        b.strings.get("wait_reason"),
    ];
    for (key, thread, points) in &rows {
        let mut m = Msg::default();
        m.packed(1, key.locations.iter().copied());
        let class_index = CLASSES.iter().position(|&c| c == key.class).unwrap_or(0);
        let mut values = vec![0u64; 1 + 2 * CLASSES.len()];
        values[0] = points * period;
        values[1 + 2 * class_index] = *points;
        values[2 + 2 * class_index] = points * period;
        m.packed(2, values);
        let mut labels: Vec<(u64, Option<u64>, u64)> = vec![
            (label_keys[0], Some(b.strings.get(thread)), 0),
            (label_keys[1], None, u64::from(key.tid)),
            (label_keys[2], Some(b.strings.get(class_name(key.class))), 0),
        ];
        if let Some(r) = &key.wait_reason {
            labels.push((label_keys[3], Some(b.strings.get(r)), 0));
        }
        for (k, str, num) in labels {
            let mut l = Msg::default();
            l.int(1, k);
            match str {
                Some(s) => l.int(2, s),
                None => l.int(3, num),
            }
            m.msg(3, l);
        }
        p.msg(field::SAMPLE, m);
    }
    for m in std::mem::take(&mut b.location_msgs) {
        p.msg(field::LOCATION, m);
    }
    for m in std::mem::take(&mut b.function_msgs) {
        p.msg(field::FUNCTION, m);
    }
    let wall = b.strings.get("wall");
    let mut period_type = Msg::default();
    period_type.int(1, wall);
    period_type.int(2, b.strings.get("nanoseconds"));
    for s in &b.strings.list {
        p.bytes(field::STRING_TABLE, s.as_bytes());
    }
    p.int(field::TIME_NANOS, trace.header.start_unix_ns);
    p.int(field::DURATION_NANOS, trace.duration_ns());
    p.msg(field::PERIOD_TYPE, period_type);
    p.int(field::PERIOD, period);
    p.int(field::DEFAULT_SAMPLE_TYPE, wall);
    p.0
}

/// The gzipped profile, as pprof and its servers read it.
pub fn write(
    trace: &Trace,
    samples: &[StackSample],
    out: impl std::io::Write,
) -> std::io::Result<()> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&encode(trace, samples))?;
    gz.finish()?.flush()
}
