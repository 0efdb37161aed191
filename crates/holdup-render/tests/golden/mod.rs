//! Golden files of the renderers: `HOLDUP_BLESS=1` rewrites them.

use std::path::{Path, PathBuf};

/// This crate's golden files, in `tests/golden/<what>/`.
pub fn dir(what: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(what)
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
