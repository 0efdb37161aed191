//! Functions, source lines and inlined frames from the C fixture
//! tests/fixtures/lines.c, whose interesting lines are marked "LINE:<name>".

mod common;

use common::*;
use holdup_symbolize::debuginfo::DebugFiles;
use holdup_symbolize::{read_build_id, Error, Frame, Symbolizer};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Line number of the line marked `LINE:<name>` in lines.c.
fn line_of(name: &str) -> u32 {
    let src = std::fs::read_to_string(source("lines.c")).unwrap();
    let tag = format!("LINE:{name} ");
    let i = src
        .lines()
        .position(|l| l.contains(&tag))
        .unwrap_or_else(|| panic!("no {tag}"));
    i as u32 + 1
}

/// The file offsets of the call sites probe() recorded (return address - 1),
/// in the order: inlined call, call in outer, call in mangled.
fn call_sites(exe: &Path) -> Vec<u64> {
    let text = run(exe, &[]);
    let spaces = spaces_from(&text);
    text.lines()
        .filter_map(|l| l.strip_prefix("ra "))
        .map(|h| {
            let ra = u64::from_str_radix(h, 16).unwrap();
            let m = spaces.find(PID, ra).expect("return address is mapped");
            assert_eq!(Path::new(&m.path), exe);
            m.file_offset_of(ra - 1)
        })
        .collect()
}

fn frame(function: &str, line: u32, inlined: bool) -> (String, Option<u32>, bool) {
    (function.to_string(), Some(line), inlined)
}

fn summary(frames: &[Frame]) -> Vec<(String, Option<u32>, bool)> {
    frames
        .iter()
        .map(|f| (f.function.clone().unwrap_or_default(), f.line, f.inlined))
        .collect()
}

const DEBUG_BUILDS: &[(&str, &[&str])] = &[
    ("lines-O0-dwarf4", &["-O0", "-gdwarf-4"]),
    ("lines-O0-dwarf5", &["-O0", "-gdwarf-5"]),
    ("lines-O2-dwarf4", &["-O2", "-gdwarf-4"]),
    ("lines-O2-dwarf5", &["-O2", "-gdwarf-5"]),
    ("lines-O2-dwarf5-nopie", &["-O2", "-gdwarf-5", "-no-pie"]),
];

#[test]
fn functions_lines_and_inlined_frames_for_dwarf4_and_dwarf5() {
    for (name, flags) in DEBUG_BUILDS {
        let exe = build("lines.c", name, flags);
        let sites = call_sites(&exe);
        let mut sym = Symbolizer::new();
        let got = sym
            .symbolize_file(&exe, read_build_id(&exe).as_deref(), &sites)
            .unwrap();
        assert_eq!(got.len(), 3);
        // The inlined call: innermost (inlined) function first, then the
        // real function at the line where the inlined one was called.
        assert_eq!(
            summary(&got[0]),
            [
                frame("inl_helper", line_of("inl_call"), true),
                frame("outer", line_of("outer_inl"), false)
            ],
            "{name}"
        );
        assert_eq!(
            summary(&got[1]),
            [frame("outer", line_of("outer_call"), false)],
            "{name}"
        );
        for frames in &got {
            for f in frames {
                assert!(
                    f.file
                        .as_deref()
                        .is_some_and(|p| p.ends_with("fixtures/lines.c")),
                    "{name}: {f:?}"
                );
            }
        }
        // Demangled by default.
        assert_eq!(
            summary(&got[2]),
            [frame(
                "holdup::mangled(int)",
                line_of("mangled_call"),
                false
            )],
            "{name}"
        );
    }
}

#[test]
fn demangling_can_be_turned_off() {
    let exe = build("lines.c", "lines-O2-dwarf5", &["-O2", "-gdwarf-5"]);
    let sites = call_sites(&exe);
    let got = Symbolizer::with_demangling(false)
        .symbolize_file(&exe, None, &sites[2..])
        .unwrap();
    assert_eq!(got[0][0].function.as_deref(), Some("_ZN6holdup7mangledEi"));
}

fn strip_debug(exe: &Path, name: &str) -> PathBuf {
    let out = exe.with_file_name(name);
    let status = Command::new("strip")
        .arg("-g")
        .arg("-o")
        .arg(&out)
        .arg(exe)
        .status()
        .expect("run strip");
    assert!(status.success());
    out
}

#[test]
fn without_debug_info_the_symbol_name_remains() {
    let built_without_g = build("lines.c", "lines-O2-nog", &["-O2"]);
    let stripped = strip_debug(
        &build("lines.c", "lines-O2-dwarf5", &["-O2", "-gdwarf-5"]),
        "lines-stripped",
    );
    for exe in [built_without_g, stripped] {
        let sites = call_sites(&exe);
        let got = Symbolizer::new()
            .symbolize_file(&exe, read_build_id(&exe).as_deref(), &sites)
            .unwrap();
        let plain = |f: &str| Frame {
            function: Some(f.to_string()),
            file: None,
            line: None,
            inlined: false,
        };
        // No inline information either: the symbol table only knows outer.
        assert_eq!(got[0], [plain("outer")], "{exe:?}");
        assert_eq!(got[1], [plain("outer")], "{exe:?}");
        assert_eq!(got[2], [plain("holdup::mangled(int)")], "{exe:?}");
    }
}

/// A stripped copy of `exe` and its debug file apart (`objcopy
/// --only-keep-debug`, then `strip`: the build-id stays), as `-dbgsym`
/// packages ship them; the debug file under `dir/.build-id/`.
fn split_debug(exe: &Path, dir: &Path) -> PathBuf {
    let id = holdup_hex(&read_build_id(exe).expect("a build-id"));
    let debug = dir
        .join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
    let stripped = dir.join("stripped");
    for (tool, args) in [
        (
            "objcopy",
            vec![
                "--only-keep-debug".as_ref(),
                exe.as_os_str(),
                debug.as_os_str(),
            ],
        ),
        (
            "strip",
            vec!["-o".as_ref(), stripped.as_os_str(), exe.as_os_str()],
        ),
    ] {
        let status = Command::new(tool).args(args).status().expect(tool);
        assert!(status.success(), "{tool}");
    }
    stripped
}

#[test]
fn a_stripped_binary_is_named_from_its_debug_file_by_build_id() {
    let exe = build("lines.c", "lines-O2-dwarf5", &["-O2", "-gdwarf-5"]);
    let sites = call_sites(&exe);
    let id = read_build_id(&exe);
    let whole = Symbolizer::new()
        .symbolize_file(&exe, id.as_deref(), &sites)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let stripped = split_debug(&exe, dir.path());
    // Without its debug file, nothing is known of the program's functions.
    let mut sym = Symbolizer::new();
    sym.set_debug_files(DebugFiles::in_dirs(vec![]));
    let bare = sym
        .symbolize_file(&stripped, id.as_deref(), &sites)
        .unwrap();
    assert!(bare.iter().all(Vec::is_empty), "{bare:?}");
    // With it: functions, lines and inlined frames, as from the whole file.
    let mut sym = Symbolizer::new();
    sym.set_debug_files(DebugFiles::in_dirs(vec![dir.path().to_path_buf()]));
    let named = sym
        .symbolize_file(&stripped, id.as_deref(), &sites)
        .unwrap();
    assert_eq!(named, whole);
    assert_eq!(named[0][0].function.as_deref(), Some("inl_helper"));
    // Offsets outside the program's segments stay unknown.
    let outside = sym.symbolize_file(&stripped, None, &[0xfff_ffff]).unwrap();
    assert_eq!(outside, [vec![]]);
}

#[test]
fn build_id_mismatch_and_unreadable_files_are_errors() {
    let exe = build("lines.c", "lines-O0-dwarf5", &["-O0", "-gdwarf-5"]);
    let id = read_build_id(&exe).expect("cc links with --build-id");
    let mut sym = Symbolizer::new();
    assert!(sym.symbolize_file(&exe, Some(&id), &[0x1000]).is_ok());
    let mut other = id.clone();
    other[0] ^= 0xff;
    let err = sym
        .symbolize_file(&exe, Some(&other), &[0x1000])
        .unwrap_err();
    assert!(matches!(err, Error::BuildIdMismatch { .. }), "{err}");
    assert!(err.to_string().contains(&holdup_hex(&id)), "{err}");

    // The file is replaced by a rebuild with different code: the cached
    // build-id must not hide it.
    let replaced = exe.with_file_name("lines-replaced");
    std::fs::copy(&exe, &replaced).unwrap();
    assert!(sym.symbolize_file(&replaced, Some(&id), &[0x1000]).is_ok());
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::copy(
        build("lines.c", "lines-O2-dwarf4", &["-O2", "-gdwarf-4"]),
        &replaced,
    )
    .unwrap();
    let err = sym
        .symbolize_file(&replaced, Some(&id), &[0x1000])
        .unwrap_err();
    assert!(matches!(err, Error::BuildIdMismatch { .. }), "{err}");

    let err = sym
        .symbolize_file(Path::new("/nonexistent/holdup/lib.so"), None, &[0x1000])
        .unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    let err = sym
        .symbolize_file(&source("lines.c"), None, &[0x10])
        .unwrap_err();
    assert!(matches!(err, Error::BadElf { .. }), "{err}");
    // Messages are lowercase phrases.
    assert!(err.to_string().starts_with(char::is_lowercase) || err.to_string().starts_with('/'));
}

/// A program's own file is its user's to craft: a compressed debug
/// section that claims more bytes than its compressed ones can hold made the
/// symbolizer allocate the claim up front (here ~64 TiB), and the failed
/// allocation aborted the recorder. Now the file is refused.
#[test]
fn a_compressed_section_claiming_an_impossible_size_is_refused() {
    use object::{Object, ObjectSection};
    let exe = build("lines.c", "lines-gz", &["-O2", "-g", "-gz=zlib"]);
    let mut bytes = std::fs::read(&exe).unwrap();
    let (at, size) = {
        let file = object::File::parse(&bytes[..]).unwrap();
        let info = file.section_by_name(".debug_info").unwrap();
        let c = info.compressed_file_range().unwrap();
        assert_eq!(
            c.format,
            object::CompressionFormat::Zlib,
            "cc -gz=zlib compresses"
        );
        // Elf64_Chdr: ch_type, ch_reserved, then ch_size.
        (
            info.file_range().unwrap().0 as usize + 8,
            c.uncompressed_size,
        )
    };
    let mut sym = Symbolizer::new();
    assert!(sym.symbolize_file(&exe, None, &[0x1000]).is_ok());
    assert!(size < 1 << 30);
    bytes[at..at + 8].copy_from_slice(&(1u64 << 46).to_le_bytes());
    let crafted = exe.with_file_name("lines-gz-crafted");
    std::fs::write(&crafted, &bytes).unwrap();
    let err = sym.symbolize_file(&crafted, None, &[0x1000]).unwrap_err();
    assert!(matches!(err, Error::BadElf { .. }), "{err}");
    assert!(
        err.to_string().contains("claims 70368744177664 bytes"),
        "{err}"
    );
}

fn holdup_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn offsets_outside_code_give_no_frames() {
    let exe = build("lines.c", "lines-O0-dwarf5", &["-O0", "-gdwarf-5"]);
    let got = Symbolizer::new()
        .symbolize_file(&exe, None, &[0, 0xfff_ffff])
        .unwrap();
    assert_eq!(got, [vec![], vec![]]);
}

#[test]
#[ignore = "needs root"]
fn kernel_addresses_from_kallsyms() {
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let vfs_read = text
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && f[2] == "vfs_read" && f[1].eq_ignore_ascii_case("t"))
                .then(|| u64::from_str_radix(f[0], 16).unwrap())
        })
        .expect("vfs_read in /proc/kallsyms");
    assert_ne!(vfs_read, 0, "kallsyms addresses are hidden: not root?");
    let got = Symbolizer::new().symbolize_kernel(&[vfs_read, vfs_read + 0x10, 0x1000]);
    assert_eq!(got[0].len(), 1);
    assert_eq!(got[0][0].function.as_deref(), Some("vfs_read"));
    assert_eq!(got[1][0].function.as_deref(), Some("vfs_read"));
    assert!(got[2].is_empty(), "user addresses are not kernel functions");
}

/// `cargo test --release -p holdup-symbolize --test symbolize -- --ignored --nocapture bench`
#[test]
#[ignore = "benchmark"]
fn bench_symbolize() {
    let exe = build("lines.c", "lines-O2-dwarf5", &["-O2", "-gdwarf-5"]);
    let sites = call_sites(&exe);
    let mut sym = Symbolizer::new();
    let t = std::time::Instant::now();
    sym.symbolize_file(&exe, None, &sites).unwrap();
    eprintln!("first call (parses the file): {:?}", t.elapsed());
    let n = 20_000;
    let t = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(sym.symbolize_file(&exe, None, &sites).unwrap());
    }
    eprintln!(
        "then {} ns per offset",
        t.elapsed().as_nanos() / (n * sites.len() as u128)
    );
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let offsets: Vec<u64> = (0..1000).map(|i| 0x28000 + i * 0x100).collect();
    let t = std::time::Instant::now();
    let r = sym.symbolize_file(libc, None, &offsets).unwrap();
    eprintln!(
        "libc, 1000 offsets, first call: {:?} ({} known)",
        t.elapsed(),
        r.iter().filter(|f| !f.is_empty()).count()
    );
    let t = std::time::Instant::now();
    sym.symbolize_file(libc, None, &offsets).unwrap();
    eprintln!(
        "libc, 1000 offsets again: {} ns per offset",
        t.elapsed().as_nanos() / 1000
    );
    let t = std::time::Instant::now();
    let k = Symbolizer::new().symbolize_kernel(&[0xffffffff81000000]);
    eprintln!(
        "kernel: load kallsyms + 1 address: {:?} ({:?})",
        t.elapsed(),
        k
    );
}
