use libbpf_cargo::SkeletonBuilder;
use std::{env, path::Path, path::PathBuf};

/// The headers C and Rust share, turned into Rust by bindgen: the ring
/// records and map layouts of the recorder, the latency histograms, the
/// core-delay state and the in-band system-call slots of the public header.
/// (module name, header, what of it: a file pattern or type names, the
/// target it is laid out for: the BPF programs' or the host's)
const INTERFACES: [(&str, &str, Items, Target); 5] = [
    (
        "intf",
        "src/bpf/intf.h",
        Items::File(r".*/intf\.h"),
        Target::Bpf,
    ),
    (
        "latency",
        "src/bpf/latency.h",
        Items::File(r".*/latency\.h"),
        Target::Bpf,
    ),
    (
        "cores",
        "src/bpf/cores.h",
        Items::File(r".*/cores\.h"),
        Target::Bpf,
    ),
    (
        "progress",
        "src/bpf/progress.h",
        Items::File(r".*/progress\.h"),
        Target::Bpf,
    ),
    (
        "debox",
        "../../include/holdup_debox.h",
        Items::Named(&["holdup_debox", "HOLDUP_DEBOX_.*"]),
        Target::Host,
    ),
];

/// bindgen asserts at compile time that every Rust struct has the size and
/// field offsets clang gives the C one. For the BPF headers that is clang
/// compiling for BPF, as the programs are: the Rust reading their records
/// checks against the layout they write.
#[derive(PartialEq)]
enum Target {
    Bpf,
    Host,
}

enum Items {
    /// Everything the header itself defines.
    File(&'static str),
    /// Only these types and constants (the public header also has inline
    /// functions and per-thread variables for the programs that include it).
    Named(&'static [&'static str]),
}

/// The kernel's type names the BPF headers use (bindgen calls u8..u64
/// `u8_`..`u64_`: aliases of Rust's own).
const PRELUDE: &str = "typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef int s32;
typedef unsigned int __u32;
typedef unsigned long long __u64;
";

fn main() {
    println!("cargo:rerun-if-changed=src/bpf");
    println!("cargo:rerun-if-changed=../../include/holdup_debox.h");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    for (module, header, items, target) in INTERFACES {
        generate_types(
            header,
            &items,
            &target,
            &out_dir.join(format!("{module}.rs")),
        );
    }
    if env::var_os("CARGO_FEATURE_LOADER").is_none() {
        return;
    }
    for name in ["recorder", "latency", "cores", "progress"] {
        SkeletonBuilder::new()
            .source(format!("src/bpf/{name}.bpf.c"))
            // Kept beside the skeleton: a test reads its BTF to check the
            // generated layouts against what the BPF compiler laid out.
            .obj(out_dir.join(format!("{name}.bpf.o")))
            .clang_args(["-Wall", "-Wno-unused-function", "-I", "src/bpf"])
            .build_and_generate(out_dir.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| {
                panic!("compiling src/bpf/{name}.bpf.c failed (it needs clang: apt install clang): {e}")
            });
    }
}

/// Rust types and constants of `header`, written to `out`.
fn generate_types(header: &str, items: &Items, target: &Target, out: &Path) {
    let header = Path::new(header).canonicalize().unwrap();
    let mut b = bindgen::Builder::default()
        .header_contents(
            "prelude.h",
            &format!("{PRELUDE}#include \"{}\"\n", header.display()),
        )
        .use_core()
        .prepend_enum_name(false)
        .derive_default(true)
        .generate_comments(true)
        .layout_tests(true);
    if *target == Target::Bpf {
        b = b.clang_args(["-target", "bpf"]);
    }
    b = match items {
        Items::File(pattern) => b.allowlist_file(*pattern),
        Items::Named(names) => names
            .iter()
            .fold(b, |b, n| b.allowlist_type(*n).allowlist_var(*n)),
    };
    b.generate()
        .unwrap_or_else(|e| {
            panic!(
                "generating Rust types from {} failed (bindgen needs libclang, which comes with clang: apt install clang): {e}",
                header.display()
            )
        })
        .write_to_file(out)
        .unwrap();
}
