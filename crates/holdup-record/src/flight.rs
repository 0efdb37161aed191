//! `record --flight N`: the trace is kept in memory, its events only for
//! the last N seconds, and written when something asks for it: SIGUSR1, a
//! system call or a user function slower than `--trigger-latency`, or the
//! end of the recording. A function is timed by `holdup latency`'s probes
//! (uprobe and uretprobe), which note its first call over the threshold.

use holdup_bpf::latency::{LatencyOptions, LatencyProbe, UserFunc};
use holdup_bpf::Target;
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
    /// A user function that, this slow, ends the flight.
    pub func_trigger: Option<FuncTrigger>,
}

/// `--trigger-latency FUNCTION:MS`: the functions a spec named (several
/// for the overloads of a C++ name), each timed.
#[derive(Clone, Debug)]
pub struct FuncTrigger {
    pub spec: String,
    pub funcs: Vec<UserFunc>,
    pub min_ns: u64,
}

/// The probes that time a [`FuncTrigger`]'s functions in the recorded
/// processes.
pub struct FuncWatch {
    probe: LatencyProbe,
    trigger: FuncTrigger,
}

impl FuncWatch {
    pub fn start(
        trigger: &FuncTrigger,
        target: &Target,
        follow_children: bool,
    ) -> anyhow::Result<Self> {
        let probe = LatencyProbe::start(&LatencyOptions {
            target: target.clone(),
            follow_children,
            start_ns: 0,
            // One histogram per process: nothing reads them.
            interval_ns: u64::MAX,
            syscalls: false,
            block: false,
            lock: false,
            kfuncs: Vec::new(),
            ufuncs: trigger.funcs.clone(),
            ftree: Vec::new(),
            slow_ns: trigger.min_ns,
        })?;
        if let Target::Pids(pids) = target {
            for &pid in pids {
                probe.track(pid)?;
            }
        }
        Ok(Self {
            probe,
            trigger: trigger.clone(),
        })
    }

    /// Time the launched command (and its children) too.
    pub fn track(&self, pid: u32) -> anyhow::Result<()> {
        Ok(self.probe.track(pid)?)
    }

    /// What to say once a call was slow enough, if one was.
    pub fn triggered(&self) -> Option<String> {
        let call = self.probe.slow_call()?;
        let name = self
            .trigger
            .funcs
            .get(call.op as usize)
            .map_or(self.trigger.spec.as_str(), |f| f.symbol.as_str());
        Some(format!(
            "{} took {:.1} ms in process {} thread {}",
            holdup_coz::names::readable(name),
            call.ns as f64 / 1e6,
            call.tgid,
            call.tid
        ))
    }
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
