//! Golden files of the renderers: `HOLDUP_BLESS=1` rewrites them.

pub use holdup_testkit::assert_golden;
use std::path::{Path, PathBuf};

/// This crate's golden files, in `tests/golden/<what>/`.
pub fn dir(what: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(what)
}
