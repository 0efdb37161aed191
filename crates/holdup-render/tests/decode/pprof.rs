//! pprof profiles (profile.proto, gzipped) decoded by field number.

use super::protobuf::*;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Values, stack and labels of one sample.
pub type PprofSample = (Vec<u64>, Vec<String>, BTreeMap<String, String>);

/// A decoded profile: sample types, and per sample its values, its stack
/// (leaf first, each location as `fn@file:line` lines joined by `+`) and
/// its labels.
pub struct Pprof {
    pub types: Vec<(String, String)>,
    /// By id.
    pub mappings: BTreeMap<u64, PprofMapping>,
    /// By id: (mapping id, address, lines).
    pub locations: BTreeMap<u64, (u64, u64, String)>,
    pub default_type: String,
    pub period: u64,
    pub duration: u64,
    pub samples: Vec<PprofSample>,
}

#[derive(Debug, PartialEq)]
pub struct PprofMapping {
    pub start: u64,
    pub limit: u64,
    pub offset: u64,
    pub file: String,
    pub build_id: String,
    /// has_functions, has_filenames, has_line_numbers, has_inline_frames.
    pub has: [bool; 4],
}

pub fn decode(path: &Path) -> Pprof {
    decode_gz(&std::fs::read(path).unwrap())
}

pub fn decode_gz(gz: &[u8]) -> Pprof {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut raw)
        .expect("gzipped");
    let p = fields(&raw);
    let strings: Vec<String> = p
        .iter()
        .filter(|(f, _)| *f == 6)
        .map(|(_, v)| match v {
            Val::Bytes(b) => String::from_utf8(b.clone()).unwrap(),
            Val::Int(_) => panic!("string"),
        })
        .collect();
    assert_eq!(strings[0], "", "string_table[0] must be empty");
    let s = |i: u64| strings[i as usize].clone();
    let functions: BTreeMap<u64, (String, String)> = msgs(&p, 5)
        .iter()
        .map(|f| (int(f, 1), (s(int(f, 2)), s(int(f, 4)))))
        .collect();
    let mappings: BTreeMap<u64, PprofMapping> = msgs(&p, 3)
        .iter()
        .map(|m| {
            (
                int(m, 1),
                PprofMapping {
                    start: int(m, 2),
                    limit: int(m, 3),
                    offset: int(m, 4),
                    file: s(int(m, 5)),
                    build_id: s(int(m, 6)),
                    has: [7, 8, 9, 10].map(|f| int(m, f) != 0),
                },
            )
        })
        .collect();
    let locations: BTreeMap<u64, (u64, u64, String)> = msgs(&p, 4)
        .iter()
        .map(|l| {
            let lines: Vec<String> = msgs(l, 4)
                .iter()
                .map(|line| {
                    let (name, file) = &functions[&int(line, 1)];
                    format!("{name}@{file}:{}", int(line, 2))
                })
                .collect();
            (int(l, 1), (int(l, 2), int(l, 3), lines.join("+")))
        })
        .collect();
    let samples = msgs(&p, 2)
        .iter()
        .map(|m| {
            let stack = ints(m, 1)
                .iter()
                .map(|id| locations[id].2.clone())
                .collect();
            let labels = msgs(m, 3)
                .iter()
                .map(|l| {
                    let v = if int(l, 2) != 0 {
                        s(int(l, 2))
                    } else {
                        int(l, 3).to_string()
                    };
                    (s(int(l, 1)), v)
                })
                .collect();
            (ints(m, 2), stack, labels)
        })
        .collect();
    Pprof {
        types: msgs(&p, 1)
            .iter()
            .map(|t| (s(int(t, 1)), s(int(t, 2))))
            .collect(),
        mappings,
        locations,
        default_type: s(int(&p, 14)),
        period: int(&p, 12),
        duration: int(&p, 10),
        samples,
    }
}

impl Pprof {
    pub fn total(&self, ty: &str) -> u64 {
        let i = self.types.iter().position(|(t, _)| t == ty).unwrap();
        self.samples.iter().map(|s| s.0[i]).sum()
    }

    /// A readable listing, for the golden file.
    pub fn listing(&self) -> String {
        let mut out = String::new();
        let types: Vec<String> = self.types.iter().map(|(t, u)| format!("{t}/{u}")).collect();
        out += &format!("types: {}\n", types.join(" "));
        out += &format!(
            "default: {} period: {} duration: {}\n",
            self.default_type, self.period, self.duration
        );
        for (id, m) in &self.mappings {
            out += &format!(
                "mapping {id}: {} [{:#x}, {:#x}) offset {:#x} build_id {:?} has {:?}\n",
                m.file, m.start, m.limit, m.offset, m.build_id, m.has
            );
        }
        for (id, (mapping, address, lines)) in &self.locations {
            out += &format!("location {id}: mapping {mapping} {address:#x} {lines}\n");
        }
        for (values, stack, labels) in &self.samples {
            let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out += &format!(
                "{values:?} {}\n    {}\n",
                labels.join(" "),
                stack.join(" < ")
            );
        }
        out
    }
}

/// The Go toolchain, whose `go tool pprof` reads the profiles.
pub fn go() -> PathBuf {
    for p in ["go", "/usr/local/go/bin/go", "/usr/lib/go/bin/go"] {
        if std::process::Command::new(p)
            .arg("version")
            .output()
            .is_ok()
        {
            return p.into();
        }
    }
    panic!("Go is needed to check pprof output (apt install golang)");
}
