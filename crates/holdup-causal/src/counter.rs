//! COZ's progress-point counter, as `coz.h` and `holdup.h` see it:
//! `_coz_get_counter(type, name)` returns one, which the program then
//! increments atomically, inline. Its layout is COZ's:
//! `struct { size_t count; size_t backoff; }`; backoff is unused.

use std::sync::atomic::AtomicUsize;

/// Kinds of `_coz_get_counter`.
pub const THROUGHPUT: i32 = 1;
pub const BEGIN: i32 = 2;
pub const END: i32 = 3;

#[repr(C)]
#[derive(Default)]
pub struct Counter {
    pub count: AtomicUsize,
    pub backoff: AtomicUsize,
}

const _: () = assert!(std::mem::size_of::<Counter>() == 2 * std::mem::size_of::<usize>());
