//! C fixtures built by the test harness, and what they report.
#![allow(dead_code)]

use holdup_symbolize::{AddressSpaces, Frame, Symbolizer};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The pid under which a fixture's saved maps are loaded. Fixtures have
/// exited by the time they are unwound, as in an offline report.
pub const PID: u32 = 4242;

fn fixture_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("temp dir"))
        .path()
}

pub fn source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Compile `tests/fixtures/<src>` with `flags` (once per test binary) and
/// return the executable.
pub fn build(src: &str, name: &str, flags: &[&str]) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    // Held while compiling: two tests wanting the same fixture must not
    // write it twice (running it while the linker rewrites it fails with
    // "text file busy").
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(p) = built.get(name) {
        return p.clone();
    }
    let out = fixture_dir().join(name);
    let status = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(source(src))
        .arg("-lpthread")
        .status()
        .expect("run cc (a C compiler is needed to build test fixtures)");
    assert!(status.success(), "cc {flags:?} {src} failed");
    built.insert(name.to_string(), out.clone());
    out
}

/// Run `exe` with `args` followed by an output file it writes, and return that
/// file's text.
pub fn run(exe: &Path, args: &[&str]) -> String {
    // One output file per run: tests run at once, and two runs of the same
    // fixture writing one file would read each other's half-written text.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = fixture_dir().join(format!(
        "{}-{}-{n}.out",
        exe.file_name().unwrap().to_string_lossy(),
        args.join("-")
    ));
    let status = Command::new(exe)
        .arg(&out)
        .args(args)
        .status()
        .expect("run fixture");
    assert!(status.success(), "{exe:?} {args:?} failed");
    std::fs::read_to_string(&out).expect("fixture output")
}

/// The `maps` section of a fixture output (everything after a `maps` line).
pub fn maps_section(text: &str) -> &str {
    let i = text.find("\nmaps\n").expect("maps section") + "\nmaps\n".len();
    &text[i..]
}

pub fn spaces_from(text: &str) -> AddressSpaces {
    let mut spaces = AddressSpaces::new();
    spaces.load_maps(PID, maps_section(text));
    spaces
}

/// Symbolize user addresses as a report would: return addresses minus one,
/// the first (the instruction pointer) as is. One entry per frame, inlined
/// frames included; "?" where nothing is known.
pub fn symbolize(spaces: &AddressSpaces, addrs: &[u64]) -> Vec<Frame> {
    let mut sym = Symbolizer::new();
    let mut out = Vec::new();
    for (i, &a) in addrs.iter().enumerate() {
        let lookup = if i == 0 { a } else { a - 1 };
        let Some(m) = spaces.find(PID, a) else {
            out.push(unknown(format!("?{a:#x}")));
            continue;
        };
        let frames = sym
            .symbolize_file(
                Path::new(&m.path),
                m.build_id.as_deref(),
                &[m.file_offset_of(lookup)],
            )
            .expect("symbolize")
            .remove(0);
        if frames.is_empty() {
            out.push(unknown(format!(
                "?{}+{:#x}",
                m.path,
                m.file_offset_of(lookup)
            )));
        }
        out.extend(frames);
    }
    out
}

fn unknown(name: String) -> Frame {
    Frame {
        function: Some(name),
        ..Frame::default()
    }
}

pub fn names(frames: &[Frame]) -> Vec<String> {
    frames
        .iter()
        .map(|f| f.function.clone().unwrap_or_default())
        .collect()
}

/// A function name we look for: what to call it, and which names match.
pub type Want = (&'static str, fn(&str) -> bool);

/// Whether `names` contains, in this order (not necessarily adjacent), a
/// name accepted by each predicate.
pub fn in_order(names: &[String], wanted: &[Want]) -> Result<(), String> {
    let mut rest = names;
    for (what, pred) in wanted {
        match rest.iter().position(|n| pred(n)) {
            Some(i) => rest = &rest[i + 1..],
            None => return Err(format!("{what} missing (in order) from {names:?}")),
        }
    }
    Ok(())
}
