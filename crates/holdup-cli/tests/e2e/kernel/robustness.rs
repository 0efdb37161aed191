//! Recording under duress: missing programs and pids, crashes and exit codes
//! passed through, cut traces, readers that go away, SIGKILL and Ctrl-C, and
//! lost events counted and shown.

use crate::support::robustness::*;
use crate::support::*;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A small valid trace recorded once (needs root).
fn recorded(dir: &std::path::Path) -> std::path::PathBuf {
    record(
        dir,
        &[],
        &[workload("half_sleeper").to_str().unwrap(), "20"],
    )
}

#[test]
#[ignore = "needs root and BPF"]
fn missing_program_and_missing_pid() {
    let _serial = serial();
    let dir = scratch("missing");
    let data = dir.join("x.data");
    let out = holdup_out(&[
        "record",
        "-o",
        data.to_str().unwrap(),
        "--",
        "/no/such/program",
    ]);
    let err = one_line_error(&out);
    assert!(err.contains("cannot run '/no/such/program'"), "{err}");
    assert!(
        !data.exists(),
        "no trace is left behind for a command that never ran"
    );
    let err = one_line_error(&holdup_out(&[
        "record",
        "-o",
        data.to_str().unwrap(),
        "-p",
        "999999999",
    ]));
    assert!(err.contains("no process with pid 999999999"), "{err}");
}

#[test]
#[ignore = "needs root and BPF"]
fn exit_codes_and_crashes_pass_through_with_a_trace() {
    let _serial = serial();
    let dir = scratch("exits");
    let data = dir.join("x.data");
    let d = data.to_str().unwrap();
    let out = holdup_out(&["record", "-o", d, "--", "sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[ holdup record:"));
    // A program that crashes (after ~50 ms of work, so that it has
    // samples): the trace is kept, the signal is said and passed on.
    let crash = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; kill -SEGV $$";
    let out = holdup_out(&["record", "-o", d, "--", "sh", "-c", crash]);
    assert_eq!(out.status.code(), Some(128 + 11));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("killed by") && !err.contains("panicked"),
        "{err}"
    );
    run_ok(&["report", "-i", d]);
    // A program that exits at once still gives a readable trace, and a
    // report says what it has: samples, or one line on why it has none.
    let out = holdup_out(&["record", "-o", d, "--", "true"]);
    assert!(out.status.success());
    let out = holdup_out(&["report", "-i", d]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        out.status.success() || err.contains("less than one sampling period"),
        "{err}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn a_cut_trace_keeps_its_complete_chunks() {
    let _serial = serial();
    let dir = scratch("cut");
    let data = recorded(&dir);
    let bytes = std::fs::read(&data).unwrap();
    let full = json(&["report", "--json", "-i", data.to_str().unwrap()]);
    let cut = dir.join("cut.data");
    // Cut inside the header: an error. Cut anywhere after: a report or a
    // clear error, never a panic.
    for at in [10, bytes.len() / 4, bytes.len() / 2, bytes.len() - 3] {
        std::fs::write(&cut, &bytes[..at]).unwrap();
        let out = holdup_out(&["report", "--json", "-i", cut.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "cut at {at}: {err}");
        if out.status.success() {
            assert!(
                err.contains("warning"),
                "a cut trace is reported as such: {err}"
            );
            let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(r["schema"], "holdup.report/1");
        } else {
            one_line_error(&out);
        }
    }
    assert_eq!(full["schema"], "holdup.report/1");
}

#[test]
#[ignore = "needs root and BPF"]
fn a_reader_that_goes_away_early_is_no_error() {
    let _serial = serial();
    let dir = scratch("pipe");
    let data = recorded(&dir);
    // `holdup report | head -1`: the reader is gone. Here it is gone
    // before the first write, so that every write fails.
    for cmd in ["report", "script", "waitgraph"] {
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        unsafe { libc::close(fds[0]) };
        let write_end =
            unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
        let child = holdup()
            .args([cmd, "-i", data.to_str().unwrap()])
            .stdout(Stdio::from(write_end))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "holdup {cmd}: {:?} {err}", out.status);
        assert!(!err.contains("error"), "holdup {cmd}: {err}");
    }
}

/// `holdup record -o DATA -- half_sleeper ROUNDS`, to be stopped early.
fn record_half_sleeper(
    bin: &std::path::Path,
    data: &std::path::Path,
    rounds: &str,
) -> std::process::Command {
    let mut cmd = holdup();
    cmd.args(["record", "-o", data.to_str().unwrap(), "--"])
        .arg(bin)
        .arg(rounds);
    cmd
}

#[test]
#[ignore = "needs root and BPF"]
fn a_recorder_killed_with_sigkill_leaves_a_readable_trace() {
    let _serial = serial();
    let dir = scratch("sigkill");
    let data = dir.join("k.data");
    let bin = workload("half_sleeper");
    let mut child = record_half_sleeper(&bin, &data, "300")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    child.kill().unwrap();
    child.wait().unwrap();
    // The workload goes on without the recorder; stop it.
    let _ = Command::new("pkill")
        .args(["-f", bin.to_str().unwrap()])
        .status();
    let out = holdup_out(&["report", "--json", "-i", data.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("did not finish cleanly") || err.contains("ends inside a chunk"),
        "{err}"
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let samples: u64 = r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["samples"]["cpu"].as_u64().unwrap())
        .sum();
    assert!(
        samples > 200,
        "samples of the first seconds are there: {samples}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn pid_and_duration_modes() {
    let _serial = serial();
    let dir = scratch("pid_mode");
    let bin = workload("half_sleeper");
    let mut target = Command::new(&bin).arg("100").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let pid = target.id().to_string();
    let data = dir.join("p.data");
    let t0 = std::time::Instant::now();
    run_ok(&[
        "record",
        "-o",
        data.to_str().unwrap(),
        "-p",
        &pid,
        "--duration",
        "1",
    ]);
    let took = t0.elapsed().as_secs_f64();
    assert!((1.0..3.0).contains(&took), "--duration 1 took {took:.2} s");
    let r = json(&["report", "--json", "-i", data.to_str().unwrap()]);
    let worker = r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| {
            t["functions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["symbol"] == "half_sleeper")
        })
        .expect("the attached process's worker thread");
    let s = &worker["samples"];
    let total: f64 = ["cpu", "io", "lock", "sched", "other"]
        .iter()
        .map(|c| s[c].as_f64().unwrap())
        .sum();
    // Attached for about a second; the thread is covered all along, half asleep.
    assert_near("seconds covered", total / 1000.0, 1.0, 0.15);
    assert_near("cpu share", s["cpu"].as_f64().unwrap() / total, 0.5, 0.1);
    target.kill().unwrap();
    target.wait().unwrap();
}

/// A process asleep for the whole recording is covered too: its interval is
/// still open at the end and is flushed as one blocked sample.
#[test]
#[ignore = "needs root and BPF"]
fn a_process_asleep_throughout_is_covered() {
    let _serial = serial();
    let dir = scratch("asleep");
    let mut target = Command::new("sleep").arg("30").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let pid = target.id().to_string();
    let data = dir.join("s.data");
    run_ok(&[
        "record",
        "-o",
        data.to_str().unwrap(),
        "-p",
        &pid,
        "--duration",
        "1",
    ]);
    target.kill().unwrap();
    target.wait().unwrap();
    let r = json(&["report", "--json", "-i", data.to_str().unwrap()]);
    let threads = r["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 1);
    let s = &threads[0]["samples"];
    assert_near(
        "seconds asleep",
        s["other"].as_f64().unwrap() / 1000.0,
        1.0,
        0.15,
    );
    assert_eq!(s["cpu"].as_f64().unwrap(), 0.0);
}

#[test]
#[ignore = "needs root and BPF"]
fn ctrl_c_stops_cleanly_and_keeps_the_trace() {
    use std::os::unix::process::CommandExt;
    let _serial = serial();
    let dir = scratch("ctrl_c");
    let data = dir.join("c.data");
    let bin = workload("half_sleeper");
    // As a terminal would: SIGINT to the whole foreground process group.
    // A foreground job has SIGINT's default action; a suite started as a
    // background job of a script inherits it ignored, and so would the
    // command (an ignored signal stays ignored across exec, as nohup needs).
    let child = unsafe {
        record_half_sleeper(&bin, &data, "500")
            .stderr(Stdio::piped())
            .process_group(0)
            .pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            })
            .spawn()
            .unwrap()
    };
    std::thread::sleep(Duration::from_millis(2000));
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGINT), "{err}");
    assert!(
        err.contains("[ holdup record:"),
        "the status line is printed: {err}"
    );
    let out = holdup_out(&["report", "--json", "-i", data.to_str().unwrap()]);
    let rerr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !rerr.contains("did not finish"),
        "{rerr}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn lost_events_are_counted_and_reported() {
    let _serial = serial();
    let dir = scratch("lost");
    // Built without frame pointers: a sample whose stack has a frame
    // pointer chain carries only the part of the copy up to it, and these
    // must carry all of it.
    let bin = workload_with("spinners", &["-fomit-frame-pointer"]);
    // A 1 MiB ring, 10 kHz of 4 KiB stack copies on two CPUs: the ring
    // overflows between drains.
    let data = record(
        &dir,
        &["--ring-mb", "1", "-F", "10000", "--stack-bytes", "4096"],
        &[bin.to_str().unwrap(), "4", "0.3"],
    );
    let out = holdup_out(&["report", "--json", "-i", data.to_str().unwrap()]);
    assert!(out.status.success());
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lost = r["lost_events"].as_u64().unwrap();
    assert!(lost > 0, "the ring must have overflowed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{lost} events were lost")), "{err}");
}

/// A recorder killed outright (SIGKILL, or a full disk that stops it) has
/// written what it lost with every chunk, not only at its end: its trace
/// still says events were lost.
#[test]
#[ignore = "needs root and BPF"]
fn a_recording_killed_outright_still_shows_its_losses() {
    use std::os::unix::process::CommandExt;
    let _serial = serial();
    let dir = scratch("lost_killed");
    let data = dir.join("k.data");
    let bin = workload_with("spinners", &["-fomit-frame-pointer"]);
    // As in lost_events_are_counted_and_reported: the ring overflows between
    // drains, for the 30 s the spinners would run.
    let child = holdup()
        .args([
            "record",
            "--ring-mb",
            "1",
            "-F",
            "10000",
            "--stack-bytes",
            "4096",
        ])
        .args([
            "-o",
            data.to_str().unwrap(),
            "--",
            bin.to_str().unwrap(),
            "4",
            "30",
        ])
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    // The recorder, then the command it left running.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let mut child = child;
    child.wait().unwrap();
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let out = holdup_out(&["report", "--json", "-i", data.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("did not finish cleanly"), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lost = r["lost_events"].as_u64().unwrap();
    assert!(
        lost > 0,
        "no losses in the trace of a killed recording: {err}"
    );
    assert!(err.contains(&format!("{lost} events were lost")), "{err}");
}

/// A memory cgroup whose memory holdup's maps are charged to, and one to
/// run in: with the first's limit set to its usage, the kernel cannot
/// allocate the recorder's per-thread state any more (it is charged to the
/// cgroup that created the map), as under memory pressure. Removed on drop.
struct StarvedMaps {
    maps: std::path::PathBuf,
    run: std::path::PathBuf,
    /// memory.max (v2) or memory.limit_in_bytes (v1), and the usage file.
    limit: &'static str,
    usage: &'static str,
}

impl StarvedMaps {
    fn new(tag: &str) -> StarvedMaps {
        // cgroup v2 with the memory controller (under the root, which may
        // have processes of its own), else the v1 memory hierarchy under
        // our own cgroup.
        let v2 = std::path::Path::new("/sys/fs/cgroup");
        let controllers = std::fs::read_to_string(v2.join("cgroup.subtree_control"));
        let (base, limit, usage) = if controllers.is_ok_and(|c| c.contains("memory")) {
            (v2.to_path_buf(), "memory.max", "memory.current")
        } else {
            let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap();
            let own = cgroups
                .lines()
                .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_string()))
                .expect("this test needs a memory cgroup controller (v2, or v1 mounted)");
            let v1 = std::path::Path::new("/sys/fs/cgroup/memory");
            (
                v1.join(own.trim_start_matches('/')),
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )
        };
        let dir = |what: &str| {
            let d = base.join(format!("holdup-test-{tag}-{what}-{}", std::process::id()));
            std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
            d
        };
        StarvedMaps {
            maps: dir("maps"),
            run: dir("run"),
            limit,
            usage,
        }
    }

    /// Once holdup made its maps: every process moves to the other cgroup.
    fn move_out(&self) {
        let procs = std::fs::read_to_string(self.maps.join("cgroup.procs")).unwrap();
        for pid in procs.split_whitespace() {
            let _ = std::fs::write(self.run.join("cgroup.procs"), pid);
        }
    }

    /// The first cgroup may not grow past what it holds now. Its usage
    /// shrinks as pages holdup touched before it moved are freed: called
    /// again and again, the limit follows.
    fn starve(&self) {
        if let Ok(used) = std::fs::read_to_string(self.maps.join(self.usage)) {
            let _ = std::fs::write(self.maps.join(self.limit), used.trim());
        }
    }
}

impl Drop for StarvedMaps {
    fn drop(&mut self) {
        let parent = self.run.parent().unwrap().join("cgroup.procs");
        for dir in [&self.run, &self.maps] {
            if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
                for pid in procs.split_whitespace() {
                    let _ = std::fs::write(&parent, pid);
                }
            }
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Threads whose state the kernel could not allocate lose samples and
/// intervals: the recording says so, by what and why, and the report
/// shows it next to the lost events.
#[test]
#[ignore = "needs root and BPF"]
fn samples_dropped_for_want_of_thread_state_are_counted_and_shown() {
    let _serial = serial();
    let dir = scratch("dropped");
    let data = dir.join("d.data");
    let cgroups = StarvedMaps::new("dropped");
    // Four hundred processes alive at once, each a task the recorder needs
    // new state for once its maps may not grow. They must overlap: states
    // of tasks that come and go one after another are recycled from the
    // allocator's per-CPU free lists and need no new memory.
    let script = format!(
        "echo $$ > {}/cgroup.procs; exec {} record -o {} -- sh -c 'sleep 2; for i in $(seq 400); do sleep 1 & done; wait'",
        cgroups.maps.display(),
        env!("CARGO_BIN_EXE_holdup"),
        data.display()
    );
    let child = Command::new("sh")
        .args(["-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The trace file is made once the recorder is loaded.
    let began = std::time::Instant::now();
    while !data.exists() && began.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    cgroups.move_out();
    let done = std::sync::atomic::AtomicBool::new(false);
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                cgroups.starve();
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let out = child.wait_with_output().unwrap();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        out
    });
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("holdup: warning: the recorder dropped"),
        "{err}"
    );
    let r = report(&data);
    let dropped = r["dropped"].as_object().unwrap_or_else(|| panic!("{r}"));
    let no_state: u64 = dropped
        .iter()
        .filter(|(what, _)| what.ends_with(" (no thread state)"))
        .map(|(_, n)| n.as_u64().unwrap())
        .sum();
    assert!(no_state > 0, "{dropped:?}");
    let text = run_ok(&["report", "--stdio", "-i", data.to_str().unwrap()]);
    let head = String::from_utf8_lossy(&text.stdout);
    let head = head.lines().next().unwrap();
    assert!(head.contains("lost events; dropped: "), "{head}");
    assert!(head.contains(" (no thread state)"), "{head}");
}
