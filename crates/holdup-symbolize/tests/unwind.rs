//! Unwinding real stacks through glibc, which Debian builds without frame
//! pointers. The fixture (tests/fixtures/capture.c) records what the BPF
//! recorder records, from inside a qsort comparison callback.

mod common;

use common::*;
use holdup_symbolize::{Unwinder, UserStack};
use std::path::PathBuf;

struct Capture {
    ip: u64,
    sp: u64,
    bp: u64,
    chain: Vec<(u64, u64)>,
    copy: Vec<u8>,
    text: String,
}

impl Capture {
    fn parse(text: String) -> Self {
        let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
        let mut c = Capture {
            ip: 0,
            sp: 0,
            bp: 0,
            chain: vec![],
            copy: vec![],
            text: String::new(),
        };
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            match f[0] {
                "regs" => (c.ip, c.sp, c.bp) = (hex(f[1]), hex(f[2]), hex(f[3])),
                "fp" => c.chain.push((hex(f[1]), hex(f[2]))),
                "copy" => {
                    let h = f.get(1).copied().unwrap_or("");
                    c.copy = (0..h.len() / 2)
                        .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap())
                        .collect();
                }
                "maps" => break,
                _ => panic!("bad line {line:?}"),
            }
        }
        c.text = text;
        c
    }

    fn stack(&self) -> UserStack<'_> {
        UserStack {
            ip: self.ip,
            sp: self.sp,
            bp: self.bp,
            fp_chain: &self.chain,
            copy: &self.copy,
        }
    }
}

/// (name, cc flags) of the fixture builds.
const BUILDS: &[(&str, &[&str])] = &[
    ("cap-O0-fp-pie", &["-O0", "-g", "-fno-omit-frame-pointer"]),
    ("cap-O2-nofp-pie", &["-O2", "-g", "-fomit-frame-pointer"]),
    (
        "cap-O2-fp-nopie",
        &["-O2", "-g", "-fno-omit-frame-pointer", "-no-pie"],
    ),
    // CFI only in .debug_frame (no unwind tables), no frame pointers.
    (
        "cap-O2-nofp-debugframe",
        &[
            "-O2",
            "-g",
            "-fomit-frame-pointer",
            "-fno-asynchronous-unwind-tables",
            "-fno-unwind-tables",
        ],
    ),
];

fn exe(name: &str) -> PathBuf {
    let (_, flags) = BUILDS.iter().find(|b| b.0 == name).unwrap();
    build("capture.c", name, flags)
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// main -> sort_things -> qsort -> my_compare -> capture
    Qsort,
    /// the same in a pthread
    Thread,
    /// main -> do_reads -> fake_pread (no frame pointer) -> capture
    Reads,
}

fn capture_in(name: &str, copy: usize, mode: Mode) -> Capture {
    let copy = copy.to_string();
    let mut args = vec![copy.as_str()];
    match mode {
        Mode::Qsort => {}
        Mode::Thread => args.push("thread"),
        Mode::Reads => args.push("reads"),
    }
    Capture::parse(run(&exe(name), &args))
}

fn capture(name: &str, copy: usize, thread: bool) -> Capture {
    capture_in(name, copy, if thread { Mode::Thread } else { Mode::Qsort })
}

struct Unwound {
    addrs: Vec<u64>,
    /// File of each address.
    paths: Vec<String>,
    names: Vec<String>,
    complete: bool,
    cfi: u64,
    fp: u64,
}

fn unwind(c: &Capture) -> Unwound {
    let spaces = spaces_from(&c.text);
    let mut u = Unwinder::new();
    let addrs = u.unwind(&spaces, PID, &c.stack());
    let names = names(&symbolize(&spaces, &addrs));
    let paths = addrs
        .iter()
        .map(|&a| {
            spaces
                .find(PID, a)
                .map_or(String::new(), |m| m.path.clone())
        })
        .collect();
    let s = u.stats();
    Unwound {
        addrs,
        paths,
        names,
        complete: s.complete == 1,
        cfi: s.cfi_frames,
        fp: s.fp_frames,
    }
}

fn is(name: &'static str) -> Want {
    let pred: fn(&str) -> bool = match name {
        "capture" => |n| n == "capture",
        "my_compare" => |n| n == "my_compare",
        // qsort tail-calls qsort_r: the frame on the stack is qsort_r's.
        "qsort" => |n| n.contains("qsort"),
        "sort_things" => |n| n == "sort_things",
        "main" => |n| n == "main",
        "thread_main" => |n| n == "thread_main",
        "fake_pread" => |n| n == "fake_pread",
        "do_reads" => |n| n == "do_reads",
        "start_thread" => |n| n == "start_thread",
        _ => unreachable!(),
    };
    (name, pred)
}

fn main_chain() -> Vec<Want> {
    ["capture", "my_compare", "qsort", "sort_things", "main"]
        .into_iter()
        .map(is)
        .collect()
}

#[test]
fn cfi_unwinds_through_glibc_qsort_in_every_build() {
    for (name, _) in BUILDS {
        let c = capture(name, 4096, false);
        let u = unwind(&c);
        eprintln!(
            "{name}: {} frames ({} cfi, {} fp): {:?}",
            u.addrs.len(),
            u.cfi,
            u.fp,
            u.names
        );
        in_order(&u.names, &main_chain()).unwrap_or_else(|e| panic!("{name}: {e}"));
        // _start's end marker is in .eh_frame (crt1.o), which the
        // .debug_frame build does not use for its own code.
        if !name.ends_with("debugframe") {
            assert!(
                u.complete,
                "{name}: the walk should end at _start's CFI end marker: {:?}",
                u.names
            );
        }
        assert_eq!(u.names.last().map(String::as_str), Some("_start"), "{name}");
        assert_eq!(u.fp, 0, "{name}: a 4 KiB copy holds this whole stack");
    }
}

#[test]
fn cfi_unwinds_inside_a_pthread() {
    for name in ["cap-O0-fp-pie", "cap-O2-nofp-pie"] {
        let c = capture(name, 4096, true);
        let u = unwind(&c);
        eprintln!("{name} thread: {:?}", u.names);
        let chain: Vec<_> = [
            "capture",
            "my_compare",
            "qsort",
            "sort_things",
            "thread_main",
            "start_thread",
        ]
        .into_iter()
        .map(is)
        .collect();
        in_order(&u.names, &chain).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            !u.names.iter().any(|n| n == "main"),
            "a thread's stack does not reach main"
        );
        assert!(
            u.complete,
            "{name}: the walk should end at clone3's CFI end marker"
        );
    }
}

/// With no stack copy only the kernel's frame-pointer chain is left: it is
/// reproduced exactly, and it loses everything past glibc's msort, whose
/// code uses rbp as a general register.
#[test]
fn empty_copy_is_the_frame_pointer_walk_and_shows_what_is_lost() {
    let c = capture("cap-O0-fp-pie", 0, false);
    assert!(c.copy.is_empty());
    let u = unwind(&c);
    let mut expected = vec![c.ip];
    expected.extend(c.chain.iter().map(|l| l.1));
    assert_eq!(u.addrs, expected, "pure frame-pointer fallback");
    eprintln!("frame pointers only: {:?}", u.names);
    in_order(&u.names, &main_chain()[..2]).unwrap();
    assert!(
        !u.names.iter().any(|n| n == "sort_things"),
        "glibc now keeps frame pointers? the walk got through: {:?}",
        u.names
    );
    let full = unwind(&capture("cap-O0-fp-pie", 4096, false));
    assert!(full.addrs.len() > u.addrs.len());
}

/// A 512-byte copy in qsort: CFI gets through glibc while the copy lasts;
/// the kernel chain broke inside glibc (msort uses rbp for data), so nothing
/// is left to continue with. The result is shorter, never wrong.
#[test]
fn short_copy_through_glibc_stops_cleanly() {
    for name in ["cap-O0-fp-pie", "cap-O2-nofp-pie"] {
        let short = unwind(&capture(name, 512, false));
        let full = unwind(&capture(name, 4096, false));
        eprintln!(
            "{name} 512 B: {} frames ({} cfi, {} fp): {:?}",
            short.addrs.len(),
            short.cfi,
            short.fp,
            short.names
        );
        in_order(&short.names, &main_chain()[..2]).unwrap();
        assert!(
            short.paths[2].contains("libc.so"),
            "CFI got into glibc: {:?}",
            short.paths
        );
        assert!(short.addrs.len() < full.addrs.len());
        assert_eq!(
            short.names[..],
            full.names[..short.names.len()],
            "{name}: a prefix of the full stack"
        );
    }
}

/// The blocked-in-pread shape: the wrapper keeps no frame pointer, so the
/// kernel chain skips its caller; CFI finds it on the copy and the chain
/// continues from the caller's frame once the copy ends (do_reads has a
/// 2 KiB buffer, beyond a 512-byte copy).
#[test]
fn cfi_recovers_the_caller_of_a_wrapper_without_frame_pointer() {
    let reads: Vec<_> = ["capture", "fake_pread", "do_reads", "main"]
        .into_iter()
        .map(is)
        .collect();
    for name in ["cap-O0-fp-pie", "cap-O2-fp-nopie"] {
        let fp_only = unwind(&capture_in(name, 0, Mode::Reads));
        eprintln!("{name} reads, frame pointers only: {:?}", fp_only.names);
        in_order(
            &fp_only.names,
            &[is("capture"), is("fake_pread"), is("main")],
        )
        .unwrap();
        assert!(
            !fp_only.names.iter().any(|n| n == "do_reads"),
            "{:?}",
            fp_only.names
        );

        let mixed = unwind(&capture_in(name, 512, Mode::Reads));
        eprintln!(
            "{name} reads, 512 B: {} cfi + {} fp frames: {:?}",
            mixed.cfi, mixed.fp, mixed.names
        );
        in_order(&mixed.names, &reads).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            mixed.cfi >= 2 && mixed.fp >= 1,
            "{name}: both walks were needed"
        );
        assert_eq!(
            mixed.names.last().map(String::as_str),
            fp_only.names.last().map(String::as_str)
        );

        let full = unwind(&capture_in(name, 4096, Mode::Reads));
        in_order(&full.names, &reads).unwrap_or_else(|e| panic!("{name}: {e}"));
        // The chain ends in glibc's start code (no frame pointers), CFI
        // reaches _start: otherwise the two agree.
        assert_eq!(
            mixed.names[..],
            full.names[..mixed.names.len()],
            "{name}: CFI alone and CFI + chain agree"
        );
        assert_eq!(full.names.last().map(String::as_str), Some("_start"));
    }
}

#[test]
fn frames_are_return_addresses_as_found() {
    let c = capture("cap-O0-fp-pie", 4096, false);
    let u = unwind(&c);
    assert_eq!(u.addrs[0], c.ip);
    // The return address into my_compare, as the kernel chain saw it.
    assert_eq!(u.addrs[1], c.chain[0].1);
}

/// Micro benchmark: `cargo test --release -p holdup-symbolize --test unwind -- --ignored --nocapture`
#[test]
#[ignore = "benchmark"]
fn bench_unwind() {
    for (name, copy) in [
        ("cap-O2-nofp-pie", 4096),
        ("cap-O0-fp-pie", 512),
        ("cap-O0-fp-pie", 0),
    ] {
        let c = capture(name, copy, false);
        let spaces = spaces_from(&c.text);
        let mut u = Unwinder::new();
        let mut out = Vec::new();
        let t = std::time::Instant::now();
        u.unwind_into(&spaces, PID, &c.stack(), &mut out);
        let first = t.elapsed();
        let n = 200_000;
        let t = std::time::Instant::now();
        for _ in 0..n {
            u.unwind_into(&spaces, PID, &c.stack(), &mut out);
            std::hint::black_box(&out);
        }
        let per = t.elapsed().as_nanos() / n;
        // Worst case: the mappings changed before every stack, so the module
        // list is rebuilt and no unwind rule is cached.
        let mut spaces = spaces;
        let cold = 20_000;
        let t = std::time::Instant::now();
        for i in 0..cold {
            let m = holdup_symbolize::Mapping {
                start: 0x1000 + (i % 2) * 0x1000,
                end: 0x2000 + (i % 2) * 0x1000,
                file_offset: 0,
                path: "//anon".into(),
                build_id: None,
            };
            spaces.add_mapping(PID, m);
            u.unwind_into(&spaces, PID, &c.stack(), &mut out);
            std::hint::black_box(&out);
        }
        let cold_per = t.elapsed().as_nanos() / cold as u128;
        eprintln!(
            "{name} copy {copy}: {} frames, first unwind {first:?} (loads ELF files), then {per} ns/stack; \
             {cold_per} ns/stack with cold caches",
            out.len()
        );
    }
}
