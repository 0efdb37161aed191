//! The skeletons libbpf-cargo generates from the BPF programs (build.rs):
//! `src/bpf/recorder.bpf.c`, `latency.bpf.c`, `cores.bpf.c` and `progress.bpf.c`.
#![allow(
    clippy::all,
    non_camel_case_types,
    non_upper_case_globals,
    dead_code,
    unused_imports
)]

pub(crate) mod recorder {
    include!(concat!(env!("OUT_DIR"), "/recorder.skel.rs"));
}

pub(crate) mod latency {
    include!(concat!(env!("OUT_DIR"), "/latency.skel.rs"));
}

pub(crate) mod cores {
    include!(concat!(env!("OUT_DIR"), "/cores.skel.rs"));
}

pub(crate) mod progress {
    include!(concat!(env!("OUT_DIR"), "/progress.skel.rs"));
}
