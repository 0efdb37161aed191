use libbpf_cargo::SkeletonBuilder;
use std::{env, path::PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=src/bpf");
    if env::var_os("CARGO_FEATURE_LOADER").is_none() {
        return;
    }
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    for name in ["recorder", "latency", "cores"] {
        SkeletonBuilder::new()
            .source(format!("src/bpf/{name}.bpf.c"))
            .clang_args(["-Wall", "-Wno-unused-function", "-I", "src/bpf"])
            .build_and_generate(out_dir.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| {
                panic!("compiling src/bpf/{name}.bpf.c failed (it needs clang: apt install clang): {e}")
            });
    }
}
