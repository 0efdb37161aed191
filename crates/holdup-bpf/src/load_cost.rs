//! What loading a BPF object cost: the verifier's work is most of a
//! recording's start-up, and grows with every path a program can take
//! (a loop's body is gone through once per iteration the verifier cannot
//! prove alike), so it is measured and shown rather than guessed.

use libbpf_rs::libbpf_sys;
use libbpf_rs::{AsRawLibbpf, Object};
use std::time::Duration;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadCost {
    /// Wall time of the load (the verifier's work, mostly).
    pub took: Duration,
    /// Programs loaded.
    pub programs: u32,
    /// Instructions the verifier went through, over every program.
    pub verified_insns: u64,
    /// The program it went through most instructions of, and how many.
    pub largest: Option<(String, u32)>,
}

impl LoadCost {
    /// The cost of `object`, just loaded in `took`. A program not loaded,
    /// or whose information the kernel does not give, counts nothing.
    pub fn of(object: &Object, took: Duration) -> Self {
        let mut cost = LoadCost {
            took,
            ..Default::default()
        };
        for prog in object.progs() {
            let fd = unsafe { libbpf_sys::bpf_program__fd(prog.as_libbpf_object().as_ptr()) };
            let Some(insns) = verified_insns(fd) else {
                continue;
            };
            cost.programs += 1;
            cost.verified_insns += u64::from(insns);
            if cost.largest.as_ref().is_none_or(|(_, most)| insns > *most) {
                cost.largest = Some((prog.name().to_string_lossy().into_owned(), insns));
            }
        }
        cost
    }
}

/// The verifier's instruction count of the loaded program `fd`.
fn verified_insns(fd: i32) -> Option<u32> {
    if fd < 0 {
        return None;
    }
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    let r = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    (r == 0).then_some(info.verified_insns)
}
