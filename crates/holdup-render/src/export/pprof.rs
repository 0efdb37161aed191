//! pprof's profile.proto (github.com/google/pprof/proto/profile.proto),
//! gzipped, written with the small protobuf encoder of [`super::protobuf`]:
//! the message is flat and a dozen fields do not warrant a code generator.
//!
//! Sample types: `wall` (on- and off-CPU, the default) and, per subclass,
//! `<class>_samples` (count) and `<class>` (nanoseconds). A location is one
//! frame; its inlined functions are its lines, innermost first. Blocked
//! stacks end in the subclass's pseudo frame (`[I] io wait`), as in
//! `holdup flame`. Labels: `thread`, `tid` (numeric), `subclass`,
//! `wait_reason`.
//!
//! Mappings: one per file (dso), with its build id when the trace has one,
//! and every location names its mapping. A trace stores user frames as file
//! offsets; a location's address is chosen so that `address - memory_start
//! + file_offset` is that file offset, which is what symbolizers (pprof,
//! Parca) compute. Where the trace has the file's mapping records, the
//! addresses are the mapped ones (in the first process that mapped it) and
//! the mapping spans its pieces; otherwise the files are laid out one after
//! another from [`SYNTHETIC_BASE`] with offset 0. Kernel and unknown frames
//! keep their raw addresses; the subclass pseudo frames live in a
//! `[holdup]` mapping.

use super::protobuf::Msg;
use super::{class_name, StackSample, CLASSES};
use holdup_analysis::folded::leaf_name;
use holdup_trace::{Class, DsoId, Frame, Trace, KERNEL_DSO, UNKNOWN_DSO};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// Field numbers of profile.proto.
mod field {
    pub const SAMPLE_TYPE: u32 = 1;
    pub const SAMPLE: u32 = 2;
    pub const MAPPING: u32 = 3;
    pub const LOCATION: u32 = 4;
    pub const FUNCTION: u32 = 5;
    pub const STRING_TABLE: u32 = 6;
    pub const TIME_NANOS: u32 = 9;
    pub const DURATION_NANOS: u32 = 10;
    pub const PERIOD_TYPE: u32 = 11;
    pub const PERIOD: u32 = 12;
    pub const DEFAULT_SAMPLE_TYPE: u32 = 14;
}

/// The string table: index 0 is the empty string.
pub(super) struct Strings {
    index: HashMap<Rc<str>, u64>,
    pub(super) list: Vec<Rc<str>>,
}

impl Strings {
    pub(super) fn new() -> Self {
        let mut s = Strings {
            index: HashMap::new(),
            list: Vec::new(),
        };
        s.get("");
        s
    }
    pub(super) fn get(&mut self, s: &str) -> u64 {
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

/// Where files without mapping records are laid out (page aligned, above
/// the null page).
pub const SYNTHETIC_BASE: u64 = 0x1_0000;

/// Pseudo dso of the subclass frames.
pub(super) const PSEUDO_DSO: DsoId = UNKNOWN_DSO - 1;

/// One pprof mapping and how its frames' addresses are placed in it.
pub(super) struct Mapping {
    id: u64,
    pub(super) start: u64,
    pub(super) limit: u64,
    pub(super) offset: u64,
    pub(super) file: String,
    pub(super) build_id: String,
    has_filenames: bool,
    has_line_numbers: bool,
    has_inline_frames: bool,
    /// (file offset, mapped address, length) of each mapped piece, when
    /// the trace has mapping records; file offsets are translated by them.
    pieces: Vec<(u64, u64, u64)>,
}

impl Mapping {
    /// The address of a frame of this mapping's file.
    pub(super) fn address(&self, dso: DsoId, addr: u64) -> u64 {
        if matches!(dso, KERNEL_DSO | UNKNOWN_DSO | PSEUDO_DSO) {
            return addr;
        }
        match self
            .pieces
            .iter()
            .find(|&&(off, _, len)| off <= addr && addr - off < len)
        {
            Some(&(off, at, _)) => at.wrapping_add(addr - off),
            None => self.start.wrapping_add(addr).wrapping_sub(self.offset),
        }
    }

    fn encode(&self, strings: &mut Strings) -> Msg {
        let mut m = Msg::default();
        m.int(1, self.id);
        m.int(2, self.start);
        m.int(3, self.limit);
        m.int(4, self.offset);
        m.int(5, strings.get(&self.file));
        m.int(6, strings.get(&self.build_id));
        m.int(7, 1); // has_functions: every frame is symbolized
        m.int(8, u64::from(self.has_filenames));
        m.int(9, u64::from(self.has_line_numbers));
        m.int(10, u64::from(self.has_inline_frames));
        m
    }
}

/// One mapping per dso the samples use, in order of dso id.
pub(super) fn mappings(trace: &Trace, samples: &[StackSample]) -> BTreeMap<DsoId, Mapping> {
    #[derive(Default)]
    struct Seen {
        min: u64,
        max: u64,
        files: bool,
        lines: bool,
        inline: bool,
    }
    let mut seen: BTreeMap<DsoId, Seen> = BTreeMap::new();
    for s in samples {
        if s.class != Class::Cpu {
            seen.entry(PSEUDO_DSO).or_default();
        }
        for f in s.frames.iter() {
            let e = seen.entry(f.frame.dso).or_insert(Seen {
                min: u64::MAX,
                ..Default::default()
            });
            e.min = e.min.min(f.frame.addr);
            e.max = e.max.max(f.frame.addr);
            e.files |= f.funcs.iter().any(|func| func.file.is_some());
            e.lines |= f.funcs.iter().any(|func| func.line != 0);
            e.inline |= f.funcs.len() > 1;
        }
    }
    let mut next_base = SYNTHETIC_BASE;
    let mut out = BTreeMap::new();
    for (i, (dso, seen)) in seen.into_iter().enumerate() {
        let (file, build_id) = match dso {
            KERNEL_DSO => ("[kernel.kallsyms]".to_string(), String::new()),
            UNKNOWN_DSO => ("[unknown]".to_string(), String::new()),
            PSEUDO_DSO => ("[holdup]".to_string(), String::new()),
            id => match trace.dsos.get(&id) {
                Some(d) => (
                    d.path.clone(),
                    d.build_id
                        .as_deref()
                        .map(holdup_trace::build_id_hex)
                        .unwrap_or_default(),
                ),
                None => (trace.dso_name(id), String::new()),
            },
        };
        let mut m = Mapping {
            id: i as u64 + 1,
            start: 0,
            limit: 0,
            offset: 0,
            file,
            build_id,
            has_filenames: seen.files,
            has_line_numbers: seen.lines,
            has_inline_frames: seen.inline,
            pieces: Vec::new(),
        };
        // The first process that mapped this file.
        let pid = trace.mmaps.iter().find(|mm| mm.dso == dso).map(|mm| mm.pid);
        let mut mapped: Vec<_> = trace
            .mmaps
            .iter()
            .filter(|mm| mm.dso == dso && Some(mm.pid) == pid && mm.end > mm.start)
            .collect();
        mapped.sort_by_key(|mm| mm.start);
        match dso {
            PSEUDO_DSO => {}
            KERNEL_DSO | UNKNOWN_DSO => {
                m.start = seen.min;
                m.limit = seen.max.saturating_add(1);
            }
            _ if !mapped.is_empty() => {
                m.start = mapped[0].start;
                m.offset = mapped[0].file_offset;
                m.limit = mapped.iter().map(|mm| mm.end).max().unwrap_or(m.start);
                m.pieces = mapped
                    .iter()
                    .map(|mm| (mm.file_offset, mm.start, mm.end.saturating_sub(mm.start)))
                    .collect();
            }
            _ => {
                const PAGE: u64 = 4096;
                m.start = next_base;
                m.limit = next_base.saturating_add((seen.max / PAGE + 1).saturating_mul(PAGE));
                next_base = m.limit;
            }
        }
        out.insert(dso, m);
    }
    out
}

struct Builder {
    mappings: BTreeMap<DsoId, Mapping>,
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

    fn location(&mut self, key: LocKey, lines: &[Line]) -> u64 {
        if let Some(&id) = self.locations.get(&key) {
            return id;
        }
        let (dso, addr) = match key {
            LocKey::Frame(f) => (f.dso, f.addr),
            LocKey::Leaf(_) => (PSEUDO_DSO, 0),
        };
        let mapping = &self.mappings[&dso];
        let id = self.location_msgs.len() as u64 + 1;
        let mut m = Msg::default();
        m.int(1, id);
        m.int(2, mapping.id);
        m.int(3, mapping.address(dso, addr));
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
        mappings: mappings(trace, samples),
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
            locations.push(b.location(LocKey::Leaf(s.class), &[(Rc::from(leaf), None, 0)]));
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
            locations.push(b.location(LocKey::Frame(f.frame), &lines));
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
        values[0] = points.saturating_mul(period);
        values[1 + 2 * class_index] = *points;
        values[2 + 2 * class_index] = points.saturating_mul(period);
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
    for m in b.mappings.values() {
        p.msg(field::MAPPING, m.encode(&mut b.strings));
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
