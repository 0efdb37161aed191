//! holdup's recorder: the eBPF programs, their loader and the ring-buffer drainer.
//!
//! Without the default `loader` feature only [`records`] and [`ringbuf`] are
//! built: the record layouts and a libc-only ring consumer.

pub mod records;
pub mod ringbuf;

#[cfg(feature = "loader")]
mod bpf_skel;
#[cfg(feature = "loader")]
pub mod latency;
#[cfg(feature = "loader")]
mod latency_skel;
#[cfg(feature = "loader")]
pub mod perf;
#[cfg(feature = "loader")]
mod recorder;

#[cfg(feature = "loader")]
pub use recorder::{DrainStats, Error, Lost, Recorder, RecorderOptions, Result, Target};
