//! holdup's end-to-end tests, in one test binary, in two halves:
//!
//! - `cli/`: the `holdup` command on hand-made traces, on programs built
//!   here but not recorded, and on bad input. No root needed;
//!   `cargo test --release -p holdup-cli --test e2e cli::` runs them.
//! - `kernel/`: programs recorded by the real eBPF recorder on this kernel.
//!   Every one is `#[ignore = "needs root and BPF"]`; as root,
//!   `cargo test --release -p holdup-cli --test e2e kernel:: -- --include-ignored`
//!   runs them, and `scripts/test` runs both halves.
//!
//! One module per area in each half (`cli/latency.rs`, `kernel/latency.rs`);
//! helpers both halves of an area use are in `support/AREA.rs`, the ones
//! every area uses in `support/mod.rs`. One test runs alone with
//! `cargo test --release -p holdup-cli --test e2e -- --include-ignored NAME`.

#[path = "../support/mod.rs"]
mod support;

mod cli;
mod kernel;

/// The layout cannot drift: every test under `kernel/` is ignored for want
/// of root, and none under `cli/` is, so that `cargo test` without root runs
/// exactly the `cli/` half.
#[test]
fn kernel_tests_and_only_they_need_root() {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    let mut counted = [0, 0];
    for (half, must_be_ignored) in [("cli", false), ("kernel", true)] {
        for entry in std::fs::read_dir(here.join(half)).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            for (name, ignore) in tests_of(&text) {
                let root_ignore = ignore
                    .as_deref()
                    .is_some_and(|a| a.starts_with(ROOT_IGNORE));
                if must_be_ignored {
                    assert!(
                        root_ignore,
                        "{}: {name} lacks `{ROOT_IGNORE}…\"]`",
                        path.display()
                    );
                } else {
                    assert_eq!(ignore, None, "{}: {name} is ignored", path.display());
                }
                counted[must_be_ignored as usize] += 1;
            }
        }
    }
    assert!(
        counted[0] > 0 && counted[1] > 0,
        "no tests found: {counted:?}"
    );
}

/// How a test that needs root is ignored (the reason may say more).
const ROOT_IGNORE: &str = "#[ignore = \"needs root";

/// The `#[test]` functions of a source file, each with its `#[ignore…]`
/// attribute if it has one.
fn tests_of(text: &str) -> Vec<(String, Option<String>)> {
    let mut found = Vec::new();
    let mut lines = text.lines().map(str::trim);
    while let Some(line) = lines.next() {
        if line != "#[test]" {
            continue;
        }
        let mut ignore = None;
        for attr in lines.by_ref() {
            if let Some(rest) = attr.strip_prefix("fn ") {
                let name = rest.split('(').next().unwrap_or(rest);
                found.push((name.to_string(), ignore));
                break;
            }
            if attr.starts_with("#[ignore") {
                ignore = Some(attr.to_string());
            }
        }
    }
    found
}
