//! The runtime library that thread-level and `--system` runs preload into
//! the command: where it is, and whether it is safe to preload.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};

/// Where the runtime library is: `HOLDUP_CAUSAL_LIB`, else next to this
/// executable (cargo puts it there, or in `deps/` for test builds); checked
/// to be safe to preload.
pub fn runtime_library() -> anyhow::Result<String> {
    if let Some(p) = std::env::var_os("HOLDUP_CAUSAL_LIB") {
        let p = PathBuf::from(p);
        if !p.exists() {
            bail!(
                "HOLDUP_CAUSAL_LIB names {}, which does not exist",
                p.display()
            );
        }
        return preloadable(&p);
    }
    let exe = std::env::current_exe().context("cannot locate the holdup executable")?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    for cand in [
        dir.join("libholdup_causal.so"),
        dir.join("deps/libholdup_causal.so"),
        dir.join("../lib/holdup/libholdup_causal.so"),
    ] {
        if cand.exists() {
            return preloadable(&cand);
        }
    }
    bail!(
        "cannot find libholdup_causal.so next to {}: build it with `cargo build -p holdup-causal` or set HOLDUP_CAUSAL_LIB",
        exe.display()
    )
}

/// The runtime library as `LD_PRELOAD` will name it: its absolute path
/// without symbolic links (what is loaded is what was checked), free of the
/// spaces and colons that `LD_PRELOAD` splits on, of a regular file that
/// only root or the user running holdup can change (it is loaded into the
/// program, which may run as root).
fn preloadable(lib: &Path) -> anyhow::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let path = lib
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", lib.display()))?;
    let Some(text) = path.to_str() else {
        bail!("the runtime library's path {} is not UTF-8", path.display());
    };
    if text.contains([' ', ':']) {
        bail!(
            "the runtime library's path {text} has a space or a colon, which LD_PRELOAD cannot carry: put libholdup_causal.so elsewhere and name it with HOLDUP_CAUSAL_LIB"
        );
    }
    let meta = std::fs::metadata(&path).with_context(|| format!("cannot read {text}"))?;
    if !meta.is_file() {
        bail!("the runtime library {text} is not a regular file");
    }
    let me = unsafe { libc::geteuid() };
    if meta.uid() != 0 && meta.uid() != me {
        bail!(
            "the runtime library {text} belongs to uid {}: holdup preloads only a library of root's{} (install it, or set HOLDUP_CAUSAL_LIB)",
            meta.uid(),
            if me == 0 { String::new() } else { format!(" or uid {me}'s") }
        );
    }
    if meta.mode() & 0o022 != 0 {
        bail!(
            "the runtime library {text} can be changed by other users (mode {:o}): `chmod go-w` it, or install it where only its owner can write",
            meta.mode() & 0o7777
        );
    }
    Ok(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causal::tests::chmod;

    #[test]
    fn only_a_library_that_others_cannot_change_is_preloaded_and_by_its_real_path() {
        let dir = holdup_testkit::scratch("causal-preload");
        let lib = dir.join("libholdup_causal.so");
        std::fs::write(&lib, b"\x7fELF").unwrap();
        chmod(&lib, 0o644);
        let real = lib.canonicalize().unwrap();
        assert_eq!(preloadable(&lib).unwrap(), real.to_str().unwrap());
        // Through a link or a roundabout path: the real one.
        let link = dir.join("link.so");
        std::os::unix::fs::symlink(&lib, &link).unwrap();
        assert_eq!(preloadable(&link).unwrap(), real.to_str().unwrap());
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let roundabout = dir.join("sub/../libholdup_causal.so");
        assert_eq!(preloadable(&roundabout).unwrap(), real.to_str().unwrap());
        // Writable by the group or by anyone.
        for mode in [0o664, 0o646, 0o666] {
            chmod(&lib, mode);
            let e = preloadable(&lib).unwrap_err().to_string();
            assert!(e.contains("can be changed by other users"), "{mode:o}: {e}");
        }
        chmod(&lib, 0o644);
        // A path LD_PRELOAD would split.
        for name in ["with space", "with:colon"] {
            let sub = dir.join(name);
            std::fs::create_dir_all(&sub).unwrap();
            let odd = sub.join("libholdup_causal.so");
            std::fs::copy(&lib, &odd).unwrap();
            let e = preloadable(&odd).unwrap_err().to_string();
            assert!(e.contains("a space or a colon"), "{e}");
        }
        // Another user's library, when root runs holdup.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&lib, Some(65534), None).unwrap();
            let e = preloadable(&lib).unwrap_err().to_string();
            assert!(e.contains("belongs to uid 65534"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
