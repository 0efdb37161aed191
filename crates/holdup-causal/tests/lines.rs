//! Line tables of every DWARF version the compilers here emit: COZ 0.2.2
//! reads DWARF ≤ 4 only, and gcc ≥ 11 writes DWARF 5 by default.

use holdup_causal::lines::{load, Locations};
use object::{Object, ObjectSymbol};
use std::path::PathBuf;
use std::process::Command;

const SRC: &str = "#include <stdio.h>
static volatile double sink;
__attribute__((noinline)) void work(long n)
{
	for (long i = 0; i < n; i++) sink = sink * 1.5 + 1.0; /* line 5 */
}
int main(void) { work(10); return 0; }
";

fn compile(tag: &str, flags: &[&str]) -> PathBuf {
    // One directory per test: the tests run at once, and a rewrite of a
    // shared source under a compiler reading it fails that compile.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("lines")
        .join(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("prog.c");
    std::fs::write(&src, SRC).unwrap();
    let bin = dir.join(format!("prog-{tag}"));
    let st = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .args(flags)
        .status()
        .expect("cc runs");
    assert!(st.success());
    bin
}

fn check(tag: &str, flags: &[&str]) {
    let bin = compile(tag, flags);
    let mut locs = Locations::default();
    let table = load(&bin, &mut locs, &|_| true).unwrap();
    assert!(!table.is_empty(), "{tag}: empty line table");
    let loc = locs
        .find("prog.c:5")
        .unwrap_or_else(|| panic!("{tag}: no prog.c:5"));
    // The loop's code maps to line 5.
    let data = std::fs::read(&bin).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let work = file.symbols().find(|s| s.name() == Ok("work")).unwrap();
    let hits = (work.address()..work.address() + work.size())
        .filter(|&a| table.lookup(a) == Some(loc))
        .count();
    assert!(hits > 0, "{tag}: no address of work() maps to line 5");
    assert!(locs.name(loc).ends_with("/prog.c:5"), "{}", locs.name(loc));
}

#[test]
fn dwarf3_strict() {
    check("dwarf3", &["-gdwarf-3", "-gstrict-dwarf"]);
}

#[test]
fn dwarf4() {
    check("dwarf4", &["-gdwarf-4"]);
}

#[test]
fn dwarf5_default() {
    check("dwarf5", &["-g"]);
}

#[test]
fn scope_filter_drops_files() {
    let bin = compile("filter", &["-g"]);
    let mut locs = Locations::default();
    let table = load(&bin, &mut locs, &|p| !p.ends_with("prog.c")).unwrap();
    assert!(locs.find("prog.c:5").is_none());
    assert!(table.is_empty() || locs.len() < 3);
}

/// `holdup latency --func FILE:LINE`: a line names the function whose code
/// holds it; the line of a function's name (no code of its own) names that
/// function too.
#[test]
fn a_line_names_its_function() {
    let bin = compile("function_at", &["-g"]);
    for (line, function) in [(3, "work"), (5, "work"), (7, "main")] {
        let spec = format!("prog.c:{line}");
        let got = holdup_coz::probe::function_at(&bin, &spec);
        assert_eq!(got.as_deref(), Ok(function), "{spec}");
    }
    let err = holdup_coz::probe::function_at(&bin, "prog.c:100").unwrap_err();
    assert!(err.contains("has no code"), "{err}");
}
