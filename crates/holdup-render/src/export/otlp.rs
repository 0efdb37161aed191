//! OpenTelemetry profiles: an OTLP `ExportProfilesServiceRequest` of the
//! `v1development` profiles signal (opentelemetry-proto 1.10 and 1.11, the
//! layout the Collector's OTLP receiver reads), written with the small
//! protobuf encoder of [`super::protobuf`]. The same bytes are a
//! `ProfilesData` file.
//!
//! One `ResourceProfiles` per process: `host.name`, `process.pid`, what the
//! caller knows of the process (executable, command line, cgroup,
//! container, pod) and the caller's common attributes
//! (`OTEL_RESOURCE_ATTRIBUTES`), the process's own winning on a clash. In
//! it one scope, `holdup`, with up to two profiles:
//! - on-CPU: sample type (`samples`, `count`), period (`cpu`,
//!   `nanoseconds`) = the sampling period P; a value is sampling points;
//! - blocked: sample type (`off_cpu`, `nanoseconds`), period (`off_cpu`,
//!   `nanoseconds`) = P; a value is sampling points × P (blocked samples
//!   are taken on the same points as on-CPU ones).
//!
//! Sample attributes: `thread.name`, `thread.id` (the semantic
//! conventions'), and on blocked samples `holdup.blocked.subclass` (`io`,
//! `lock`, `sched` for runqueue time, `other`), `holdup.wait.reason` (the
//! first kernel function below the scheduler), `holdup.waker` (`comm:tid`,
//! `irq:<name>`, `softirq:<name>`) and `holdup.waker.thread.id` when a
//! thread woke it. A blocked profile says how its stacks were sampled in
//! `holdup.blocked.stack_sampling_ratio` (a double: 1 when every blocked
//! interval had its stacks taken, R when a stack budget took 1 in R and
//! scaled the weights by it, so that its values still estimate the whole
//! blocked time). Locations carry `profile.frame.type` (`kernel` or
//! `native`), mappings `process.executable.build_id.gnu` when the trace
//! has the build id. Mappings and addresses are pprof's (see
//! [`super::pprof`]). Equal samples (stack and attributes) are merged into
//! one value; there are no per-sample timestamps.
//!
//! Every dictionary table begins with its empty element, so that index 0
//! means "none", as the protocol asks.

use super::pprof::{mappings, Mapping, Strings, PSEUDO_DSO};
use super::protobuf::Msg;
use super::StackSample;
use holdup_trace::{Class, DsoId, Frame, Trace, Waker};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// The HTTP path of the profiles signal.
pub const PATH: &str = "/v1development/profiles";

/// An attribute's value.
#[derive(Clone, Debug)]
pub enum Value {
    Str(String),
    Int(i64),
    Double(f64),
}

/// Values are equal when they encode the same: doubles by their bits.
impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Double(a), Value::Double(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl Eq for Value {}

impl std::hash::Hash for Value {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        std::mem::discriminant(self).hash(h);
        match self {
            Value::Str(s) => s.hash(h),
            Value::Int(i) => i.hash(h),
            Value::Double(d) => d.to_bits().hash(h),
        }
    }
}

/// The attribute of a blocked profile that says how its stacks were
/// sampled: blocked intervals per stack taken in the profile's time (1:
/// every one), the factor its sample values were scaled by on average.
pub const STACK_SAMPLING_RATIO: &str = "holdup.blocked.stack_sampling_ratio";

/// Attributes in the order they are written.
pub type Attributes = Vec<(String, Value)>;

/// What one request is made of.
pub struct Request<'a> {
    pub trace: &'a Trace,
    pub samples: &'a [StackSample],
    /// Start of the profiled time (wall clock, ns since the epoch) and its
    /// length.
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    /// Per process, what the caller knows of it.
    pub processes: &'a HashMap<u32, Attributes>,
    /// Of every resource, after the process's own.
    pub common: &'a [(String, Value)],
    /// Blocked intervals per blocked-sample stack taken over the profiled
    /// time: 1 when every one had its stacks, R when a stack budget took
    /// 1 in R and scaled their weights by it.
    pub stack_sampling_ratio: f64,
}

/// Field numbers of the messages written here.
mod field {
    pub const RESOURCE_PROFILES: u32 = 1;
    pub const DICTIONARY: u32 = 2;
    // ProfilesDictionary
    pub const MAPPING_TABLE: u32 = 1;
    pub const LOCATION_TABLE: u32 = 2;
    pub const FUNCTION_TABLE: u32 = 3;
    pub const LINK_TABLE: u32 = 4;
    pub const STRING_TABLE: u32 = 5;
    pub const ATTRIBUTE_TABLE: u32 = 6;
    pub const STACK_TABLE: u32 = 7;
    // Profile
    pub const SAMPLE_TYPE: u32 = 1;
    pub const SAMPLES: u32 = 2;
    pub const TIME_UNIX_NANO: u32 = 3;
    pub const DURATION_NANO: u32 = 4;
    pub const PERIOD_TYPE: u32 = 5;
    pub const PERIOD: u32 = 6;
    pub const ATTRIBUTE_INDICES: u32 = 11;
}

/// `AnyValue`: a oneof, so a zero or an empty string is written too.
fn any_value(v: &Value) -> Msg {
    let mut m = Msg::default();
    match v {
        Value::Str(s) => m.bytes(1, s.as_bytes()),
        Value::Int(i) => {
            m.key(3, 0);
            m.varint(*i as u64);
        }
        Value::Double(d) => m.fixed64(4, d.to_bits()),
    }
    m
}

/// `common.v1.KeyValue` with its key as a string (resources).
fn key_value(key: &str, v: &Value) -> Msg {
    let mut m = Msg::default();
    m.bytes(1, key.as_bytes());
    m.msg(2, any_value(v));
    m
}

/// One dictionary table: messages by index, index 0 the empty one, and
/// what each was made from.
struct Table<K> {
    index: HashMap<K, u64>,
    msgs: Vec<Msg>,
}

impl<K: std::hash::Hash + Eq> Table<K> {
    fn new() -> Self {
        Table {
            index: HashMap::new(),
            msgs: vec![Msg::default()],
        }
    }

    fn get(&mut self, key: K, make: impl FnOnce() -> Msg) -> u64 {
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let i = self.msgs.len() as u64;
        self.msgs.push(make());
        self.index.insert(key, i);
        i
    }
}

/// The request's shared dictionary, built as samples are added.
struct Dictionary {
    strings: Strings,
    pprof_mappings: BTreeMap<DsoId, Mapping>,
    mappings: Table<DsoId>,
    functions: Table<(Rc<str>, Rc<str>)>,
    locations: Table<Frame>,
    stacks: Table<Vec<u64>>,
    attributes: Table<(String, Value)>,
}

impl Dictionary {
    fn attribute(&mut self, key: &str, v: Value) -> u64 {
        let k = self.strings.get(key);
        let value = any_value(&v);
        self.attributes.get((key.to_string(), v), || {
            let mut m = Msg::default();
            m.int(1, k);
            m.msg(2, value);
            m
        })
    }

    fn mapping(&mut self, dso: DsoId) -> u64 {
        if let Some(&i) = self.mappings.index.get(&dso) {
            return i;
        }
        let Some(mp) = self.pprof_mappings.get(&dso) else {
            return 0;
        };
        let (start, limit, offset) = (mp.start, mp.limit, mp.offset);
        let (file, build_id) = (mp.file.clone(), mp.build_id.clone());
        let file = self.strings.get(&file);
        let attr = (!build_id.is_empty())
            .then(|| self.attribute("process.executable.build_id.gnu", Value::Str(build_id)));
        self.mappings.get(dso, || {
            let mut m = Msg::default();
            m.int(1, start);
            m.int(2, limit);
            m.int(3, offset);
            m.int(4, file);
            if let Some(a) = attr {
                m.packed(5, [a]);
            }
            m
        })
    }

    fn function(&mut self, name: &Rc<str>, file: &Rc<str>) -> u64 {
        let n = self.strings.get(name);
        let f = self.strings.get(file);
        self.functions.get((name.clone(), file.clone()), || {
            let mut m = Msg::default();
            m.int(1, n);
            m.int(3, f);
            m
        })
    }

    fn location(&mut self, f: &super::StackFrame) -> u64 {
        if let Some(&i) = self.locations.index.get(&f.frame) {
            return i;
        }
        let mapping = self.mapping(f.frame.dso);
        let address = self
            .pprof_mappings
            .get(&f.frame.dso)
            .map_or(f.frame.addr, |mp| mp.address(f.frame.dso, f.frame.addr));
        let kind = if f.frame.is_kernel() {
            "kernel"
        } else {
            "native"
        };
        let kind = self.attribute("profile.frame.type", Value::Str(kind.into()));
        let lines: Vec<(u64, u32)> = f
            .funcs
            .iter()
            .map(|func| {
                let file = func.file.clone().unwrap_or_else(|| func.dso.clone());
                (self.function(&func.name, &file), func.line)
            })
            .collect();
        self.locations.get(f.frame, || {
            let mut m = Msg::default();
            m.int(1, mapping);
            m.int(2, address);
            for (function, line) in lines {
                let mut l = Msg::default();
                l.int(1, function);
                l.int(2, u64::from(line));
                m.msg(3, l);
            }
            m.packed(4, [kind]);
            m
        })
    }

    fn stack(&mut self, s: &StackSample) -> u64 {
        let locations: Vec<u64> = s.frames.iter().map(|f| self.location(f)).collect();
        if locations.is_empty() {
            return 0;
        }
        let packed = locations.clone();
        self.stacks.get(locations, || {
            let mut m = Msg::default();
            m.packed(1, packed);
            m
        })
    }

    /// The sample's attribute indices, in a fixed order.
    fn sample_attributes(&mut self, trace: &Trace, s: &StackSample) -> Vec<u64> {
        let mut a = vec![
            self.attribute("thread.name", Value::Str(s.thread.to_string())),
            self.attribute("thread.id", Value::Int(i64::from(s.tid))),
        ];
        if s.class == Class::Cpu {
            return a;
        }
        a.push(self.attribute("holdup.blocked.subclass", Value::Str(s.class.name().into())));
        if let Some(r) = &s.wait_reason {
            a.push(self.attribute("holdup.wait.reason", Value::Str(r.to_string())));
        }
        if s.waker != Waker::None {
            a.push(self.attribute("holdup.waker", Value::Str(trace.waker_name(s.waker))));
        }
        if let Waker::Thread(tid) = s.waker {
            a.push(self.attribute("holdup.waker.thread.id", Value::Int(i64::from(tid))));
        }
        a
    }

    fn encode(mut self) -> Msg {
        let mut d = Msg::default();
        for m in self.mappings.msgs {
            d.msg(field::MAPPING_TABLE, m);
        }
        for m in self.locations.msgs {
            d.msg(field::LOCATION_TABLE, m);
        }
        for m in self.functions.msgs {
            d.msg(field::FUNCTION_TABLE, m);
        }
        d.msg(field::LINK_TABLE, Msg::default());
        for s in std::mem::take(&mut self.strings.list) {
            d.bytes(field::STRING_TABLE, s.as_bytes());
        }
        for m in self.attributes.msgs {
            d.msg(field::ATTRIBUTE_TABLE, m);
        }
        for m in self.stacks.msgs {
            d.msg(field::STACK_TABLE, m);
        }
        d
    }
}

/// One process's samples of one kind, merged: (stack, attributes) → value.
#[derive(Default)]
struct Merged {
    rows: Vec<(u64, Vec<u64>, u64)>,
    index: HashMap<(u64, Vec<u64>), usize>,
}

impl Merged {
    fn add(&mut self, stack: u64, attrs: Vec<u64>, value: u64) {
        match self.index.get(&(stack, attrs.clone())) {
            Some(&i) => self.rows[i].2 += value,
            None => {
                self.index.insert((stack, attrs.clone()), self.rows.len());
                self.rows.push((stack, attrs, value));
            }
        }
    }
}

/// A `ValueType`.
fn value_type(strings: &mut Strings, kind: &str, unit: &str) -> Msg {
    let mut m = Msg::default();
    m.int(1, strings.get(kind));
    m.int(2, strings.get(unit));
    m
}

/// The samples a process had of one kind, as a `Profile`.
fn profile(req: &Request, d: &mut Dictionary, kind: &str, unit: &str, merged: Merged) -> Msg {
    let mut p = Msg::default();
    p.msg(field::SAMPLE_TYPE, value_type(&mut d.strings, kind, unit));
    for (stack, attrs, value) in merged.rows {
        let mut s = Msg::default();
        s.int(1, stack);
        s.packed(2, attrs);
        s.packed(4, [value]);
        p.msg(field::SAMPLES, s);
    }
    p.fixed64(field::TIME_UNIX_NANO, req.start_unix_ns);
    p.int(field::DURATION_NANO, req.duration_ns);
    let period_kind = if kind == "samples" { "cpu" } else { kind };
    p.msg(
        field::PERIOD_TYPE,
        value_type(&mut d.strings, period_kind, "nanoseconds"),
    );
    p.int(field::PERIOD, req.trace.header.period_ns);
    if kind == "off_cpu" {
        let ratio = d.attribute(
            STACK_SAMPLING_RATIO,
            Value::Double(req.stack_sampling_ratio),
        );
        p.packed(field::ATTRIBUTE_INDICES, [ratio]);
    }
    p
}

/// A process's `Resource`: host and pid, then its own attributes, then the
/// common ones whose keys are not taken.
fn resource(req: &Request, pid: u32) -> Msg {
    let mut attrs: Attributes = vec![
        (
            "host.name".into(),
            Value::Str(req.trace.header.hostname.clone()),
        ),
        ("process.pid".into(), Value::Int(i64::from(pid))),
    ];
    if let Some(own) = req.processes.get(&pid) {
        attrs.extend(own.iter().cloned());
    }
    for (k, v) in req.common {
        if !attrs.iter().any(|(key, _)| key == k) {
            attrs.push((k.clone(), v.clone()));
        }
    }
    let mut r = Msg::default();
    for (k, v) in &attrs {
        r.msg(1, key_value(k, v));
    }
    r
}

/// The request, ready to send (or to write as a `ProfilesData` file).
pub fn encode(req: &Request) -> Vec<u8> {
    let mut d = Dictionary {
        strings: Strings::new(),
        pprof_mappings: mappings(req.trace, req.samples),
        mappings: Table::new(),
        functions: Table::new(),
        locations: Table::new(),
        stacks: Table::new(),
        attributes: Table::new(),
    };
    d.pprof_mappings.remove(&PSEUDO_DSO);
    let period = req.trace.header.period_ns;
    // Per process, in order of pid: (on-CPU, blocked).
    let mut by_pid: BTreeMap<u32, (Merged, Merged)> = BTreeMap::new();
    for s in req.samples {
        let stack = d.stack(s);
        let attrs = d.sample_attributes(req.trace, s);
        let (cpu, off) = by_pid.entry(s.pid).or_default();
        if s.class == Class::Cpu {
            cpu.add(stack, attrs, s.points);
        } else {
            off.add(stack, attrs, s.points.saturating_mul(period));
        }
    }
    let mut out = Msg::default();
    for (pid, (cpu, off)) in by_pid {
        let mut scope = Msg::default();
        scope.bytes(1, b"holdup");
        scope.bytes(2, env!("CARGO_PKG_VERSION").as_bytes());
        let mut sp = Msg::default();
        sp.msg(1, scope);
        if !cpu.rows.is_empty() {
            sp.msg(2, profile(req, &mut d, "samples", "count", cpu));
        }
        if !off.rows.is_empty() {
            sp.msg(2, profile(req, &mut d, "off_cpu", "nanoseconds", off));
        }
        let mut rp = Msg::default();
        rp.msg(1, resource(req, pid));
        rp.msg(2, sp);
        out.msg(field::RESOURCE_PROFILES, rp);
    }
    out.msg(field::DICTIONARY, d.encode());
    out.0
}

/// Requests of at most a size, and what did not fit.
#[derive(Debug, Default)]
pub struct Capped {
    pub requests: Vec<Vec<u8>>,
    /// Samples left out because one process alone did not fit, and their
    /// sampling points.
    pub dropped_samples: u64,
    pub dropped_points: u64,
}

/// The request split by processes into requests of at most `max_bytes`
/// each (a receiver refuses larger ones). A process that does not fit on
/// its own keeps its heaviest samples that do; the rest are counted as
/// dropped.
pub fn encode_capped(req: &Request, max_bytes: usize) -> Capped {
    let mut out = Capped::default();
    let mut pids: Vec<u32> = req.samples.iter().map(|s| s.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    pack(req, &pids, max_bytes, &mut out);
    out
}

fn with_samples<'a>(req: &Request<'a>, samples: &'a [StackSample]) -> Request<'a> {
    Request {
        trace: req.trace,
        samples,
        start_unix_ns: req.start_unix_ns,
        duration_ns: req.duration_ns,
        processes: req.processes,
        common: req.common,
        stack_sampling_ratio: req.stack_sampling_ratio,
    }
}

fn pack(req: &Request, pids: &[u32], max_bytes: usize, out: &mut Capped) {
    let samples: Vec<StackSample> = req
        .samples
        .iter()
        .filter(|s| pids.contains(&s.pid))
        .cloned()
        .collect();
    if samples.is_empty() {
        return;
    }
    let bytes = encode(&with_samples(req, &samples));
    if bytes.len() <= max_bytes {
        out.requests.push(bytes);
        return;
    }
    if pids.len() > 1 {
        let (a, b) = pids.split_at(pids.len() / 2);
        pack(req, a, max_bytes, out);
        pack(req, b, max_bytes, out);
        return;
    }
    // One process: its heaviest samples, halving until they fit.
    let mut heaviest = samples;
    heaviest.sort_by_key(|s| std::cmp::Reverse(s.points));
    let mut keep = heaviest.len();
    loop {
        keep /= 2;
        if keep == 0 {
            break;
        }
        let bytes = encode(&with_samples(req, &heaviest[..keep]));
        if bytes.len() <= max_bytes {
            out.requests.push(bytes);
            break;
        }
    }
    for s in &heaviest[keep..] {
        out.dropped_samples += 1;
        out.dropped_points += s.points;
    }
}
