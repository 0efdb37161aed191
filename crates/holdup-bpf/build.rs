use libbpf_cargo::SkeletonBuilder;
use std::{env, path::PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=src/bpf");
    if env::var_os("CARGO_FEATURE_LOADER").is_none() {
        return;
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap()).join("recorder.skel.rs");
    SkeletonBuilder::new()
        .source("src/bpf/recorder.bpf.c")
        .clang_args(["-Wall", "-Wno-unused-function", "-I", "src/bpf"])
        .build_and_generate(&out)
        .expect("compiling src/bpf/recorder.bpf.c failed (it needs clang: apt install clang)");
}
