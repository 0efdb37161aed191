//! Root opens the files of the processes it records, whose owners control
//! them. The traced program here runs as `nobody` and attacks its own
//! library (`workloads/hostile_maps.c`): a FIFO put where the library was
//! must not block the recording, and a library cut short after holdup read
//! it must not kill holdup. And the recorder, run as root with another
//! user's `HOME` (sudo), makes nothing in that home.

use crate::support::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A directory of nobody's holding a fresh copy of the library the
/// program maps.
fn nobodys_library(dir: &Path) -> PathBuf {
    let own = dir.join("nobody");
    std::fs::create_dir(&own).unwrap();
    let lib = own.join("libhostile.so");
    let status = std::process::Command::new("cc")
        .args(["-O1", "-g", "-fPIC", "-shared", "-o"])
        .arg(&lib)
        .arg(repo_root().join("workloads/hostile_lib.c"))
        .bounded_status();
    assert!(status.success(), "compiling the library");
    for p in [&own, &lib] {
        std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
    }
    lib
}

/// `holdup record` of `hostile_maps MODE LIB SECONDS` run as nobody, with
/// `HOME` set to `home`; its output, and the moment it ended.
fn record_attack(
    dir: &Path,
    mode: &str,
    seconds: &str,
    home: &Path,
) -> Result<(std::process::Output, f64), String> {
    let lib = nobodys_library(dir);
    let bin = workload("hostile_maps");
    let data = dir.join("holdup.data");
    let mut cmd = holdup();
    cmd.env("HOME", home)
        .env("SUDO_USER", "nobody")
        .env_remove("XDG_CACHE_HOME")
        .args(["record", "-o", data.to_str().unwrap(), "--"])
        .args([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
        .arg(&bin)
        .args([mode, lib.to_str().unwrap(), seconds]);
    // A recording that blocks on the FIFO would never end: give up early.
    let out = output_within(&mut cmd, Duration::from_secs(30))?;
    let ended = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    Ok((out, ended))
}

#[test]
#[ignore = "needs root and BPF"]
fn a_fifo_at_a_mapped_librarys_path_does_not_hold_the_recording_up() {
    let _serial = serial();
    let dir = scratch("traced_fifo");
    let home = dir.join("home");
    std::fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
    let (out, ended) = record_attack(&dir, "fifo", "2", &home).unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let exited = printed_value(&String::from_utf8_lossy(&out.stdout), "exited_at");
    let late = ended - exited;
    eprintln!("holdup ended {late:.3} s after the program");
    assert!(
        late < 1.0,
        "holdup ended {late:.3} s after the program: {err}"
    );
    // The FIFO is named once, as the reason its file has no symbols.
    assert_eq!(err.matches("libhostile.so (a FIFO").count(), 1, "{err}");
    // The samples in the library were still unwound through it (its
    // mapped inode, read while the program lived).
    let r = report(&dir.join("holdup.data"));
    let names: Vec<String> = threads(&r)
        .iter()
        .flat_map(|t| t["functions"].as_array().unwrap().iter())
        .filter_map(|f| Some(f["symbol"].as_str()?.to_string()))
        .collect();
    assert!(names.iter().any(|n| n == "run"), "{names:?}");
    // As root under sudo's HOME: no root-owned .cache in nobody's home.
    assert_eq!(std::fs::read_dir(&home).unwrap().count(), 0);
}

#[test]
#[ignore = "needs root and BPF"]
fn a_library_cut_short_after_holdup_read_it_does_not_kill_holdup() {
    let _serial = serial();
    let dir = scratch("traced_truncate");
    // 1.5 s before the cut: the recorder drains and unwinds at least once
    // a second, so it has read the library by then.
    let home = std::env::temp_dir();
    let (out, _) = record_attack(&dir, "truncate", "1.5", &home).unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert!(err.contains("[ holdup record:"), "{err}");
    let lib = dir.join("nobody/libhostile.so");
    assert!(
        std::fs::metadata(&lib).unwrap().len() <= 8192,
        "the program cut it"
    );
    let r = report(&dir.join("holdup.data"));
    let samples: f64 = threads(&r)
        .iter()
        .map(|t| t["samples"]["cpu"].as_f64().unwrap())
        .sum();
    assert!(samples > 2000.0, "{samples} on-CPU samples of 3 s");
    let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755));
}
