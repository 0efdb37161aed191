//! `record --flight N`: the trace is kept in memory, its events only for
//! the last N seconds, and written when something asks for it: SIGUSR1, a
//! system call slower than `--trigger-latency`, or the end of the recording.

use holdup_trace::flight::{FlightBuffer, SyscallTrigger};
use holdup_trace::Header;
use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The flight recorder's settings.
#[derive(Clone, Debug)]
pub struct FlightConfig {
    /// How much of the recording's end the trace keeps.
    pub keep: Duration,
    /// The most bytes of encoded events held (the oldest go first).
    pub max_bytes: usize,
    /// A system call that, this slow, ends the flight.
    pub trigger: Option<SyscallTrigger>,
}

static DUMP_ASKED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_dump_signal(_: libc::c_int) {
    DUMP_ASKED.store(true, Ordering::SeqCst);
}

/// From now on SIGUSR1 asks for the trace instead of killing the recorder.
pub fn catch_dump_signal() {
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_dump_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
}

/// Whether SIGUSR1 arrived.
pub fn dump_asked() -> bool {
    DUMP_ASKED.load(Ordering::SeqCst)
}

/// Where the trace writer's bytes go: the file, or the flight recorder's
/// memory and, at the end, the file.
pub enum TraceOut {
    File(File),
    Flight {
        buffer: Box<FlightBuffer>,
        file: File,
        header: Header,
        features: u32,
    },
}

impl TraceOut {
    /// The flight recorder's memory, if it is one.
    pub fn flight(&self) -> Option<&FlightBuffer> {
        match self {
            TraceOut::File(_) => None,
            TraceOut::Flight { buffer, .. } => Some(buffer),
        }
    }

    /// The finished trace file: with the flight recorder, written now from
    /// what it kept.
    pub fn into_file(self) -> io::Result<File> {
        match self {
            TraceOut::File(f) => Ok(f),
            TraceOut::Flight {
                buffer,
                file,
                header,
                features,
            } => (*buffer).write_trace(file, &header, features),
        }
    }
}

impl Write for TraceOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            TraceOut::File(f) => f.write(buf),
            TraceOut::Flight { buffer, .. } => buffer.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            TraceOut::File(f) => f.flush(),
            TraceOut::Flight { buffer, .. } => buffer.flush(),
        }
    }
}
