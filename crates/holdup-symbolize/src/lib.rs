//! Addresses to frames.
//!
//! Three pieces, used by the recorder's drainer while the target runs and by
//! reports afterwards:
//!
//! - [`AddressSpaces`]: which file is mapped where, per process, kept up to
//!   date from mmap/fork/exec/exit events or `/proc/PID/maps`.
//! - [`Unwinder`]: turns the registers, frame-pointer chain and stack copy the
//!   BPF recorder captured into a list of return addresses. The top frames are
//!   unwound with DWARF CFI (via `framehop`), because Debian's glibc and most
//!   distribution libraries are built without frame pointers: a pure
//!   frame-pointer walk from inside `pread` or `pthread_mutex_lock` skips the
//!   application function that called them. Where the stack copy ends, the
//!   walk continues on the kernel-side frame-pointer chain.
//! - [`Symbolizer`]: file offsets to functions, source lines and inlined
//!   frames (via `blazesym`), kernel addresses via `/proc/kallsyms`.
//!
//! ```no_run
//! use holdup_symbolize::{AddressSpaces, Symbolizer, Unwinder, UserStack};
//!
//! let pid = std::process::id();
//! let mut spaces = AddressSpaces::new();
//! spaces.load_proc_maps(pid)?;
//! let mut unwinder = Unwinder::new();
//! # let (ip, sp, bp) = (0, 0, 0);
//! let stack = UserStack { ip, sp, bp, fp_chain: &[], copy: &[] };
//! let addrs = unwinder.unwind(&spaces, pid, &stack);
//! let mut symbolizer = Symbolizer::new();
//! for (i, &addr) in addrs.iter().enumerate() {
//!     // Return addresses point after the call: look up the call itself.
//!     let lookup = if i == 0 { addr } else { addr - 1 };
//!     if let Some(m) = spaces.find(pid, addr) {
//!         let offset = lookup - m.start + m.file_offset;
//!         let frames = symbolizer.symbolize_file(m.path.as_ref(), m.build_id.as_deref(), &[offset]);
//!         println!("{frames:?}");
//!     }
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

//!
//! Without the default feature `symbolize`, only [`lines`], [`functions`]
//! and [`python`] are built: the source lines and functions of machine
//! code, and the lines of Python frames, which the causal runtime (inside
//! every profiled program) needs without blazesym, framehop or an HTTP
//! client.

#[cfg(feature = "symbolize")]
pub mod callgraph;
#[cfg(feature = "symbolize")]
pub mod debuginfo;
#[cfg(feature = "symbolize")]
mod elf;
pub mod functions;
#[cfg(feature = "symbolize")]
pub mod golang;
#[cfg(feature = "symbolize")]
pub mod jit;
#[cfg(feature = "symbolize")]
pub mod jitdump;
#[cfg(feature = "symbolize")]
mod kallsyms;
pub mod lines;
#[cfg(feature = "symbolize")]
mod maps;
#[cfg(feature = "symbolize")]
pub mod perfmap;
pub mod python;
#[cfg(feature = "symbolize")]
mod symbolizer;
/// Opening traced processes' files (its own crate, which the causal
/// runtime's line tables use too).
pub use holdup_traced as traced;
#[cfg(feature = "symbolize")]
mod unwind;

#[cfg(feature = "symbolize")]
pub use elf::read_build_id;
#[cfg(feature = "symbolize")]
pub use kallsyms::KernelSymbols;
#[cfg(feature = "symbolize")]
pub use maps::{parse_maps, AddressSpaces, Mapping};
#[cfg(feature = "symbolize")]
pub use symbolizer::{Frame, Symbolizer};
#[cfg(feature = "symbolize")]
pub use unwind::{UnwindStats, Unwinder, UserStack, MAX_FRAMES};

#[cfg(feature = "symbolize")]
/// Why a file could not be symbolized. The caller falls back to showing
/// `dso+offset` for its frames.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be opened or mapped.
    #[error("cannot read {path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not an ELF file we can read.
    #[error("{path} is not a readable ELF file: {reason}")]
    BadElf {
        path: std::path::PathBuf,
        reason: String,
    },
    /// The file at the path is not the one that was mapped when recording.
    #[error("{path} changed since it was recorded (build-id {found}, expected {expected}); symbolize on the machine that recorded, or keep the old file")]
    BuildIdMismatch {
        path: std::path::PathBuf,
        expected: String,
        found: String,
    },
    /// blazesym failed on the file as a whole.
    #[error("symbolization of {path} failed: {source}")]
    Symbolize {
        path: std::path::PathBuf,
        #[source]
        source: blazesym::Error,
    },
}
