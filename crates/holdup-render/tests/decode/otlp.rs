//! OTLP profiles requests (opentelemetry-proto 1.10/1.11,
//! `ExportProfilesServiceRequest`) decoded by field number, with every
//! dictionary reference checked: the Collector accepts indices out of
//! range, so nothing else would notice them.

use super::protobuf::*;
use std::collections::BTreeMap;

/// An attribute value: strings as they are, integers as decimal text.
pub type Attrs = BTreeMap<String, String>;

#[derive(Debug)]
pub struct OtlpSample {
    /// Leaf first, each location as `fn@file:line` lines joined by `+`.
    pub stack: Vec<String>,
    /// `profile.frame.type` of each location.
    pub frame_types: Vec<String>,
    pub attrs: Attrs,
    pub values: Vec<u64>,
}

#[derive(Debug)]
pub struct OtlpProfile {
    pub sample_type: (String, String),
    pub period_type: (String, String),
    pub period: u64,
    pub time_unix_nano: u64,
    pub duration_nano: u64,
    pub samples: Vec<OtlpSample>,
    pub attrs: Attrs,
}

impl OtlpProfile {
    pub fn total(&self) -> u64 {
        self.samples.iter().flat_map(|s| &s.values).sum()
    }

    /// The samples whose attribute `key` is `value`.
    pub fn with(&self, key: &str, value: &str) -> Vec<&OtlpSample> {
        self.samples
            .iter()
            .filter(|s| s.attrs.get(key).map(String::as_str) == Some(value))
            .collect()
    }

    /// The first of them.
    pub fn first_with(&self, key: &str, value: &str) -> &OtlpSample {
        self.with(key, value)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("no sample with {key}={value}"))
    }

    /// Their values summed.
    pub fn total_with(&self, key: &str, value: &str) -> u64 {
        self.with(key, value)
            .into_iter()
            .flat_map(|s| &s.values)
            .sum()
    }
}

#[derive(Debug)]
pub struct OtlpResource {
    pub attrs: Attrs,
    pub scope: (String, String),
    pub profiles: Vec<OtlpProfile>,
}

impl OtlpResource {
    pub fn profile(&self, sample_type: &str) -> Option<&OtlpProfile> {
        self.profiles
            .iter()
            .find(|p| p.sample_type.0 == sample_type)
    }
}

/// The mapping's file and attributes.
#[derive(Debug)]
pub struct OtlpMapping {
    pub start: u64,
    pub limit: u64,
    pub offset: u64,
    pub file: String,
    pub attrs: Attrs,
}

pub struct OtlpRequest {
    pub resources: Vec<OtlpResource>,
    pub mappings: Vec<OtlpMapping>,
    /// (mapping index, address) per location index.
    pub locations: Vec<(usize, u64)>,
}

fn string(v: &Val) -> String {
    match v {
        Val::Bytes(b) => String::from_utf8(b.clone()).expect("utf-8"),
        Val::Int(_) => panic!("not a string"),
    }
}

fn one_string(fs: &[(u32, Val)], field: u32) -> String {
    fs.iter()
        .find(|(f, _)| *f == field)
        .map_or_else(String::new, |(_, v)| string(v))
}

/// An AnyValue: string (1), int (3) or double (4), as text; anything else
/// is a failure.
fn any_value(fs: &[(u32, Val)]) -> String {
    assert_eq!(fs.len(), 1, "AnyValue is a oneof: one field set");
    match &fs[0] {
        (1, v) => string(v),
        (3, Val::Int(i)) => (*i as i64).to_string(),
        (4, Val::Int(bits)) => f64::from_bits(*bits).to_string(),
        (f, _) => panic!("AnyValue field {f} not expected"),
    }
}

/// A resource's `KeyValue`s: keys as strings (no string references).
fn key_values(kvs: &[Vec<(u32, Val)>]) -> Attrs {
    let mut out = Attrs::new();
    for kv in kvs {
        let key = one_string(kv, 1);
        let value = any_value(&msgs(kv, 2)[0]);
        assert!(out.insert(key.clone(), value).is_none(), "{key} twice");
    }
    out
}

pub fn decode_request(bytes: &[u8]) -> OtlpRequest {
    let req = fields(bytes);
    let dicts = msgs(&req, 2);
    assert_eq!(dicts.len(), 1, "one dictionary");
    let d = &dicts[0];
    let strings: Vec<String> = d
        .iter()
        .filter(|(f, _)| *f == 5)
        .map(|(_, v)| string(v))
        .collect();
    assert_eq!(
        strings.first().map(String::as_str),
        Some(""),
        "string_table[0]"
    );
    let s = |i: u64| {
        strings
            .get(i as usize)
            .expect("string index in range")
            .clone()
    };
    let table = |field: u32| {
        let t = msgs(d, field);
        assert!(
            t.first().is_some_and(|m| m.is_empty()),
            "table {field} starts with its empty element"
        );
        t
    };
    let attributes: Vec<(String, String)> = table(6)
        .iter()
        .map(|a| {
            if a.is_empty() {
                return (String::new(), String::new());
            }
            (s(int(a, 1)), any_value(&msgs(a, 2)[0]))
        })
        .collect();
    let attrs_of = |indices: Vec<u64>| -> Attrs {
        let mut out = Attrs::new();
        for i in indices {
            assert!(i > 0, "attribute index 0 is the empty one");
            let (k, v) = attributes
                .get(i as usize)
                .expect("attribute in range")
                .clone();
            assert!(
                out.insert(k.clone(), v).is_none(),
                "key {k} twice in a list"
            );
        }
        out
    };
    let functions: Vec<(String, String)> = table(3)
        .iter()
        .map(|f| (s(int(f, 1)), s(int(f, 3))))
        .collect();
    let mappings: Vec<OtlpMapping> = table(1)
        .iter()
        .map(|m| OtlpMapping {
            start: int(m, 1),
            limit: int(m, 2),
            offset: int(m, 3),
            file: s(int(m, 4)),
            attrs: attrs_of(ints(m, 5)),
        })
        .collect();
    let location_msgs = table(2);
    let locations: Vec<(usize, u64)> = location_msgs
        .iter()
        .map(|l| {
            let m = int(l, 1) as usize;
            assert!(m < mappings.len(), "mapping index in range");
            (m, int(l, 2))
        })
        .collect();
    let location_text: Vec<(String, String)> = location_msgs
        .iter()
        .map(|l| {
            let lines: Vec<String> = msgs(l, 3)
                .iter()
                .map(|line| {
                    let (name, file) = functions
                        .get(int(line, 1) as usize)
                        .expect("function in range");
                    format!("{name}@{file}:{}", int(line, 2))
                })
                .collect();
            let kind = attrs_of(ints(l, 4))
                .get("profile.frame.type")
                .cloned()
                .unwrap_or_default();
            (lines.join("+"), kind)
        })
        .collect();
    let stacks: Vec<Vec<u64>> = table(7).iter().map(|st| ints(st, 1)).collect();
    assert_eq!(
        msgs(d, 4).len(),
        1,
        "the link table holds its empty element"
    );

    let value_type = |vt: &[(u32, Val)]| (s(int(vt, 1)), s(int(vt, 2)));
    let resources = msgs(&req, 1)
        .iter()
        .map(|rp| {
            let resource = &msgs(rp, 1)[0];
            let sp = &msgs(rp, 2)[0];
            let scope = &msgs(sp, 1)[0];
            let profiles = msgs(sp, 2)
                .iter()
                .map(|p| {
                    let samples = msgs(p, 2)
                        .iter()
                        .map(|smp| {
                            let stack = stacks.get(int(smp, 1) as usize).expect("stack in range");
                            let locs: Vec<&(String, String)> = stack
                                .iter()
                                .map(|&l| {
                                    assert!(l > 0, "location 0 is the empty one");
                                    location_text.get(l as usize).expect("location in range")
                                })
                                .collect();
                            OtlpSample {
                                stack: locs.iter().map(|l| l.0.clone()).collect(),
                                frame_types: locs.iter().map(|l| l.1.clone()).collect(),
                                attrs: attrs_of(ints(smp, 2)),
                                values: ints(smp, 4),
                            }
                        })
                        .collect();
                    OtlpProfile {
                        sample_type: value_type(&msgs(p, 1)[0]),
                        period_type: msgs(p, 5)
                            .first()
                            .map(|v| value_type(v))
                            .unwrap_or_default(),
                        period: int(p, 6),
                        time_unix_nano: int(p, 3),
                        duration_nano: int(p, 4),
                        samples,
                        attrs: attrs_of(ints(p, 11)),
                    }
                })
                .collect();
            OtlpResource {
                attrs: key_values(&msgs(resource, 1)),
                scope: (one_string(scope, 1), one_string(scope, 2)),
                profiles,
            }
        })
        .collect();
    OtlpRequest {
        resources,
        mappings,
        locations,
    }
}
