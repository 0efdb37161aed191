//! The renderers' outputs on synthetic traces whose answers are known by
//! construction, compared with golden files (`HOLDUP_BLESS=1` rewrites
//! them). The construction's numbers are asserted first, so a blessed file
//! cannot hide a wrong answer. No root, no BPF, no clang.

mod golden;

mod syscalls {
    use super::golden::{assert_golden, dir};
    use holdup_analysis::syscalls::{analyze, Options};
    use holdup_trace::synth;

    /// `holdup syscalls` as text and as `holdup.syscalls/1`.
    #[test]
    fn text_and_json_match_the_golden_files() {
        let trace = synth::syscalls::overlapping_reads().trace(0);
        let r = analyze(
            &trace,
            &Options {
                pids: Vec::new(),
                slowest: 2,
            },
        )
        .unwrap();
        let srv = &r.processes[0];
        let read = srv.calls.iter().find(|c| c.name == "read").unwrap();
        assert_eq!((read.count, read.total_ns), (40, 36_000_000));
        assert_eq!(read.blocked_ns.other, 20_000_000);
        assert_eq!(r.slowest.len(), 2);
        let mut text = Vec::new();
        holdup_render::syscalls::render(&mut text, &r).unwrap();
        let mut json = Vec::new();
        holdup_render::syscalls::write_json(&r, &mut json).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["schema"], "holdup.syscalls/1");
        json.push(b'\n');
        let d = dir("syscalls");
        assert_golden(&d, "overlapping.txt", &String::from_utf8(text).unwrap());
        assert_golden(&d, "overlapping.json", &String::from_utf8(json).unwrap());
    }
}
