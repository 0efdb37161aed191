//! The generated skeleton of `src/bpf/cores.bpf.c`.
#![allow(
    clippy::all,
    non_camel_case_types,
    non_upper_case_globals,
    dead_code,
    unused_imports
)]
include!(concat!(env!("OUT_DIR"), "/cores.skel.rs"));
