//! What holdup's tests share, in every crate and layer: a scratch directory
//! per test, and golden files. A dev-dependency only; it depends on no
//! holdup crate, so any of them can use it.

use std::path::{Path, PathBuf};

/// The build's target directory: tests run from `target/<profile>/deps/`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.ancestors()
        .nth(3)
        .expect("a test binary in target/<profile>/deps")
        .to_path_buf()
}

/// A fresh, empty directory for the test `name`, under the target directory
/// (`target/scratch/<name>`), where its files can be looked at after a
/// failure and are replaced by the next run. Names must be unique within a
/// crate's tests.
pub fn scratch(name: &str) -> PathBuf {
    let dir = target_dir().join("scratch").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// Compare `got` with the golden file `dir/file`; with `HOLDUP_BLESS=1`
/// set, rewrite the file instead and say so.
#[track_caller]
pub fn assert_golden(dir: &Path, file: &str, got: &str) {
    let path = dir.join(file);
    if std::env::var_os("HOLDUP_BLESS").is_some() {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(&path, got).unwrap();
        eprintln!("blessed {}", path.display());
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} missing: run with HOLDUP_BLESS=1", path.display()));
    assert_eq!(got, want, "{file} differs (HOLDUP_BLESS=1 to accept)");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_directory_starts_empty_in_the_target_directory() {
        let dir = scratch("testkit-empty");
        std::fs::write(dir.join("left"), b"x").unwrap();
        let again = scratch("testkit-empty");
        assert_eq!(dir, again);
        assert_eq!(std::fs::read_dir(&again).unwrap().count(), 0);
        assert!(again.starts_with(target_dir()), "{}", again.display());
    }
}
