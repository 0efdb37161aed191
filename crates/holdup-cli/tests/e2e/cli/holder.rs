//! `report --critical-path` and `flame --critical-path` on hand-made
//! traces: the critical path of the small trace, and a trace recorded
//! without wait segments, which cannot be followed and says so.

use crate::support::small_trace::*;
use crate::support::*;
use holdup_trace::Class;

#[test]
fn the_critical_path_of_the_small_trace_keeps_every_point() {
    let dir = scratch("holder_cli_small");
    let data = dir.join("small.data");
    small_trace(&data);
    let data = data.to_str().unwrap();
    let cp = critical_path(data, &["--tid", "11"]);
    let b = &cp["threads"][0];
    // b: 3 on-CPU points, 4 of I/O (its sample names no waker), 2 of steal.
    assert_eq!(b["samples"], 9.0, "{b}");
    let io = b["activities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["class"] == "io")
        .unwrap();
    assert_eq!(io["samples"], 4.0, "{io}");
    assert_eq!(io["via"].as_array().unwrap().len(), 0, "{io}");
    let text =
        String::from_utf8(run_ok(&["report", "-i", data, "--critical-path"]).stdout).unwrap();
    assert!(text.contains("# b:11 (pid 1): 9 samples"), "{text}");
    assert!(critical_flame(&dir, data, &[]).contains("[I] io wait"));
}

#[test]
fn a_trace_without_wait_segments_is_refused_in_one_line() {
    let dir = scratch("holder_cli_nosegments");
    let data = dir.join("noseg.data");
    let mut b = holdup_trace::synth::TraceBuilder::new(2.0);
    b.sample(1.0, 10, Class::Cpu, 1, 0, 0);
    b.write(&data, &b.header(), 0).unwrap();
    for args in [
        vec!["report", "--critical-path"],
        vec!["flame", "--critical-path", "-o", "-"],
    ] {
        let mut cmd = holdup();
        cmd.args(&args).args(["-i", data.to_str().unwrap()]);
        let out = cmd.bounded_output();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err.lines().last().unwrap_or_default();
        assert!(line.contains("without wait segments"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
