//! `holdup export`'s formats on the small trace (holdup_trace::synth::small),
//! whose answer is known by construction: pprof decoded here from
//! profile.proto and opened by `go tool pprof`, the Firefox Profiler's JSON,
//! a Perfetto trace decoded here from Perfetto's protos, speedscope's JSON,
//! folded stacks; golden files (`HOLDUP_BLESS=1` rewrites them). Against the
//! library: no root, no BPF, no clang.

mod decode;
mod golden;

use decode::firefox::*;
use decode::perfetto::*;
use decode::pprof::*;
use golden::{assert_golden, dir as golden_dir};
use holdup_analysis::folded::{self, FoldOptions};
use holdup_analysis::profile::Filter;
use holdup_render::export::{self, firefox, perfetto, pprof, speedscope};
use holdup_testkit::scratch;
use holdup_trace::features;
use holdup_trace::synth::small::*;
use holdup_trace::synth::MS;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `holdup export -f FORMAT -i small.data -o OUT` in `dir`, through the
/// library: the file written.
fn export(dir: &Path, format: &str, out: &str) -> PathBuf {
    let trace = trace("a").trace(&header(), features::SEGMENTS);
    let filter = Filter::default();
    let samples = export::stack_samples(&trace, &filter);
    let name = "small.data";
    let mut bytes = Vec::new();
    match format {
        "pprof" => pprof::write(&trace, &samples, &mut bytes).unwrap(),
        "firefox" => {
            let profile = firefox::profile(&trace, &samples, &filter, name);
            serde_json::to_writer(&mut bytes, &profile).unwrap();
            bytes.push(b'\n');
        }
        "perfetto" => bytes = perfetto::encode(&trace, &samples, &filter),
        "speedscope" => {
            let doc = speedscope::document(&trace, &samples, name);
            serde_json::to_writer(&mut bytes, &doc).unwrap();
            bytes.push(b'\n');
        }
        "folded" => {
            let stacks = folded::folded(&trace, &FoldOptions::default());
            folded::write_folded(&mut bytes, &stacks).unwrap();
        }
        f => panic!("no format {f}"),
    }
    let path = dir.join(out);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn pprof_holds_every_subclass_with_labels_and_inlined_lines() {
    let dir = scratch("export_pprof");
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
    let dir = scratch("export_pprof_mappings");
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

#[test]
fn go_tool_pprof_reads_the_profile() {
    let dir = scratch("export_go_pprof");
    let prof = export(&dir, "pprof", "prof.pb.gz");
    let pprof = |args: &[&str]| {
        let o = std::process::Command::new(go())
            .args(["tool", "pprof"])
            .args(args)
            .arg(&prof)
            .output()
            .unwrap();
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
    let dir = scratch("export_speedscope");
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

#[test]
fn firefox_profile_has_a_track_per_thread_blocked_samples_and_wait_markers() {
    let dir = scratch("export_firefox");
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

#[test]
fn perfetto_trace_has_thread_states_wakeup_flows_and_samples_with_stacks() {
    let dir = scratch("export_perfetto");
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

#[test]
fn perfetto_scheduler_events_give_thread_states_and_cpu_switches() {
    let dir = scratch("perfetto_sched");
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
    let dir = scratch("export_golden");
    let golden = golden_dir("export");
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
    // `holdup script`'s output, pinned by the report's golden files.
    let script = std::fs::read_to_string(golden_dir("report").join("small.script.folded")).unwrap();
    assert_eq!(folded, script, "folded is holdup script's output");
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
