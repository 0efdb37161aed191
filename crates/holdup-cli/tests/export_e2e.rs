//! `holdup export` on a small hand-made trace whose answer is known by
//! construction: pprof decoded here from profile.proto and opened by
//! `go tool pprof`, the Firefox Profiler's JSON, a Perfetto trace decoded
//! here from Perfetto's protos, speedscope's JSON, folded stacks; golden files
//! (`HOLDUP_BLESS=1` rewrites them) and bad input.

mod support;

use holdup_trace::Class;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use support::small_trace::*;
use support::*;

fn export(dir: &Path, format: &str, out: &str) -> PathBuf {
    let o = holdup()
        .current_dir(dir)
        .args(["export", "-f", format, "-i", "small.data", "-o", out])
        .bounded_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    dir.join(out)
}

fn setup(test: &str) -> PathBuf {
    let dir = scratch(test);
    small_trace(&dir.join("small.data"));
    dir
}

// ---- a protobuf decoder for profile.proto ----------------------------------

#[derive(Debug, Clone)]
enum Val {
    Int(u64),
    Bytes(Vec<u8>),
}

fn varint(b: &[u8], i: &mut usize) -> u64 {
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
fn fields(b: &[u8]) -> Vec<(u32, Val)> {
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

fn ints(fs: &[(u32, Val)], field: u32) -> Vec<u64> {
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

fn int(fs: &[(u32, Val)], field: u32) -> u64 {
    ints(fs, field).first().copied().unwrap_or(0)
}

fn msgs(fs: &[(u32, Val)], field: u32) -> Vec<Vec<(u32, Val)>> {
    fs.iter()
        .filter(|(f, _)| *f == field)
        .map(|(_, v)| match v {
            Val::Bytes(b) => fields(b),
            Val::Int(_) => panic!("field {field} is not a message"),
        })
        .collect()
}

/// Values, stack and labels of one sample.
type PprofSample = (Vec<u64>, Vec<String>, BTreeMap<String, String>);

/// A decoded profile: sample types, and per sample its values, its stack
/// (leaf first, each location as `fn@file:line` lines joined by `+`) and
/// its labels.
struct Pprof {
    types: Vec<(String, String)>,
    /// By id.
    mappings: BTreeMap<u64, PprofMapping>,
    /// By id: (mapping id, address, lines).
    locations: BTreeMap<u64, (u64, u64, String)>,
    default_type: String,
    period: u64,
    duration: u64,
    samples: Vec<PprofSample>,
}

#[derive(Debug, PartialEq)]
struct PprofMapping {
    start: u64,
    limit: u64,
    offset: u64,
    file: String,
    build_id: String,
    /// has_functions, has_filenames, has_line_numbers, has_inline_frames.
    has: [bool; 4],
}

fn decode(path: &Path) -> Pprof {
    decode_gz(&std::fs::read(path).unwrap())
}

fn decode_gz(gz: &[u8]) -> Pprof {
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
    fn total(&self, ty: &str) -> u64 {
        let i = self.types.iter().position(|(t, _)| t == ty).unwrap();
        self.samples.iter().map(|s| s.0[i]).sum()
    }

    /// A readable listing, for the golden file.
    fn listing(&self) -> String {
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

// ---- tests -----------------------------------------------------------------

#[test]
fn pprof_holds_every_subclass_with_labels_and_inlined_lines() {
    let dir = setup("export_pprof");
    let p = decode(&export(&dir, "pprof", "prof.pb.gz"));
    let names: Vec<&str> = p.types.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        names,
        [
            "wall",
            "cpu_samples",
            "cpu",
            "io_samples",
            "io",
            "lock_samples",
            "lock",
            "runqueue_samples",
            "runqueue",
            "blocked_samples",
            "blocked"
        ]
    );
    assert_eq!(p.default_type, "wall");
    assert_eq!(p.period, MS);
    assert_eq!(p.duration, 10 * MS);
    for (ty, points) in [
        ("cpu", 8),
        ("io", 4),
        ("lock", 3),
        ("runqueue", 2),
        ("blocked", 0),
    ] {
        assert_eq!(p.total(&format!("{ty}_samples")), points, "{ty} count");
        assert_eq!(p.total(ty), points * MS, "{ty} ns");
    }
    assert_eq!(p.total("wall"), 17 * MS);

    let lock = p
        .samples
        .iter()
        .find(|s| s.2.get("subclass").map(String::as_str) == Some("lock"))
        .expect("a lock sample");
    assert_eq!(lock.2["thread"], "a");
    assert_eq!(lock.2["tid"], "10");
    assert_eq!(lock.2["wait_reason"], "futex_wait");
    assert_eq!(
        lock.1,
        [
            "[L] lock wait@:0",
            "schedule@[kernel.kallsyms]:0",
            "futex_wait@[kernel.kallsyms]:0",
            "pthread_mutex_lock@libc.so.6:0",
            "helper@app.c:30+work@app.c:20",
            "main@app.c:10"
        ],
        "leaf first; inlined helper is a line of work's location"
    );
    let io = p
        .samples
        .iter()
        .find(|s| s.2.get("subclass").map(String::as_str) == Some("io"))
        .expect("an io sample");
    assert_eq!(
        (io.2["thread"].as_str(), io.2["wait_reason"].as_str()),
        ("b", "vfs_read")
    );
    // Steal time on an on-CPU sample is runqueue time with the running stack
    // and no wait reason.
    let steal = p
        .samples
        .iter()
        .find(|s| s.2.get("subclass").map(String::as_str) == Some("runqueue"))
        .expect("a runqueue sample");
    assert!(!steal.2.contains_key("wait_reason"), "{:?}", steal.2);
    assert_eq!(steal.1[0], "[S] runqueue@:0");
}

#[test]
fn pprof_locations_reference_the_mapping_of_their_file() {
    let dir = setup("export_pprof_mappings");
    let p = decode(&export(&dir, "pprof", "prof.pb.gz"));
    let by_file = |file: &str| {
        let (id, m) = p
            .mappings
            .iter()
            .find(|(_, m)| m.file == file)
            .unwrap_or_else(|| panic!("no mapping of {file}: {:?}", p.mappings));
        (*id, m)
    };
    // app: its two mapped pieces, addresses as mapped.
    let (app, m) = by_file("/usr/bin/app");
    assert_eq!(
        (m.start, m.limit, m.offset, m.build_id.as_str()),
        (APP_BASE, APP_BASE + 0x11000, 0, "")
    );
    assert_eq!(m.has, [true, true, true, true]);
    // libc: no mapping record, laid out with offset 0 so that the address
    // minus the start is the file offset; its build id in hex.
    let (libc, m) = by_file("/usr/lib/libc.so.6");
    assert_eq!(m.build_id, "abcd01");
    assert_eq!(m.offset, 0);
    assert_eq!(m.has, [true, false, false, false]);
    let (kernel, m) = by_file("[kernel.kallsyms]");
    assert_eq!((m.start, m.limit), (SCHEDULE.addr, VFS_READ.addr + 1));
    let (pseudo, _) = by_file("[holdup]");
    assert_eq!(p.mappings.len(), 4, "{:?}", p.mappings);

    let location = |name: &str| {
        p.locations
            .values()
            .find(|l| l.2.starts_with(&format!("{name}@")))
            .unwrap_or_else(|| panic!("no location of {name}"))
    };
    let at = |l: &(u64, u64, String)| (l.0, l.1);
    assert_eq!(at(location("main")), (app, APP_BASE + MAIN.addr));
    assert_eq!(at(location("helper")), (app, APP_BASE + 0x10000));
    let lock = location("pthread_mutex_lock");
    assert_eq!(lock.0, libc);
    let libc_map = &p.mappings[&libc];
    assert_eq!(lock.1 - libc_map.start + libc_map.offset, LOCK.addr);
    assert!(libc_map.start <= lock.1 && lock.1 < libc_map.limit);
    assert_eq!(at(location("vfs_read")), (kernel, VFS_READ.addr));
    assert_eq!(location("[I] io wait").0, pseudo);
    for (id, l) in &p.locations {
        assert!(p.mappings.contains_key(&l.0), "location {id} {l:?}");
    }
}

fn go() -> PathBuf {
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

#[test]
fn go_tool_pprof_reads_the_profile() {
    let dir = setup("export_go_pprof");
    let prof = export(&dir, "pprof", "prof.pb.gz");
    let pprof = |args: &[&str]| {
        let o = std::process::Command::new(go())
            .args(["tool", "pprof"])
            .args(args)
            .arg(&prof)
            .bounded_output();
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            o.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        text
    };
    let top = pprof(&["-top"]);
    assert!(top.contains("Type: wall"), "{top}");
    assert!(top.contains("Total samples = 17ms"), "{top}");
    // Self time: helper 8 ms on-CPU, the io and lock leaves, 2 ms of steal;
    // helper also holds the lock wait and the steal below it (13 ms).
    for line in [
        "8ms 47.06% 47.06%       13ms 76.47%  helper (inline)",
        "0     0%   100%       17ms   100%  main",
        "4ms 23.53% 70.59%        4ms 23.53%  [I] io wait",
        "3ms 17.65% 88.24%        3ms 17.65%  [L] lock wait",
        "2ms 11.76%   100%        2ms 11.76%  [S] runqueue",
    ] {
        assert!(top.contains(line), "missing {line:?} in\n{top}");
    }
    let io = pprof(&["-top", "-sample_index=io_samples"]);
    assert!(io.contains("Total samples = 4 "), "{io}");
    let tags = pprof(&["-tags"]);
    for t in [
        "thread:",
        "tid:",
        "subclass:",
        "wait_reason:",
        "futex_wait",
        "vfs_read",
    ] {
        assert!(tags.contains(t), "missing {t} in\n{tags}");
    }
}

#[test]
fn speedscope_has_one_sampled_profile_per_thread_in_ms() {
    let dir = setup("export_speedscope");
    let path = export(&dir, "speedscope", "p.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(
        doc["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    let frames = doc["shared"]["frames"].as_array().unwrap();
    let profiles = doc["profiles"].as_array().unwrap();
    let names: Vec<&str> = profiles
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a-10", "b-11"]);
    for (p, total) in profiles.iter().zip([8.0, 9.0]) {
        assert_eq!(p["type"], "sampled");
        assert_eq!(p["unit"], "milliseconds");
        let weights: f64 = p["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_f64().unwrap())
            .sum();
        assert_eq!(weights, total, "{}", p["name"]);
        assert_eq!(p["endValue"].as_f64().unwrap(), total);
        assert_eq!(
            p["samples"].as_array().unwrap().len(),
            p["weights"].as_array().unwrap().len()
        );
    }
    // a's lock sample: root first, ending in the subclass frame.
    let stack: Vec<&str> = profiles[0]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_array().unwrap())
        .find(|s| s.len() == 7)
        .expect("the lock stack")
        .iter()
        .map(|i| {
            frames[i.as_u64().unwrap() as usize]["name"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(
        stack,
        [
            "main",
            "work",
            "helper",
            "pthread_mutex_lock",
            "futex_wait",
            "schedule",
            "[L] lock wait"
        ]
    );
}

/// Per thread of a Firefox profile: (name, tid, samples as (leaf frame
/// name, leaf category name, weight, CPU delta in µs, time in ms), markers
/// as (name, category name, start, end, waker, wait, runnable)).
type FirefoxThread = (
    String,
    u64,
    Vec<(String, String, i64, i64, f64)>,
    Vec<FirefoxMarker>,
);
type FirefoxMarker = (String, String, f64, f64, String, f64, f64);

fn firefox_threads(doc: &serde_json::Value) -> Vec<FirefoxThread> {
    let categories: Vec<&str> = doc["meta"]["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let u = |v: &serde_json::Value| v.as_u64().unwrap() as usize;
    let arr = |v: &serde_json::Value| v.as_array().unwrap().clone();
    doc["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let strings = arr(&t["stringArray"]);
            let string = |i: usize| strings[i].as_str().unwrap().to_string();
            let s = &t["samples"];
            let mut time = 0.0;
            let samples = (0..u(&s["length"]))
                .map(|i| {
                    time += s["timeDeltas"][i].as_f64().unwrap();
                    let frame = u(&t["stackTable"]["frame"][u(&s["stack"][i])]);
                    let func = u(&t["frameTable"]["func"][frame]);
                    let category = u(&t["frameTable"]["category"][frame]);
                    (
                        string(u(&t["funcTable"]["name"][func])),
                        categories[category].to_string(),
                        s["weight"][i].as_i64().unwrap(),
                        s["threadCPUDelta"][i].as_i64().unwrap(),
                        time,
                    )
                })
                .collect();
            let m = &t["markers"];
            let markers = (0..u(&m["length"]))
                .map(|i| {
                    let data = &m["data"][i];
                    (
                        string(u(&m["name"][i])),
                        categories[u(&m["category"][i])].to_string(),
                        m["startTime"][i].as_f64().unwrap(),
                        m["endTime"][i].as_f64().unwrap(),
                        string(u(&data["waker"])),
                        data["wait"].as_f64().unwrap(),
                        data["runnable"].as_f64().unwrap(),
                    )
                })
                .collect();
            (
                t["name"].as_str().unwrap().to_string(),
                // The format has tids as strings or numbers.
                t["tid"]
                    .as_u64()
                    .or_else(|| t["tid"].as_str()?.parse().ok())
                    .unwrap(),
                samples,
                markers,
            )
        })
        .collect()
}

#[test]
fn firefox_profile_has_a_track_per_thread_blocked_samples_and_wait_markers() {
    let dir = setup("export_firefox");
    let path = export(&dir, "firefox", "p.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(doc["meta"]["interval"], 1.0);
    assert_eq!(doc["meta"]["startTime"], 1_700_000_000_000.0);
    let categories: Vec<&str> = doc["meta"]["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for c in ["CPU", "I/O", "Lock", "Runqueue", "Blocked"] {
        assert!(categories.contains(&c), "{categories:?}");
    }
    let threads = firefox_threads(&doc);
    let names: Vec<(&str, u64)> = threads.iter().map(|t| (t.0.as_str(), t.1)).collect();
    assert_eq!(names, [("a", 10), ("b", 11)]);
    // Weights per leaf category are the trace's points; CPU deltas are the
    // on-CPU points only (1 ms = 1000 µs); blocked samples have none.
    for (t, want) in threads.iter().zip([
        vec![("CPU", 5), ("Lock", 3)],
        vec![("CPU", 3), ("I/O", 4), ("Runqueue", 2)],
    ]) {
        let mut got: BTreeMap<&str, i64> = BTreeMap::new();
        for s in &t.2 {
            *got.entry(s.1.as_str()).or_default() += s.2;
            let cpu = if s.1 == "CPU" { s.2 * 1000 } else { 0 };
            assert_eq!(s.3, cpu, "{} {s:?}", t.0);
        }
        let want: BTreeMap<&str, i64> = want.into_iter().collect();
        assert_eq!(got, want, "thread {}", t.0);
        let times: Vec<f64> = t.2.iter().map(|s| s.4).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    }
    let lock = threads[0].2.iter().find(|s| s.1 == "Lock").unwrap();
    assert_eq!((lock.0.as_str(), lock.2, lock.4), ("[L] lock wait", 3, 8.0));
    let io = threads[1].2.iter().find(|s| s.1 == "I/O").unwrap();
    assert_eq!(io.0, "[I] io wait");
    // Wait segments: ms since the trace start, waiting then runnable.
    let m = |n: &str, c: &str, s: f64, e: f64, w: &str, wait: f64, run: f64| {
        (n.to_string(), c.to_string(), s, e, w.to_string(), wait, run)
    };
    assert_eq!(
        threads[0].3,
        [m("Lock wait", "Lock", 5.0, 8.5, "b:11", 3.0, 0.5)]
    );
    assert_eq!(
        threads[1].3,
        [
            m("Runqueue wait", "Runqueue", 3.5, 4.0, "-", 0.0, 0.5),
            m("I/O wait", "I/O", 4.0, 7.0, "softirq:block", 3.0, 0.0)
        ]
    );
}

// ---- Perfetto, decoded with the field numbers of Perfetto's protos ----------

/// One track event: (time in ms since the trace start, thread, type, name,
/// arguments, flow ids, terminating flow ids, call stack root first).
#[derive(Debug, Clone)]
struct PerfettoEvent {
    ms: f64,
    tid: u64,
    kind: u64,
    name: String,
    args: BTreeMap<String, String>,
    flows: Vec<u64>,
    terminating: Vec<u64>,
    stack: Vec<String>,
}

/// Threads (tid → (pid, name)), processes (pid → name) and events in file order.
type PerfettoTrace = (
    BTreeMap<u64, (u64, String)>,
    BTreeMap<u64, String>,
    Vec<PerfettoEvent>,
);

fn decode_perfetto(path: &Path) -> PerfettoTrace {
    let raw = std::fs::read(path).unwrap();
    let text = |v: &Val| match v {
        Val::Bytes(b) => String::from_utf8(b.clone()).unwrap(),
        Val::Int(_) => panic!("not a string"),
    };
    let string = |fs: &[(u32, Val)], field: u32| {
        fs.iter()
            .find(|(f, _)| *f == field)
            .map(|(_, v)| text(v))
            .unwrap_or_default()
    };
    let mut threads = BTreeMap::new();
    let mut processes = BTreeMap::new();
    let mut uuids: BTreeMap<u64, u64> = BTreeMap::new();
    let mut names: BTreeMap<u64, String> = BTreeMap::new();
    // Event names, argument names, argument values.
    let mut strings: [BTreeMap<u64, String>; 3] = Default::default();
    let mut frames: BTreeMap<u64, String> = BTreeMap::new();
    let mut stacks: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut events = Vec::new();
    let packets = msgs(&fields(&raw), 1);
    assert_eq!(int(&packets[0], 13), 1, "the first packet clears the state");
    for p in &packets {
        assert_eq!(int(p, 10), 1, "one sequence");
        for td in msgs(p, 60) {
            if let Some(thd) = msgs(&td, 4).first() {
                threads.insert(int(thd, 2), (int(thd, 1), string(thd, 5)));
                uuids.insert(int(&td, 1), int(thd, 2));
            }
            if let Some(pd) = msgs(&td, 3).first() {
                processes.insert(int(pd, 1), string(pd, 6));
            }
        }
        for id in msgs(p, 12) {
            for (table, field) in strings.iter_mut().zip([2, 3, 29]) {
                for n in msgs(&id, field) {
                    table.insert(int(&n, 1), string(&n, 2));
                }
            }
            for n in msgs(&id, 5) {
                names.insert(int(&n, 1), string(&n, 2));
            }
            for f in msgs(&id, 6) {
                let name = names[&int(&f, 2)].clone();
                frames.insert(int(&f, 1), format!("{name}:{}", int(&f, 6)));
            }
            for c in msgs(&id, 7) {
                let stack = ints(&c, 2).iter().map(|i| frames[i].clone()).collect();
                stacks.insert(int(&c, 1), stack);
            }
        }
        for te in msgs(p, 11) {
            assert_eq!(int(p, 13), 2, "events use the interned state");
            let args = msgs(&te, 4)
                .iter()
                .map(|da| {
                    let v = if int(da, 3) != 0 {
                        int(da, 3).to_string()
                    } else {
                        strings[2][&int(da, 17)].clone()
                    };
                    (strings[1][&int(da, 1)].clone(), v)
                })
                .collect();
            let stack = match int(&te, 56) {
                0 => Vec::new(),
                iid => stacks[&iid].clone(),
            };
            events.push(PerfettoEvent {
                ms: (int(p, 8) - T0) as f64 / MS as f64,
                tid: uuids[&int(&te, 11)],
                kind: int(&te, 9),
                name: strings[0].get(&int(&te, 10)).cloned().unwrap_or_default(),
                args,
                flows: ints(&te, 47),
                terminating: ints(&te, 48),
                stack,
            });
        }
    }
    (threads, processes, events)
}

/// Per thread, its slices in order: (state, start ms, end ms, waker).
fn perfetto_states(events: &[PerfettoEvent]) -> BTreeMap<u64, Vec<(String, f64, f64, String)>> {
    let mut open: BTreeMap<u64, Vec<&PerfettoEvent>> = BTreeMap::new();
    let mut out: BTreeMap<u64, Vec<_>> = BTreeMap::new();
    for e in events {
        match e.kind {
            1 => open.entry(e.tid).or_default().push(e),
            2 => {
                let b = open.get_mut(&e.tid).and_then(|v| v.pop()).expect("begin");
                let waker = b.args.get("waker").cloned().unwrap_or_default();
                out.entry(e.tid)
                    .or_default()
                    .push((b.name.clone(), b.ms, e.ms, waker));
            }
            _ => {}
        }
    }
    assert!(open.values().all(Vec::is_empty), "unclosed slices");
    out
}

#[test]
fn perfetto_trace_has_thread_states_wakeup_flows_and_samples_with_stacks() {
    let dir = setup("export_perfetto");
    let (threads, processes, events) = decode_perfetto(&export(&dir, "perfetto", "t.pftrace"));
    assert_eq!(
        threads,
        BTreeMap::from([(10, (1, "a".to_string())), (11, (1, "b".to_string()))])
    );
    assert_eq!(processes.keys().collect::<Vec<_>>(), [&1]);
    let times: Vec<f64> = events.iter().map(|e| e.ms).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");

    // States: the segments, with Running in between, over the whole
    // 10 ms life of each thread.
    let st = |s: &str, a: f64, b: f64, w: &str| (s.to_string(), a, b, w.to_string());
    let states = perfetto_states(&events);
    assert_eq!(
        states[&10],
        [
            st("Running", 0.0, 5.0, ""),
            st("Sleeping", 5.0, 8.0, "b:11"),
            st("Runnable", 8.0, 8.5, "b:11"),
            st("Running", 8.5, 10.0, ""),
        ]
    );
    assert_eq!(
        states[&11],
        [
            st("Running", 0.0, 3.5, ""),
            st("Runnable", 3.5, 4.0, "-"),
            st("Uninterruptible (I/O)", 4.0, 7.0, "softirq:block"),
            st("Running", 7.0, 10.0, ""),
        ]
    );
    for (tid, slices) in &states {
        let total: f64 = slices.iter().map(|s| s.2 - s.1).sum();
        assert!((total - 10.0).abs() < 1e-9, "thread {tid}: {total} ms");
    }

    // The wakeup of a by b: a flow from an instant on b to a's Runnable slice.
    let source: Vec<&PerfettoEvent> = events.iter().filter(|e| !e.flows.is_empty()).collect();
    assert_eq!(source.len(), 1, "{source:?}");
    assert_eq!(
        (source[0].tid, source[0].ms, source[0].name.as_str()),
        (11, 8.0, "wakes a:10")
    );
    let sink: Vec<&PerfettoEvent> = events
        .iter()
        .filter(|e| e.terminating == source[0].flows)
        .collect();
    assert_eq!(sink.len(), 1);
    assert_eq!(
        (sink[0].tid, sink[0].ms, sink[0].name.as_str()),
        (10, 8.0, "Runnable")
    );

    // Samples: instants named by subclass; their points are the trace's.
    let mut points: BTreeMap<(u64, String), u64> = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind == 3 && e.flows.is_empty()) {
        *points.entry((e.tid, e.name.clone())).or_default() +=
            e.args["points"].parse::<u64>().unwrap();
        assert!(!e.stack.is_empty(), "{e:?}");
    }
    let want: BTreeMap<(u64, String), u64> = [
        ((10, "cpu"), 5),
        ((10, "lock"), 3),
        ((11, "cpu"), 3),
        ((11, "runqueue"), 2),
        ((11, "io"), 4),
    ]
    .into_iter()
    .map(|((t, n), p)| ((t, n.to_string()), p))
    .collect();
    assert_eq!(points, want);
    let lock = events.iter().find(|e| e.name == "lock").unwrap();
    assert_eq!(
        lock.stack,
        [
            "main:10",
            "work:20",
            "helper:30",
            "pthread_mutex_lock:0",
            "futex_wait:0",
            "schedule:0",
            "[L] lock wait:0"
        ]
    );
}

/// A readable listing of a decoded Perfetto trace, for the golden file.
fn perfetto_listing(path: &Path) -> String {
    let (threads, processes, events) = decode_perfetto(path);
    let mut out = format!("processes: {processes:?}\nthreads: {threads:?}\n");
    for e in events {
        out += &format!(
            "{:8.3} tid {} type {} {:?} {:?} flows {:?} terminating {:?} stack {:?}\n",
            e.ms, e.tid, e.kind, e.name, e.args, e.flows, e.terminating, e.stack
        );
    }
    for e in decode_ftrace(path) {
        out += &format!("{e:?}\n");
    }
    out
}

/// An ftrace event of a Perfetto trace, as ftrace_event.proto and
/// sched.proto define them (ms since the trace start).
#[derive(Debug, Clone, PartialEq)]
enum Ftrace {
    /// cpu, ms, (prev pid, prev comm, prev_state), (next pid, next comm).
    Switch(u64, f64, (u64, String, u64), (u64, String)),
    /// cpu, ms, waker pid, wakee pid, wakee comm, target cpu.
    Waking(u64, f64, u64, u64, String, u64),
}

fn decode_ftrace(path: &Path) -> Vec<Ftrace> {
    let raw = std::fs::read(path).unwrap();
    let text = |fs: &[(u32, Val)], field: u32| match fs.iter().find(|(f, _)| *f == field) {
        Some((_, Val::Bytes(b))) => String::from_utf8(b.clone()).unwrap(),
        _ => String::new(),
    };
    let mut out = Vec::new();
    for p in msgs(&fields(&raw), 1) {
        for bundle in msgs(&p, 1) {
            let cpu = int(&bundle, 1);
            for e in msgs(&bundle, 2) {
                let ms = (int(&e, 1) - T0) as f64 / MS as f64;
                for s in msgs(&e, 4) {
                    assert_eq!(int(&e, 2), int(&s, 2), "the switch runs in prev");
                    out.push(Ftrace::Switch(
                        cpu,
                        ms,
                        (int(&s, 2), text(&s, 1), int(&s, 4)),
                        (int(&s, 6), text(&s, 5)),
                    ));
                }
                for w in msgs(&e, 20) {
                    out.push(Ftrace::Waking(
                        cpu,
                        ms,
                        int(&e, 2),
                        int(&w, 2),
                        text(&w, 1),
                        int(&w, 5),
                    ));
                }
            }
        }
    }
    out
}

/// What trace_processor's thread_state table holds, replayed from the
/// scheduler events: per thread, (ms, state, waker) where the state is
/// Running, R, S or D and the waker is the waking event's pid.
fn replay_thread_states(events: &[Ftrace]) -> BTreeMap<u64, Vec<(f64, String, Option<u64>)>> {
    let mut states: BTreeMap<u64, Vec<(f64, String, Option<u64>)>> = BTreeMap::new();
    let letter = |state: u64| ["R", "S", "D"][state as usize].to_string();
    for e in events {
        match e {
            Ftrace::Switch(_, ms, (prev, _, state), (next, _)) => {
                states
                    .entry(*prev)
                    .or_default()
                    .push((*ms, letter(*state), None));
                states
                    .entry(*next)
                    .or_default()
                    .push((*ms, "Running".into(), None));
            }
            Ftrace::Waking(_, ms, waker, wakee, _, _) => {
                states
                    .entry(*wakee)
                    .or_default()
                    .push((*ms, "R".into(), Some(*waker)));
            }
        }
    }
    states.remove(&0);
    // Each CPU's bundle is in time order; trace_processor merges them.
    for s in states.values_mut() {
        s.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    states
}

#[test]
fn perfetto_scheduler_events_give_thread_states_and_cpu_switches() {
    let dir = setup("perfetto_sched");
    let events = decode_ftrace(&export(&dir, "perfetto", "t.pftrace"));
    let states = replay_thread_states(&events);
    let st = |ms: f64, s: &str, waker: Option<u64>| (ms, s.to_string(), waker);
    // a: lock wait [5, 8) woken by b, runnable until 8.5.
    assert_eq!(
        states[&10],
        [
            st(5.0, "S", None),
            st(8.0, "R", Some(11)),
            st(8.5, "Running", None)
        ]
    );
    // b: preempted over [3.5, 4), then io wait [4, 7) woken by a softirq
    // (pid 0), running again at 7.
    assert_eq!(
        states[&11],
        [
            st(3.5, "R", None),
            st(4.0, "Running", None),
            st(4.0, "D", None),
            st(7.0, "R", Some(0)),
            st(7.0, "Running", None)
        ]
    );
    // CPU 0's switches: each from the thread on it before to the next one.
    let switches: Vec<(f64, u64, u64)> = events
        .iter()
        .filter_map(|e| match e {
            Ftrace::Switch(0, ms, (prev, ..), (next, _)) => Some((*ms, *prev, *next)),
            Ftrace::Switch(..) => panic!("a switch off CPU 0: {e:?}"),
            Ftrace::Waking(..) => None,
        })
        .collect();
    assert_eq!(
        switches,
        [
            (3.5, 11, 0),
            (4.0, 0, 11),
            (4.0, 11, 0),
            (5.0, 10, 0),
            (7.0, 0, 11),
            (8.5, 0, 10)
        ]
    );
    assert!(events.iter().any(|e| matches!(
        e,
        Ftrace::Switch(_, _, (0, prev, _), (10, next)) if prev == "swapper/0" && next == "a"
    )));
}

/// Every format on the small trace, compared with golden files (pprof as
/// the listing of the decoder above); `HOLDUP_BLESS=1` rewrites them.
#[test]
fn exports_match_the_golden_files() {
    let dir = setup("export_golden");
    let golden = repo_root().join("crates/holdup-cli/tests/export_golden");
    let pprof = decode(&export(&dir, "pprof", "prof.pb.gz")).listing();
    let speedscope = std::fs::read_to_string(export(&dir, "speedscope", "p.json")).unwrap();
    let mut speedscope: serde_json::Value = serde_json::from_str(&speedscope).unwrap();
    // The version changes with every release; the golden file should not.
    speedscope["exporter"] = "holdup".into();
    let speedscope = serde_json::to_string_pretty(&speedscope).unwrap() + "\n";
    let firefox = std::fs::read_to_string(export(&dir, "firefox", "f.json")).unwrap();
    let firefox: serde_json::Value = serde_json::from_str(&firefox).unwrap();
    let firefox = serde_json::to_string_pretty(&firefox).unwrap() + "\n";
    let perfetto = perfetto_listing(&export(&dir, "perfetto", "t.pftrace"));
    let folded = std::fs::read_to_string(export(&dir, "folded", "p.folded")).unwrap();
    let script = holdup()
        .current_dir(&dir)
        .args(["script", "-i", "small.data"])
        .bounded_output();
    assert_eq!(
        folded.as_bytes(),
        script.stdout,
        "folded is holdup script's output"
    );
    for (got, file) in [
        (pprof, "small.pprof.txt"),
        (speedscope, "small.speedscope.json"),
        (firefox, "small.firefox.json"),
        (perfetto, "small.perfetto.txt"),
        (folded, "small.folded"),
    ] {
        assert_golden(&golden, file, &got);
    }
}

// ---- holdup html -------------------------------------------------------------

const HOSTILE: &str = "<script>alert(1)</script>";

/// A causal profile whose one line is named with markup.
const COZ: &str = "startup\ttime=1\n\
experiment\tselected=/src/x<i>.c:10\tspeedup=0.00\tduration=1000\tselected-samples=3\n\
throughput-point\tname=round\tdelta=10\n\
experiment\tselected=/src/x<i>.c:10\tspeedup=0.25\tduration=1000\tselected-samples=3\n\
throughput-point\tname=round\tdelta=15\n\
experiment\tselected=/src/x<i>.c:10\tspeedup=0.50\tduration=1000\tselected-samples=3\n\
throughput-point\tname=round\tdelta=20\n\
experiment\tselected=/src/x<i>.c:10\tspeedup=1.00\tduration=1000\tselected-samples=3\n\
throughput-point\tname=round\tdelta=20\n\
runtime\ttime=6\tprogress-points=1\texperiments=4\n";

fn chromium() -> &'static str {
    if std::process::Command::new("chromium")
        .arg("--version")
        .output()
        .is_ok()
    {
        return "chromium";
    }
    panic!("Chromium is needed to check holdup html (apt install chromium)");
}

#[test]
fn html_is_one_self_contained_page_with_every_name_escaped() {
    let dir = scratch("export_html");
    small_trace_named(&dir.join("small.data"), HOSTILE);
    std::fs::write(dir.join("profile.coz"), COZ).unwrap();
    let o = holdup()
        .current_dir(&dir)
        .args(["html", "-i", "small.data", "-o", "report.html"])
        .args(["--causal", "profile.coz"])
        .bounded_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();

    // Escaped everywhere: text, the flame graph's JSON, the causal target.
    assert!(!page.contains("alert(1)</script>"), "unescaped thread name");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(page.contains("\\u003cscript\\u003ealert(1)"));
    assert!(!page.contains("x<i>"));
    assert!(page.contains("x&lt;i&gt;.c:10"), "the causal target");
    assert_eq!(page.matches("<script").count(), 2, "data and code only");
    // Self-contained: nothing to fetch (SVG namespaces are names, not fetches).
    let offline = page
        .replace("xmlns=\"http://www.w3.org/2000/svg\"", "")
        .replace("xmlns:xlink=\"http://www.w3.org/1999/xlink\"", "");
    for net in ["http://", "https://", " src=", "<link", "@import"] {
        assert!(!offline.contains(net), "{net} in the page");
    }
    for id in ["flame-section", "report", "waitgraph", "causal", "filter"] {
        assert!(page.contains(&format!("id=\"{id}\"")), "no #{id}");
    }
    assert!(page.contains("<svg"), "the wait-for graph picture");
    assert!(page.contains("<path d=\"M"), "a causal curve");

    // In a real browser: the script runs to its end without console
    // messages and draws one box per flame graph node (17 here).
    let url = format!("file://{}", dir.join("report.html").display());
    let browse = |url: &str, extra: &[&str]| {
        let o = std::process::Command::new(chromium())
            .args(["--headless", "--no-sandbox", "--disable-gpu"])
            .args([
                "--enable-logging=stderr",
                "--v=0",
                "--window-size=1280,1600",
            ])
            .args(extra)
            .arg(url)
            .bounded_output();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        let console: Vec<&str> = err.lines().filter(|l| l.contains(":CONSOLE")).collect();
        assert!(console.is_empty(), "console messages: {console:#?}");
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let dom = browse(&url, &["--dump-dom"]);
    assert!(
        dom.contains("data-ready=\"1\""),
        "the script did not finish"
    );
    let boxes = dom.matches("<div class=\"c").count();
    assert_eq!(boxes, 17, "flame graph boxes");
    assert!(dom.contains(">&lt;script&gt;alert(1)&lt;/script&gt;-10<"));
    // A search from the link: helper holds 13 of the 17 points (a: 5 on
    // CPU and 3 lock-blocked below it; b: 3 and 2 of runqueue).
    let dom = browse(&format!("{url}#search=helper"), &["--dump-dom"]);
    assert_eq!(dom.matches(" hit\"").count(), 2, "the two helper boxes");
    assert!(dom.contains("matched 76.47% for \"helper\""), "{dom}");
    let shot = dir.join("report.png");
    browse(&url, &[&format!("--screenshot={}", shot.display())]);
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 10_000, "screenshot of {size} bytes");
}

/// What a `dot` that cannot be trusted prints: every way an SVG can run
/// code once pasted into a page, around a thread's name.
const HOSTILE_SVG: &str = r##"<?xml version="1.0"?>
<svg width="100pt" height="50pt" onload="document.documentElement.setAttribute('data-pwned','onload')">
<script>document.documentElement.setAttribute('data-pwned','script')</script>
<g class="node"><title>&lt;script&gt;alert(1)&lt;/script&gt;</title>
<a href="javascript:alert(1)"><text>link</text></a>
<foreignObject width="10" height="10"><img src="x" onerror="document.documentElement.setAttribute('data-pwned','img')"/></foreignObject>
<image href="x" onerror="document.documentElement.setAttribute('data-pwned','image')"/>
<text x="5" y="20" onmouseover="alert(1)">&lt;script&gt;alert(1)&lt;/script&gt;:10</text></g>
</svg>
"##;

/// `dot` is fed the graph on its standard input and its picture read from
/// its standard output (no file in a shared directory, where a planted
/// link would be written through), and the picture is rebuilt before it
/// is pasted: a `dot` that prints scripts, handlers and foreign objects
/// runs nothing in the browser.
#[test]
fn html_takes_dot_output_from_a_pipe_and_runs_nothing_in_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("export_html_dot");
    small_trace_named(&dir.join("small.data"), HOSTILE);
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::write(bin.join("picture.svg"), HOSTILE_SVG).unwrap();
    // Logs its arguments; prints the picture where it is told to.
    let fake = format!(
        "#!/bin/sh\necho \"$@\" > {log}\ncat > /dev/null\nout=/dev/stdout\n[ \"$2\" = -o ] && out=$3\ncat {svg} > \"$out\"\n",
        log = dir.join("dot.args").display(),
        svg = bin.join("picture.svg").display()
    );
    std::fs::write(bin.join("dot"), fake).unwrap();
    std::fs::set_permissions(bin.join("dot"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let o = holdup()
        .current_dir(&dir)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("TMPDIR", &tmp)
        .args(["html", "-i", "small.data", "-o", "report.html"])
        .bounded_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let args = std::fs::read_to_string(dir.join("dot.args")).unwrap();
    assert_eq!(args.trim(), "-Tsvg", "dot is given no file to write");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);

    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let wait = &page[page.find("id=\"waitgraph\"").unwrap()..];
    let wait = &wait[..wait.find("</div>").unwrap()];
    for gone in [
        "onload",
        "onerror",
        "onmouseover",
        "<script",
        "javascript",
        "foreignObject",
        "<a ",
        "<image",
        "data-pwned",
    ] {
        assert!(!wait.contains(gone), "{gone} in the wait-for graph");
    }
    assert!(
        wait.contains("<svg width=\"100pt\" height=\"50pt\">"),
        "{wait}"
    );
    assert!(
        wait.contains("<text x=\"5\" y=\"20\">&lt;script&gt;alert(1)&lt;/script&gt;:10</text>"),
        "{wait}"
    );
    assert_eq!(page.matches("<script").count(), 2, "data and code only");

    let o = std::process::Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(format!("file://{}", dir.join("report.html").display()))
        .bounded_output();
    let dom = String::from_utf8_lossy(&o.stdout);
    assert!(dom.contains("data-ready=\"1\""), "the page's script ran");
    assert!(!dom.contains("data-pwned"), "code from dot's output ran");
    assert!(!String::from_utf8_lossy(&o.stderr).contains(":CONSOLE"));
}

/// Without GraphViz the wait-for graph is its text rendering, escaped.
#[test]
fn html_without_graphviz_has_the_wait_for_graph_as_text() {
    let dir = scratch("export_html_text");
    small_trace_named(&dir.join("small.data"), HOSTILE);
    let o = holdup()
        .current_dir(&dir)
        .env("PATH", "/nonexistent")
        .args(["html", "-i", "small.data", "-o", "report.html"])
        .bounded_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(!page.contains("<svg"), "no picture without dot");
    let wait = &page[page.find("id=\"waitgraph\"").unwrap()..];
    let text = &wait[wait.find("<pre>").expect("the text rendering")..];
    assert!(
        text.contains("&lt;script&gt;alert(1)&lt;/script&gt;:10"),
        "{text}"
    );
    assert!(text.contains("b:11"), "{text}");
    assert!(!page.contains("alert(1)</script>"));
}

#[test]
fn html_bad_input_gives_one_clear_line() {
    let dir = setup("export_html_bad");
    std::fs::write(dir.join("junk.coz"), "not a profile\n").unwrap();
    fails_with(&dir, &["html", "-i", "missing.data"], "missing.data");
    fails_with(
        &dir,
        &["html", "-i", "small.data", "--causal", "none.coz"],
        "cannot open none.coz",
    );
    fails_with(
        &dir,
        &["html", "-i", "small.data", "-o", "no/such/dir/r.html"],
        "cannot write no/such/dir/r.html",
    );
    fails_with(
        &dir,
        &["html", "-i", "small.data", "--tid", "99"],
        "no samples match",
    );
    assert!(!dir.join("holdup.html").exists());
}

// ---- a recorded trace ---------------------------------------------------------

/// Sum of the slices named `state` on thread `tid`, in seconds, and their count.
fn state_seconds(events: &[PerfettoEvent], tid: u64, state: &str) -> (f64, usize) {
    let states = perfetto_states(events);
    let slices: Vec<_> = states[&tid].iter().filter(|s| s.0 == state).collect();
    (
        slices.iter().map(|s| s.2 - s.1).sum::<f64>() / 1e3,
        slices.len(),
    )
}

/// half_sleeper: one thread computes 10 ms then sleeps 10 ms, 60 times.
/// Every format of the recorded trace must tell the same, measured truth.
#[test]
#[ignore = "needs root and BPF"]
fn a_recorded_trace_reads_the_same_in_every_format() {
    let _serial = serial();
    let dir = scratch("export_recorded");
    let bin = workload("half_sleeper");
    let data = record(&dir, &[], &[bin.to_str().unwrap(), "60"]);
    let data = data.to_str().unwrap();
    let worker = |threads: &BTreeMap<u64, (u64, String)>| {
        let w: Vec<u64> = threads
            .iter()
            .filter(|(tid, (pid, name))| name == "half_sleeper" && *tid != pid)
            .map(|(tid, _)| *tid)
            .collect();
        assert_eq!(w.len(), 1, "{threads:?}");
        w[0]
    };
    let export = |format: &str, out: &str| {
        let path = dir.join(out);
        run_ok(&[
            "export",
            "-f",
            format,
            "-i",
            data,
            "-o",
            path.to_str().unwrap(),
        ]);
        eprintln!(
            "{format}: {} bytes",
            std::fs::metadata(&path).unwrap().len()
        );
        path
    };

    // Perfetto: 60 sleeps of 10 ms (plus timer slack) and 0.6 s running;
    // one Sleeping slice per sleep the trace holds.
    let (threads, _, events) = decode_perfetto(&export("perfetto", "t.pftrace"));
    let tid = worker(&threads);
    let trace = holdup_trace::Trace::load(Path::new(data)).unwrap();
    let sleeps_in_trace = trace
        .segments
        .iter()
        .filter(|s| u64::from(s.tid) == tid && s.class == Class::Other)
        .count();
    // Once, on a loaded machine, the trace held 59 of the 60 sleeps (and
    // said 0 lost events): that is the recorder's to explain, not the
    // exporters'.
    assert!((59..=63).contains(&sleeps_in_trace), "{sleeps_in_trace}");
    let (sleeping, n) = state_seconds(&events, tid, "Sleeping");
    assert_near("perfetto sleeping s", sleeping, 0.620, 0.07);
    assert_eq!(n, sleeps_in_trace, "Sleeping slices");
    let (running, _) = state_seconds(&events, tid, "Running");
    assert_near("perfetto running s", running, 0.600, 0.08);
    eprintln!("perfetto: sleeping {sleeping:.3} s in {n} slices, running {running:.3} s");
    // Its scheduler events tell the same: seconds in each state between
    // the thread's first and last switch.
    let states = replay_thread_states(&decode_ftrace(&dir.join("t.pftrace")));
    let mut in_state: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for w in states[&tid].windows(2) {
        let e = in_state.entry(w[0].1.as_str()).or_default();
        e.0 += (w[1].0 - w[0].0) / 1e3;
        e.1 += 1;
    }
    let s = in_state.get("S").copied().unwrap_or_default();
    assert_near("sched_switch sleeping s", s.0, 0.620, 0.07);
    assert_eq!(s.1, sleeps_in_trace, "switches out to sleep");
    let r = in_state.get("Running").copied().unwrap_or_default();
    assert_near("sched_switch running s", r.0, 0.600, 0.08);
    eprintln!("perfetto sched: {in_state:?}");

    // Firefox: CPU deltas add up to the thread's CPU time, blocked samples
    // are Blocked, one wait marker per sleep.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(export("firefox", "f.json")).unwrap())
            .unwrap();
    let ff = firefox_threads(&doc);
    let t = ff.iter().find(|t| t.1 == tid).expect("the worker's track");
    let cpu_s = t.2.iter().map(|s| s.3).sum::<i64>() as f64 / 1e6;
    assert_near("firefox cpu s", cpu_s, 0.600, 0.06);
    let period_ms = doc["meta"]["interval"].as_f64().unwrap();
    let blocked_s =
        t.2.iter()
            .filter(|s| s.1 == "Blocked")
            .map(|s| s.2)
            .sum::<i64>() as f64
            * period_ms
            / 1e3;
    assert_near("firefox blocked s", blocked_s, 0.620, 0.07);
    let sleeps = t.3.iter().filter(|m| m.1 == "Blocked").count();
    eprintln!("firefox: cpu {cpu_s:.3} s, blocked {blocked_s:.3} s, {sleeps} wait markers");
    assert_eq!(sleeps, sleeps_in_trace, "wait markers");

    // pprof: the same totals through go tool pprof.
    let prof = export("pprof", "p.pb.gz");
    let p = decode(&prof);
    assert_near("pprof cpu s", p.total("cpu") as f64 / 1e9, 0.600, 0.06);
    let top = std::process::Command::new(go())
        .args(["tool", "pprof", "-top", "-sample_index=blocked"])
        .arg(&prof)
        .bounded_output();
    assert!(top.status.success());
    assert!(String::from_utf8_lossy(&top.stdout).contains("half_sleeper"));

    // The page of a real trace loads without console messages.
    let page = dir.join("report.html");
    run_ok(&["html", "-i", data, "-o", page.to_str().unwrap()]);
    eprintln!("html: {} bytes", std::fs::metadata(&page).unwrap().len());
    let o = std::process::Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .bounded_output();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains(":CONSOLE"), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("data-ready=\"1\""));
}

/// Ping-pong over a Unix socket, 1000 rounds: the client waits for every
/// reply and the server wakes it, so at least 1000 arrows go from the
/// server to the client's Runnable slices, one for nearly every sleep.
#[test]
#[ignore = "needs root and BPF"]
fn perfetto_wakeup_arrows_go_from_the_server_to_the_client() {
    let _serial = serial();
    let dir = scratch("export_pingpong");
    let bin = workload("wg_pingpong");
    let data = record(
        &dir,
        &[],
        &[bin.to_str().unwrap(), "unix", "1000", "0.0002"],
    );
    let out = dir.join("t.pftrace");
    run_ok(&[
        "export",
        "-f",
        "perfetto",
        "-i",
        data.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let (threads, _, events) = decode_perfetto(&out);
    let tid = |name: &str| {
        threads
            .iter()
            .find(|(_, (_, n))| n == name)
            .map(|(t, _)| *t)
            .unwrap_or_else(|| panic!("no {name} in {threads:?}"))
    };
    let (client, server) = (tid("client"), tid("server"));
    let sources: HashMap<u64, u64> = events
        .iter()
        .flat_map(|e| e.flows.iter().map(move |f| (*f, e.tid)))
        .collect();
    let mut arrows: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    for e in &events {
        for f in &e.terminating {
            assert_eq!(e.name, "Runnable", "{e:?}");
            *arrows.entry((sources[f], e.tid)).or_default() += 1;
        }
    }
    let to_client = arrows.get(&(server, client)).copied().unwrap_or(0);
    let sleeps = perfetto_states(&events)[&client]
        .iter()
        .filter(|s| s.0 == "Sleeping")
        .count();
    eprintln!("{to_client} arrows server → client, {sleeps} client sleeps; all {arrows:?}");
    // Every round ends with the server's reply waking the client. The
    // client may sleep more than once a round (about twice, measured here);
    // the server still ends nearly every one of its sleeps.
    assert!(to_client >= 995, "{to_client} arrows server → client");
    assert!(
        to_client as f64 >= 0.95 * sleeps as f64,
        "{to_client} arrows for {sleeps} sleeps of the client; all {arrows:?}"
    );
}

fn fails_with(dir: &Path, args: &[&str], needle: &str) {
    let out = holdup().current_dir(dir).args(args).bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("holdup: error") || l.starts_with("error:"))
            .count(),
        1,
        "{err}"
    );
}

#[test]
fn bad_input_gives_one_clear_line() {
    let dir = setup("export_bad");
    std::fs::write(dir.join("junk.data"), b"this is not a trace").unwrap();
    fails_with(
        &dir,
        &["export", "-f", "svg", "-i", "small.data"],
        "invalid value 'svg'",
    );
    fails_with(
        &dir,
        &[
            "export",
            "-f",
            "pprof",
            "-i",
            "small.data",
            "-o",
            "no/such/dir/p.pb.gz",
        ],
        "cannot write no/such/dir/p.pb.gz",
    );
    fails_with(
        &dir,
        &["export", "-f", "pprof", "-i", "junk.data"],
        "junk.data",
    );
    fails_with(
        &dir,
        &["export", "-f", "speedscope", "-i", "missing.data"],
        "missing.data",
    );
    fails_with(
        &dir,
        &["export", "-f", "pprof", "-i", "small.data", "--tid", "99"],
        "no samples match",
    );
    assert!(
        !dir.join("holdup.pb.gz").exists(),
        "nothing written on error"
    );
}

// ---- holdup push, against a server in the test -----------------------------

/// One request as a server received it.
struct Received {
    /// `/path?query`, percent-decoded.
    target: String,
    /// Lower-case names.
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(if b[i] == b'+' { b' ' } else { b[i] });
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// Read one POST request from `conn`; None if the client went away first
/// (a TLS client that refused the certificate).
fn read_request<S: std::io::Read>(conn: S) -> Option<(std::io::BufReader<S>, Received)> {
    use std::io::{BufRead, BufReader, Read};
    let mut conn = BufReader::new(conn);
    let mut line = String::new();
    conn.read_line(&mut line).ok()?;
    if line.is_empty() {
        return None;
    }
    let target = line.split(' ').nth(1).unwrap_or("").to_string();
    assert!(line.starts_with("POST "), "{line}");
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        conn.read_line(&mut h).ok()?;
        if h.trim().is_empty() {
            break;
        }
        let (k, v) = h.split_once(':').unwrap();
        headers.insert(k.trim().to_lowercase(), v.trim().to_string());
    }
    let len: usize = headers["content-length"].parse().unwrap();
    let mut body = vec![0; len];
    conn.read_exact(&mut body).ok()?;
    let got = Received {
        target: percent_decode(&target),
        headers,
        body,
    };
    Some((conn, got))
}

/// An HTTP/1.1 server on 127.0.0.1 that answers the n-th request with
/// `answers[n]` (the last one repeats) and passes on what it received.
fn serve(answers: Vec<Vec<u8>>) -> (String, std::sync::mpsc::Receiver<Received>) {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for (n, conn) in listener.incoming().enumerate() {
            let Some((mut conn, got)) = read_request(conn.unwrap()) else {
                continue;
            };
            let answer = &answers[n.min(answers.len() - 1)];
            conn.get_mut().write_all(answer).unwrap();
            let _ = tx.send(got);
        }
    });
    (url, rx)
}

/// [`serve`] over TLS, with a certificate for 127.0.0.1 made here and
/// signed by itself; its PEM is written to `cert`.
fn serve_tls(answers: Vec<Vec<u8>>, cert: &Path) -> (String, std::sync::mpsc::Receiver<Received>) {
    use std::io::Write;
    use std::sync::Arc;
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    std::fs::write(cert, made.cert.pem()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(made.key_pair.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![made.cert.der().clone()], key)
            .unwrap(),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut n = 0;
        for tcp in listener.incoming() {
            let conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let tls = rustls::StreamOwned::new(conn, tcp.unwrap());
            let Some((mut conn, got)) = read_request(tls) else {
                continue;
            };
            let answer = &answers[n.min(answers.len() - 1)];
            n += 1;
            let tls = conn.get_mut();
            tls.write_all(answer).unwrap();
            tls.conn.send_close_notify();
            let _ = tls.flush();
            let _ = tx.send(got);
        }
    });
    (url, rx)
}

fn http_answer(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut a = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    a.extend_from_slice(body);
    a
}

/// A gRPC-web answer: an empty message, then the trailers with `status`.
fn grpc_web_answer(status: u32, message: &str) -> Vec<u8> {
    let trailers = format!("grpc-status:{status}\r\ngrpc-message:{message}\r\n");
    let mut body = vec![0, 0, 0, 0, 0, 0x80];
    body.extend_from_slice(&(trailers.len() as u32).to_be_bytes());
    body.extend_from_slice(trailers.as_bytes());
    http_answer("200 OK", "application/grpc-web+proto", &body)
}

/// A port on which nothing listens.
fn closed_port_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", l.local_addr().unwrap())
}

fn push(dir: &Path, url: &str, extra: &[&str]) -> std::process::Output {
    holdup()
        .current_dir(dir)
        .args(["push", "-i", "small.data", "--url", url])
        .args(extra)
        .bounded_output()
}

#[test]
fn push_to_pyroscope_sends_the_pprof_export_with_its_labels() {
    let dir = setup("push_pyroscope");
    let (url, rx) = serve(vec![http_answer("200 OK", "text/plain", b"")]);
    let out = push(&dir, &url, &["--service", "shop", "--label", "env=test"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("holdup: pushed small.data"), "{err}");
    let got = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
    let (path, query) = got.target.split_once('?').unwrap();
    assert_eq!(path, "/ingest");
    let query: BTreeMap<&str, &str> = query
        .split('&')
        .map(|kv| kv.split_once('=').unwrap())
        .collect();
    assert_eq!(query["name"], "shop{host=test-host,env=test}");
    assert_eq!(query["format"], "pprof");
    assert_eq!(query["from"], "1700000000");
    // The small trace ends 10 ms after it starts.
    assert_eq!(query["until"], "1700000001");
    assert_eq!(query["sampleRate"], "1000");
    assert_eq!(got.headers["content-type"], "application/octet-stream");
    let pushed = decode_gz(&got.body);
    let exported = decode(&export(&dir, "pprof", "p.pb.gz"));
    assert_eq!(pushed.listing(), exported.listing());
    assert_eq!(pushed.total("wall"), 17 * MS);
    let subclasses: std::collections::BTreeSet<&str> = pushed
        .samples
        .iter()
        .map(|s| s.2["subclass"].as_str())
        .collect();
    assert_eq!(
        subclasses.into_iter().collect::<Vec<_>>(),
        ["cpu", "io", "lock", "runqueue"]
    );
}

/// One series of Parca's `WriteRawRequest`: its labels and raw profiles.
type ParcaSeries = (Vec<(String, String)>, Vec<Vec<u8>>);

fn decode_write_raw(body: &[u8]) -> Vec<ParcaSeries> {
    assert_eq!(body[0], 0, "an uncompressed gRPC-web data frame");
    let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
    assert_eq!(body.len(), 5 + len, "one frame");
    let req = fields(&body[5..]);
    let text = |fs: &[(u32, Val)], f: u32| match &fs.iter().find(|(n, _)| *n == f).unwrap().1 {
        Val::Bytes(b) => String::from_utf8(b.clone()).unwrap(),
        Val::Int(_) => panic!("field {f} is not a string"),
    };
    msgs(&req, 2)
        .iter()
        .map(|series| {
            let labels = msgs(&series[..], 1)
                .iter()
                .flat_map(|set| msgs(set, 1))
                .map(|l| (text(&l, 1), text(&l, 2)))
                .collect();
            let raws = msgs(&series[..], 2)
                .iter()
                .map(
                    |sample| match &sample.iter().find(|(n, _)| *n == 1).unwrap().1 {
                        Val::Bytes(b) => b.clone(),
                        Val::Int(_) => panic!("raw_profile"),
                    },
                )
                .collect();
            (labels, raws)
        })
        .collect()
}

#[test]
fn push_to_parca_sends_write_raw_over_grpc_web() {
    let dir = setup("push_parca");
    let (url, rx) = serve(vec![grpc_web_answer(0, "")]);
    let out = push(
        &dir,
        &url,
        &[
            "--api", "parca", "--label", "env=test", "--label", "host=h1",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let got = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
    assert_eq!(
        got.target,
        "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw"
    );
    assert_eq!(got.headers["content-type"], "application/grpc-web+proto");
    let series = decode_write_raw(&got.body);
    assert_eq!(series.len(), 1);
    let (labels, raws) = &series[0];
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    // The small trace has no command: the service is named after holdup.
    assert_eq!(
        labels,
        [
            "__name__=holdup",
            "service_name=holdup",
            "host=h1",
            "env=test"
        ]
    );
    assert_eq!(raws.len(), 1);
    let exported = decode(&export(&dir, "pprof", "p.pb.gz"));
    assert_eq!(decode_gz(&raws[0]).listing(), exported.listing());
}

#[test]
fn push_retries_a_busy_server_and_gives_up_on_a_refusal() {
    let dir = setup("push_retry");
    // Pyroscope busy twice, then taking the profile.
    let busy = http_answer(
        "503 Service Unavailable",
        "text/plain",
        b"ingester not ready\n",
    );
    let (url, rx) = serve(vec![
        busy.clone(),
        busy,
        http_answer("200 OK", "text/plain", b""),
    ]);
    let out = push(&dir, &url, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("after 3 attempts"), "{err}");
    assert_eq!(rx.try_iter().count(), 3);

    // Parca unavailable, then taking it.
    let (url, rx) = serve(vec![
        grpc_web_answer(14, "starting"),
        grpc_web_answer(0, ""),
    ]);
    let out = push(&dir, &url, &["--api", "parca"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(rx.try_iter().count(), 2);

    // A refusal is not retried, and says why in one line.
    let (url, rx) = serve(vec![http_answer(
        "400 Bad Request",
        "text/plain",
        b"invalid profile\n",
    )]);
    fails_with(
        &dir,
        &["push", "-i", "small.data", "--url", &url],
        "HTTP 400 invalid profile",
    );
    assert_eq!(rx.try_iter().count(), 1);
    let (url, rx) = serve(vec![grpc_web_answer(3, "bad labels")]);
    fails_with(
        &dir,
        &["push", "-i", "small.data", "--url", &url, "--api", "parca"],
        "gRPC status 3 bad labels",
    );
    assert_eq!(rx.try_iter().count(), 1);
}

#[test]
fn push_to_a_server_that_is_down_fails_in_bounded_time_and_keeps_the_trace() {
    let dir = setup("push_down");
    let before = std::fs::read(dir.join("small.data")).unwrap();
    let url = closed_port_url();
    let start = std::time::Instant::now();
    fails_with(
        &dir,
        &[
            "push",
            "-i",
            "small.data",
            "--url",
            &url,
            "--push-timeout",
            "2",
        ],
        "gave up after",
    );
    let took = start.elapsed().as_secs_f64();
    assert!(
        (1.5..4.0).contains(&took),
        "took {took:.2} s for a 2 s budget"
    );
    assert_eq!(std::fs::read(dir.join("small.data")).unwrap(), before);
}

#[test]
fn push_bad_input_gives_one_clear_line() {
    let dir = setup("push_bad");
    let url = closed_port_url();
    fails_with(
        &dir,
        &["push", "-i", "small.data", "--url", &url, "--label", "1x=y"],
        "not a label name",
    );
    fails_with(
        &dir,
        &["push", "-i", "small.data", "--url", &url, "--label", "env"],
        "not NAME=VALUE",
    );
    fails_with(
        &dir,
        &[
            "push",
            "-i",
            "small.data",
            "--url",
            &url,
            "--service",
            "a,b",
        ],
        "cannot be a service name",
    );
    fails_with(
        &dir,
        &["push", "-i", "small.data", "--url", "ftp://example.com"],
        "not an http:// URL",
    );
    fails_with(
        &dir,
        &["push", "-i", "small.data", "--url", "pyroscope:4040"],
        "not an http:// URL",
    );
    fails_with(
        &dir,
        &["push", "-i", "missing.data", "--url", &url],
        "missing.data",
    );
    // record checks the URL before it runs anything.
    fails_with(
        &dir,
        &[
            "record",
            "-o",
            "r.data",
            "--push",
            "pyroscope:4040",
            "--",
            "true",
        ],
        "not an http:// URL",
    );
    assert!(!dir.join("r.data").exists());
}

/// Pushing over https to a server whose certificate is trusted through
/// `--ca-cert`, with each way of giving credentials: the server gets the
/// profile and the headers; no message shows a secret, not even one the
/// server echoes back.
#[test]
fn push_over_https_sends_credentials_and_never_shows_them() {
    let dir = setup("push_https");
    let cert = dir.join("ca.pem");
    let (url, rx) = serve_tls(vec![http_answer("200 OK", "text/plain", b"")], &cert);
    let ca = cert.to_str().unwrap();
    std::fs::write(dir.join("token"), "tok-3e1f9a\n").unwrap();
    let pushed = |args: &[&str], envs: &[(&str, &str)]| {
        let mut cmd = holdup();
        cmd.current_dir(&dir)
            .env_remove("HOLDUP_PUSH_TOKEN")
            .env_remove("HOLDUP_PUSH_BASIC_AUTH")
            .args(["push", "-i", "small.data", "--ca-cert", ca])
            .args(args);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let out = cmd.bounded_output();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{args:?}: {err}");
        let got = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        (got, err)
    };

    let (got, err) = pushed(
        &[
            "--url",
            &url,
            "--bearer-token-file",
            "token",
            "--tenant",
            "team-a",
            "--header",
            "X-Extra=42",
        ],
        &[],
    );
    assert!(got.target.starts_with("/ingest?"), "{}", got.target);
    assert_eq!(got.headers["authorization"], "Bearer tok-3e1f9a");
    assert_eq!(got.headers["x-scope-orgid"], "team-a");
    assert_eq!(got.headers["x-extra"], "42");
    let exported = decode(&export(&dir, "pprof", "p.pb.gz"));
    assert_eq!(decode_gz(&got.body).listing(), exported.listing());
    assert!(
        err.contains(&format!("to {url}")) && !err.contains("tok-3e1f9a"),
        "{err}"
    );

    // Written into the URL (percent-encoded), or from the environment.
    let with_user = url.replace("https://", "https://alice:pa%40ss-9x7@");
    let (got, err) = pushed(&["--url", &with_user], &[]);
    // base64("alice:pa@ss-9x7")
    assert_eq!(got.headers["authorization"], "Basic YWxpY2U6cGFAc3MtOXg3");
    assert!(err.contains(&format!("to {url}")), "{err}");
    assert!(!err.contains("alice") && !err.contains("9x7"), "{err}");
    let (got, _) = pushed(&["--url", &url], &[("HOLDUP_PUSH_TOKEN", "env-tok-77")]);
    assert_eq!(got.headers["authorization"], "Bearer env-tok-77");
    let (got, _) = pushed(
        &["--url", &url, "--basic-auth", "bob:hunter22"],
        &[("HOLDUP_PUSH_TOKEN", "env-tok-77")],
    );
    assert_eq!(got.headers["authorization"], "Basic Ym9iOmh1bnRlcjIy");

    // A server that echoes the token in its refusal: shown as ***.
    let (url, rx) = serve_tls(
        vec![http_answer(
            "401 Unauthorized",
            "text/plain",
            b"bad token tok-3e1f9a\n",
        )],
        &cert,
    );
    let ca = cert.to_str().unwrap();
    fails_with(
        &dir,
        &[
            "push",
            "-i",
            "small.data",
            "--url",
            &url,
            "--ca-cert",
            ca,
            "--bearer-token-file",
            "token",
        ],
        "HTTP 401 bad token ***",
    );
    assert_eq!(rx.try_iter().count(), 1);
    // Without the CA the certificate is refused at once, not retried.
    let start = std::time::Instant::now();
    let with_user = url.replace("https://", "https://alice:pw-5k2q@");
    let out = holdup()
        .current_dir(&dir)
        .args(["push", "-i", "small.data", "--url", &with_user])
        .args(["--push-timeout", "10"])
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("refused the profile") && err.contains("certificate"),
        "{err}"
    );
    assert!(!err.contains("pw-5k2q") && !err.contains("alice"), "{err}");
    assert!(start.elapsed().as_secs_f64() < 5.0, "retried: {err}");
    // A server that is down: the give-up line names the URL bare.
    let down = closed_port_url().replace("http://", "https://alice:pw-5k2q@");
    let out = holdup()
        .current_dir(&dir)
        .args([
            "push",
            "-i",
            "small.data",
            "--url",
            &down,
            "--push-timeout",
            "1",
        ])
        .bounded_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gave up after"), "{err}");
    assert!(!err.contains("pw-5k2q") && !err.contains("alice"), "{err}");
}

#[test]
fn push_credentials_given_twice_or_missing_are_one_clear_line() {
    let dir = setup("push_credentials_bad");
    let url = closed_port_url();
    let with_user = url.replace("http://", "http://u:sekrit-1@");
    for (args, says) in [
        (
            vec!["--url", &with_user, "--basic-auth", "v:sekrit-2"],
            "credentials given more than once",
        ),
        (
            vec!["--url", &url, "--bearer-token-file", "missing.token"],
            "cannot read missing.token",
        ),
        (
            vec!["--url", &url, "--basic-auth", "no-colon"],
            "not USER:PASS",
        ),
        (
            vec!["--url", &url, "--ca-cert", "small.data"],
            "for https:// URLs",
        ),
        (
            vec![
                "--url",
                &url.replace("http:", "https:"),
                "--ca-cert",
                "small.data",
            ],
            "no PEM certificate",
        ),
        (
            vec!["--url", &url, "--header", "X Y=1"],
            "not a header name",
        ),
    ] {
        let mut all = vec!["push", "-i", "small.data"];
        all.extend(args);
        let out = holdup().current_dir(&dir).args(&all).bounded_output();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {err}");
        assert!(err.contains(says), "{all:?}: {err}");
        assert!(!err.contains("sekrit"), "{all:?}: {err}");
    }
    // record checks them before it runs anything.
    fails_with(
        &dir,
        &[
            "record",
            "-o",
            "r.data",
            "--push",
            &with_user,
            "--bearer-token",
            "sekrit-3",
            "--",
            "true",
        ],
        "credentials given more than once",
    );
    assert!(!dir.join("r.data").exists());
}

#[test]
#[ignore = "needs root and BPF"]
fn record_push_sends_the_profile_and_survives_a_server_that_is_down() {
    let _serial = serial();
    let dir = scratch("push_record");
    let bin = workload("half_sleeper");
    let bin = bin.to_str().unwrap();
    let data = dir.join("holdup.data");
    let data = data.to_str().unwrap();
    let record = |url: &str, code: &str| {
        // A shell that runs the workload and exits with `code`.
        let script = format!("{bin} 30; exit {code}");
        holdup()
            .args(["record", "-o", data, "--push", url, "--push-timeout", "2"])
            .args(["--service", "half", "--", "sh", "-c", &script])
            .bounded_output()
    };

    // Server up: the pushed profile is the trace's pprof export.
    let (url, rx) = serve(vec![http_answer("200 OK", "text/plain", b"")]);
    let out = record(&url, "3");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "the command's exit code: {err}");
    assert!(err.contains("holdup: pushed"), "{err}");
    let got = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
    assert!(got.target.contains("name=half{host="), "{}", got.target);
    let exported = dir.join("p.pb.gz");
    run_ok(&[
        "export",
        "-f",
        "pprof",
        "-i",
        data,
        "-o",
        exported.to_str().unwrap(),
    ]);
    let pushed = decode_gz(&got.body);
    assert_eq!(pushed.listing(), decode(&exported).listing());
    // 30 rounds of 10 ms on the CPU and 10 ms asleep in half_sleeper().
    let in_worker_ms = |ty: &str| {
        let i = pushed.types.iter().position(|(t, _)| t == ty).unwrap();
        let ns: u64 = pushed
            .samples
            .iter()
            .filter(|s| s.1.iter().any(|f| f.contains("half_sleeper@")))
            .map(|s| s.0[i])
            .sum();
        ns as f64 / 1e6
    };
    assert_near(
        "pushed on-CPU ms in half_sleeper()",
        in_worker_ms("cpu"),
        300.0,
        45.0,
    );
    assert_near(
        "pushed asleep ms in half_sleeper()",
        in_worker_ms("blocked"),
        300.0,
        60.0,
    );

    // Server down: one warning, the trace is kept whole, exit code 0.
    let url = closed_port_url();
    let start = std::time::Instant::now();
    let out = record(&url, "0");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("could not push"))
        .collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("the trace is kept in"), "{err}");
    assert!(start.elapsed().as_secs_f64() < 10.0, "{err}");
    let r = report(Path::new(data));
    let period_ms = r["period_ns"].as_f64().unwrap() / 1e6;
    let cpu: f64 = threads(&r)
        .iter()
        .filter(|t| t["comm"] == "half_sleeper")
        .map(|t| t["samples"]["cpu"].as_f64().unwrap_or(0.0) * period_ms)
        .sum();
    assert!(cpu > 150.0, "the trace holds the run: {cpu} ms on the CPU");
}
