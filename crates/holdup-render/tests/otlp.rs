//! OTLP profiles (`holdup export --format otlp`, `holdup agent`) on the
//! small trace (holdup_trace::synth::small), whose answer is known by
//! construction, decoded here by field number from opentelemetry-proto's
//! definitions, every dictionary reference checked. Against the library:
//! no root, no BPF.

mod decode;

use decode::otlp::*;
use holdup_analysis::profile::Filter;
use holdup_render::export::otlp::{self, Value};
use holdup_render::export::{self, StackSample};
use holdup_trace::synth::small::*;
use holdup_trace::synth::MS;
use holdup_trace::{features, Class, Trace, Waker};
use std::collections::HashMap;

/// The small trace, its lock wait woken by thread b (11).
fn small() -> Trace {
    let mut trace = trace("a").trace(&header(), features::SEGMENTS);
    for s in &mut trace.samples {
        if s.class == Class::Lock {
            s.waker = Waker::Thread(11);
        }
    }
    trace
}

fn encode(trace: &Trace, samples: &[StackSample], common: &[(String, Value)]) -> Vec<u8> {
    encode_sampled(trace, samples, common, 1.0)
}

fn encode_sampled(
    trace: &Trace,
    samples: &[StackSample],
    common: &[(String, Value)],
    stack_sampling_ratio: f64,
) -> Vec<u8> {
    let mut processes = HashMap::new();
    processes.insert(
        1,
        vec![
            (
                "process.executable.name".to_string(),
                Value::Str("app".into()),
            ),
            ("container.id".to_string(), Value::Str("c0ffee".into())),
        ],
    );
    otlp::encode(&otlp::Request {
        trace,
        samples,
        start_unix_ns: trace.header.start_unix_ns,
        duration_ns: trace.duration_ns(),
        processes: &processes,
        common,
        stack_sampling_ratio,
    })
}

#[test]
fn a_request_holds_on_cpu_and_blocked_profiles_per_process() {
    let trace = small();
    let samples = export::stack_samples(&trace, &Filter::default());
    let common = [
        (
            "deployment.environment".to_string(),
            Value::Str("test".into()),
        ),
        // The process's own attribute wins over a common one.
        ("container.id".to_string(), Value::Str("other".into())),
    ];
    let req = decode_request(&encode(&trace, &samples, &common));
    assert_eq!(req.resources.len(), 1, "one process");
    let r = &req.resources[0];
    let attr = |k: &str| r.attrs.get(k).map(String::as_str);
    assert_eq!(attr("host.name"), Some("test-host"));
    assert_eq!(attr("process.pid"), Some("1"));
    assert_eq!(attr("process.executable.name"), Some("app"));
    assert_eq!(attr("container.id"), Some("c0ffee"));
    assert_eq!(attr("deployment.environment"), Some("test"));
    assert_eq!(r.scope.0, "holdup");

    let cpu = r.profile("samples").expect("an on-CPU profile");
    assert_eq!(cpu.sample_type, ("samples".into(), "count".into()));
    assert_eq!(cpu.period_type, ("cpu".into(), "nanoseconds".into()));
    assert_eq!(cpu.period, MS);
    assert_eq!(cpu.time_unix_nano, 1_700_000_000 * 1_000_000_000);
    assert_eq!(cpu.duration_nano, 10 * MS);
    assert_eq!(cpu.total(), 8, "on-CPU sampling points");
    assert_eq!(
        (
            cpu.total_with("thread.name", "a"),
            cpu.total_with("thread.name", "b")
        ),
        (5, 3)
    );
    let a = cpu.first_with("thread.name", "a");
    assert_eq!(a.attrs["thread.id"], "10");
    assert_eq!(a.stack, ["helper@app.c:30+work@app.c:20", "main@app.c:10"]);
    assert_eq!(a.frame_types, ["native", "native"]);
    assert!(
        cpu.samples
            .iter()
            .all(|s| !s.attrs.contains_key("holdup.blocked.subclass")),
        "on-CPU samples have no subclass"
    );

    let off = r.profile("off_cpu").expect("a blocked profile");
    assert_eq!(off.sample_type, ("off_cpu".into(), "nanoseconds".into()));
    assert_eq!(off.period, MS);
    let subclass = |c: &str| off.total_with("holdup.blocked.subclass", c);
    assert_eq!(
        (subclass("io"), subclass("lock"), subclass("sched")),
        (4 * MS, 3 * MS, 2 * MS)
    );
    assert_eq!(off.total(), 9 * MS, "every blocked point, in ns");
    let lock = off.first_with("holdup.blocked.subclass", "lock");
    assert_eq!(lock.attrs["holdup.wait.reason"], "futex_wait");
    assert_eq!(lock.attrs["holdup.waker"], "b:11");
    assert_eq!(lock.attrs["holdup.waker.thread.id"], "11");
    assert_eq!(
        lock.stack,
        [
            "schedule@[kernel.kallsyms]:0",
            "futex_wait@[kernel.kallsyms]:0",
            "pthread_mutex_lock@libc.so.6:0",
            "helper@app.c:30+work@app.c:20",
            "main@app.c:10"
        ],
        "leaf first, no pseudo frame: the subclass is an attribute"
    );
    assert_eq!(
        lock.frame_types,
        ["kernel", "kernel", "native", "native", "native"]
    );
    let io = off.first_with("holdup.blocked.subclass", "io");
    assert_eq!(io.attrs["holdup.wait.reason"], "vfs_read");
    assert!(!io.attrs.contains_key("holdup.waker"), "no waker recorded");
    // Steal time: runqueue points with the running stack, no wait reason.
    let steal = off.first_with("holdup.blocked.subclass", "sched");
    assert!(!steal.attrs.contains_key("holdup.wait.reason"));
}

#[test]
fn locations_are_placed_in_the_mapping_of_their_file() {
    let trace = small();
    let samples = export::stack_samples(&trace, &Filter::default());
    let req = decode_request(&encode(&trace, &samples, &[]));
    let files: Vec<&str> = req.mappings.iter().map(|m| m.file.as_str()).collect();
    assert!(
        files.contains(&"/usr/bin/app") && files.contains(&"/usr/lib/libc.so.6"),
        "{files:?}"
    );
    assert!(!files.contains(&"[holdup]"), "no pseudo mapping: {files:?}");
    let libc = req
        .mappings
        .iter()
        .find(|m| m.file == "/usr/lib/libc.so.6")
        .unwrap();
    assert_eq!(libc.attrs["process.executable.build_id.gnu"], "abcd01");
    // WORK is file offset 0x200: in the second mapped piece of app.
    let app = req
        .mappings
        .iter()
        .position(|m| m.file == "/usr/bin/app")
        .unwrap();
    assert!(
        req.locations.contains(&(app, APP_BASE + 0x10000)),
        "{:?}",
        req.locations
    );
}

#[test]
fn a_request_too_large_is_split_by_process_and_capped_with_the_loss_counted() {
    // Two processes: the small trace's process 1 and a copy as process 2.
    let trace = small();
    let mut samples = export::stack_samples(&trace, &Filter::default());
    let copies: Vec<StackSample> = samples
        .iter()
        .map(|s| StackSample {
            pid: 2,
            ..s.clone()
        })
        .collect();
    samples.extend(copies);
    let req = otlp::Request {
        trace: &trace,
        samples: &samples,
        start_unix_ns: 0,
        duration_ns: 1,
        processes: &HashMap::new(),
        common: &[],
        stack_sampling_ratio: 1.0,
    };
    let whole = otlp::encode(&req).len();
    let fits = otlp::encode_capped(&req, whole);
    assert_eq!((fits.requests.len(), fits.dropped_samples), (1, 0));

    // Room for one process per request: two requests, nothing lost.
    let one = otlp::encode(&otlp::Request {
        samples: &samples[..samples.len() / 2],
        ..req
    })
    .len();
    let split = otlp::encode_capped(&req, one);
    assert_eq!((split.requests.len(), split.dropped_samples), (2, 0));
    let pids: Vec<String> = split
        .requests
        .iter()
        .map(|r| decode_request(r).resources[0].attrs["process.pid"].clone())
        .collect();
    assert_eq!(pids, ["1", "2"]);
    for r in &split.requests {
        assert!(r.len() <= one);
    }

    // Less than one process: each keeps its heaviest samples; the rest are
    // counted, and kept plus dropped is everything.
    let capped = otlp::encode_capped(&req, one * 2 / 3);
    assert_eq!(capped.requests.len(), 2);
    assert!(capped.dropped_samples > 0);
    let kept: u64 = capped
        .requests
        .iter()
        .flat_map(|r| decode_request(r).resources)
        .flat_map(|r| r.profiles)
        .flat_map(|p| {
            let per_point = if p.sample_type.0 == "samples" { 1 } else { MS };
            p.samples
                .into_iter()
                .map(move |s| s.values.iter().sum::<u64>() / per_point)
        })
        .sum();
    assert_eq!(
        kept + capped.dropped_points,
        2 * 17,
        "every point kept or counted"
    );
    for r in &capped.requests {
        assert!(r.len() <= one * 2 / 3);
    }
}

#[test]
fn a_blocked_profile_says_its_stack_sampling_ratio() {
    let trace = small();
    let samples = export::stack_samples(&trace, &Filter::default());
    let ratio = |r: f64| {
        let req = decode_request(&encode_sampled(&trace, &samples, &[], r));
        let res = &req.resources[0];
        assert!(
            res.profile("samples").unwrap().attrs.is_empty(),
            "on-CPU stacks are not sampled: no ratio"
        );
        res.profile("off_cpu").unwrap().attrs[otlp::STACK_SAMPLING_RATIO].clone()
    };
    assert_eq!(ratio(1.0), "1", "every stack taken");
    assert_eq!(ratio(2.5), "2.5");
}
