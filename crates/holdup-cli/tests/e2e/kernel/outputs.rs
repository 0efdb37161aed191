//! Every file holdup derives from a trace (pages, exports, flame graphs,
//! wait-for graphs) is readable by its owner only, like the trace, and
//! nothing another user planted at its path is written through: the
//! attacks are made as `nobody` in a directory everyone can write, while
//! holdup runs as root.

use crate::support::outputs::*;
use crate::support::small_trace::small_trace;
use crate::support::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

/// Run `cmd` as `nobody` in `dir`.
fn as_nobody(dir: &Path, cmd: &[&str]) {
    let status = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(cmd)
        .current_dir(dir)
        .bounded_status();
    assert!(status.success(), "as nobody: {cmd:?}");
}

#[test]
#[ignore = "needs root"]
fn outputs_are_private_and_never_written_through_a_planted_link_or_file() {
    let dir = scratch("outputs_planted");
    small_trace(&dir.join("small.data"));
    // A shared directory, like /tmp.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = dir.join("victim");
    std::fs::write(&victim, b"root's file").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();

    // A link to root's file where the output goes.
    as_nobody(&dir, &["ln", "-s", "victim", "out"]);
    for args in writers("out") {
        let o = run_in(&dir, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("cannot write out: it is a symbolic link"),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"root's file", "{args:?}");
    }
    std::fs::remove_file(dir.join("out")).unwrap();

    // A file of nobody's (who could read what root wrote into it) and a
    // second name of root's file: each name gets a new file of root's.
    for args in writers("theirs").into_iter().chain(writers("second")) {
        as_nobody(&dir, &["touch", "theirs"]);
        std::fs::hard_link(&victim, dir.join("second")).unwrap();
        let o = run_in(&dir, &args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let name = if args.contains(&"theirs".to_string()) {
            "theirs"
        } else {
            "second"
        };
        let md = std::fs::metadata(dir.join(name)).unwrap();
        assert_eq!(
            (md.uid(), md.mode() & 0o7777, md.nlink()),
            (0, 0o600, 1),
            "{args:?}"
        );
        assert!(md.len() > 0, "{args:?}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"root's file", "{args:?}");
        for n in ["theirs", "second"] {
            let _ = std::fs::remove_file(dir.join(n));
        }
    }

    // Made fresh, or over a file of ours with a wider mode: owner-only.
    for args in writers("made") {
        for existing in [false, true] {
            let made = dir.join("made");
            let _ = std::fs::remove_file(&made);
            if existing {
                std::fs::write(&made, b"an older, longer output than any of these").unwrap();
                std::fs::set_permissions(&made, std::fs::Permissions::from_mode(0o644)).unwrap();
            }
            let o = run_in(&dir, &args);
            assert!(
                o.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let md = std::fs::metadata(&made).unwrap();
            assert_eq!(md.mode() & 0o7777, 0o600, "{args:?}");
            assert!(md.len() > 0, "{args:?}");
            let text = std::fs::read(&made).unwrap();
            assert!(!text.starts_with(b"an older"), "{args:?}: not emptied");
        }
    }
}
