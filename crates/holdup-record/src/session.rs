//! One recording session: launch the command, load the recorder, drain it
//! into the trace while the target runs, flush and symbolize at the end.

use crate::convert::{Converter, Counts};
use crate::embed_symbols;
use crate::flight::TraceOut;
use crate::launch::ExitStatus;
use crate::recording::{Flow, Recording, Until};
use anyhow::Context;
use holdup_bpf::{Lost as RecorderLost, Recorder, RecorderOptions, Target};
use holdup_trace::flight::FlightBuffer;
use holdup_trace::{features, Finish, Header, Record, SyscallConfig, Writer};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Plain configuration, independent of the command line.
#[derive(Clone, Debug)]
pub struct Config {
    pub output: PathBuf,
    pub target: Target,
    pub command: Vec<String>,
    pub period_ns: u64,
    pub duration: Option<Duration>,
    pub verbose: bool,
    pub options: RecorderOptions,
    /// `--cgroup`: the cgroup the recording is limited to (the programs
    /// filter by `options.cgroup`; this is for the processes that exist at
    /// the start and to notice the cgroup's removal).
    pub cgroup: Option<crate::cgroup::Cgroup>,
    /// `--flight`: keep only the end of the recording, in memory, and write
    /// it when asked.
    pub flight: Option<crate::flight::FlightConfig>,
}

/// What a recording produced, for the closing status line.
#[derive(Debug)]
pub struct Summary {
    pub counts: Counts,
    /// Records the kernel side did not write, by cause and kind.
    pub lost: RecorderLost,
    /// Mapping events the perf buffers dropped.
    pub lost_mmaps: u64,
    /// Records that could not be parsed.
    pub unparsable: u64,
    /// Bytes of the trace file.
    pub size: u64,
    /// How the command ended (None without a command).
    pub exit: Option<ExitStatus>,
    /// Files that could not be symbolized (changed or unreadable), with
    /// why.
    pub failed_files: Vec<(String, String)>,
    /// Files of the traced processes the unwinder did not read (not
    /// regular files, or too large to copy), with why.
    pub refused_files: Vec<(String, String)>,
    /// (record kind, count, bytes) in the trace.
    pub writer_stats: Vec<(&'static str, u64, u64)>,
    pub timings: Timings,
    /// What the perf maps and jitdumps of the processes gave, and what the
    /// user should know of them.
    pub jit: holdup_symbolize::jit::JitStats,
    pub notes: Vec<String>,
    /// Distinct addresses symbolized, and how many came from the cache.
    pub addresses: usize,
    pub cached_addresses: usize,
    /// The sys_exit fallback for threads without rseq had to be attached.
    pub fallback: bool,
    /// Blocked samples of threads without rseq given their user stack by
    /// a task work instead.
    pub task_work_stacks: u64,
    /// Blocked samples of threads without rseq written without a user
    /// stack (no task work served them; a stack budget attaches no
    /// fallback).
    pub user_stacks_given_up: u64,
    pub kstacks: holdup_bpf::KstackCounts,
    /// What loading the recorder's programs cost.
    pub load_cost: holdup_bpf::LoadCost,
    /// What the stack budget took, with one.
    pub stack_budget: Option<holdup_bpf::StackBudgetCounts>,
    pub unwinds: holdup_symbolize::UnwindStats,
}

/// Where a recording's time went.
#[derive(Clone, Copy, Debug)]
pub struct Timings {
    /// From the call until the command ran (or sampling began).
    pub startup: Duration,
    /// While the target ran.
    pub recorded: Duration,
    /// From the end of the target until the trace was complete.
    pub finishing: Duration,
    pub symbolization: Duration,
    /// CPU time this process used while the target ran.
    pub drain_cpu: Duration,
    /// CPU time this process used after it (the last drain, detaching,
    /// symbolization).
    pub finish_cpu: Duration,
}

impl Summary {
    /// Every count of what was lost, by its name in the trace.
    pub fn lost_named(&self) -> Vec<(String, u64)> {
        crate::lost::named(&self.lost, self.unparsable, self.lost_mmaps)
    }
}

/// The lowest descriptor number from `from` on that is not open.
fn free_fd(from: i32) -> Option<i32> {
    (from..from + 1000).find(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0)
}

/// A target that keeps every CPU busy with hundreds of runnable threads
/// would leave the drain loop a sliver of CPU, too little to empty the ring
/// buffer: events would be lost. A higher priority for this thread only
/// (nice is per thread on Linux; the command was forked before) keeps it
/// ahead; it takes the same CPU time, only sooner. Without the privilege
/// to raise it, the default stays.
pub(crate) fn drain_ahead_of_the_target() {
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -10) };
}

/// CPU time used by this process so far (user + system).
pub(crate) fn own_cpu() -> Duration {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

pub(crate) fn header(cfg: &Config, start_ns: u64) -> Header {
    let uname = |f: fn(&libc::utsname) -> &[libc::c_char]| {
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        unsafe { libc::uname(&mut u) };
        let bytes: Vec<u8> = f(&u)
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Header {
        holdup_version: env!("CARGO_PKG_VERSION").to_string(),
        period_ns: cfg.period_ns,
        start_ns,
        start_unix_ns: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        hostname: uname(|u| &u.nodename),
        kernel: uname(|u| &u.release),
        ncpus: holdup_bpf::perf::online_cpus().map_or(0, |c| c.len() as u32),
        command: cfg.command.clone(),
        target: match (&cfg.target, cfg.command.is_empty()) {
            (Target::All, _) => "all".into(),
            (_, false) => "command".into(),
            _ => "pid".into(),
        },
        pids: match &cfg.target {
            Target::Pids(p) => p.clone(),
            Target::All => Vec::new(),
        },
        stack_copy_bytes: cfg.options.stack_copy_bytes,
    }
}

/// The trace file itself: the writer sends each chunk whole in one write,
/// so a buffer in between would only copy it once more.
type Out = TraceOut;

/// Take what cannot wait: the address-space events (their per-CPU buffers
/// are small) and the fallbacks the threads seen so far need.
fn collect<W: Write>(rec: &mut Recorder, d: &mut Converter<W>) -> anyhow::Result<()> {
    rec.attach_fallbacks()?;
    rec.drain_address_events(|ev| d.queue_address_event(ev));
    d.sort_address_events();
    d.python.hand_over(rec);
    hand_over_go_processes(rec, d);
    Ok(())
}

/// The Go processes recognised since the last call, to the recorder (it
/// probes their scheduler from now on), and those gone. A process that
/// cannot be probed is recorded as before, and said.
fn hand_over_go_processes<W: Write>(rec: &mut Recorder, d: &mut Converter<W>) {
    d.goroutines.recognise(|pid| rec.tracks(pid));
    let (set, gone) = d.goroutines.take_changes();
    for (pid, path, binary) in set {
        let probes = crate::goroutines::probes(&binary);
        let config = crate::goroutines::config(&binary);
        if let Err(e) = rec.follow_goroutines(pid, Path::new(&path), &probes, &config) {
            d.goroutines.attach_failed(pid, &e.to_string());
        }
    }
    for pid in gone {
        rec.forget_goroutines(pid);
    }
}

/// When the drain loop converts the ring buffer's records while the target
/// runs. Converting (unwinding user stacks above all) takes CPU the target
/// shares; records left in the ring cost nothing until the end, when the
/// target no longer runs. So they wait there, but no longer than a second
/// (what a recorder killed outright loses) and never until the ring is half
/// full, or would be within four ticks at the rate of the last one (far
/// from the point where the kernel drops records). A recording of under a
/// second is then converted once, after the target exited, and a longer one
/// each second, at the same cost as before; the conversion left for the end
/// stays bounded.
pub(crate) struct DrainPolicy {
    threshold: u64,
    last_pending: u64,
    last_drain: Instant,
}

impl DrainPolicy {
    const MAX_AGE: Duration = Duration::from_secs(1);

    pub(crate) fn new(ring_bytes: u32) -> Self {
        Self {
            threshold: ring_bytes as u64 / 2,
            last_pending: 0,
            last_drain: Instant::now(),
        }
    }

    /// Whether to convert now, with `pending` bytes in the ring.
    pub(crate) fn due(&mut self, pending: u64) -> bool {
        let growth = pending.saturating_sub(self.last_pending);
        self.last_pending = pending;
        pending + 4 * growth >= self.threshold || self.last_drain.elapsed() >= Self::MAX_AGE
    }

    /// The ring was emptied down to `pending` bytes.
    pub(crate) fn drained(&mut self, pending: u64) {
        self.last_pending = pending;
        self.last_drain = Instant::now();
    }
}

/// What the drain loop lost so far, and what of it the trace has.
#[derive(Default)]
pub(crate) struct Losses {
    pub(crate) unparsable: u64,
    written: crate::lost::Written,
}

/// Move everything the recorder has into the trace, and with it the counts
/// of what was lost so far (in the same chunk: a trace cut after it still
/// says what was lost up to there).
pub(crate) fn drain<W: Write>(
    rec: &mut Recorder,
    d: &mut Converter<W>,
    losses: &mut Losses,
) -> anyhow::Result<()> {
    collect(rec, d)?;
    let mut err = None;
    let stats = rec.drain_records(|r| {
        if err.is_none() {
            err = d.record(r).err();
        }
    });
    losses.unparsable += stats.unparsable as u64;
    d.apply_all_address_events();
    if let Some(e) = err {
        return Err(e).context("writing the trace");
    }
    let counts = crate::lost::named(&rec.lost(), losses.unparsable, rec.lost_mmaps());
    losses
        .written
        .write_changes(counts, &mut d.writer)
        .context("writing the trace")?;
    d.writer.flush_chunk().context("writing the trace")
}

/// Each process's system call totals, which the kernel summed.
fn write_syscall_totals(rec: &Recorder, d: &mut Converter<Out>) -> anyhow::Result<()> {
    for (k, t) in rec.syscall_totals() {
        d.writer
            .write(&Record::SyscallTotals(holdup_trace::SyscallTotals {
                pid: k.pid,
                nr: k.nr,
                count: t.count,
                total_ns: t.total_ns,
                blocked: t.blocked,
                min_flt: t.min_flt,
                maj_flt: t.maj_flt,
                hist: t.hist.to_vec(),
            }))?;
    }
    Ok(())
}

/// The trace file with its header and what comes before any record: the
/// system call settings, the processes that exist already.
fn open_trace(cfg: &Config, start_ns: u64) -> anyhow::Result<Converter<Out>> {
    let file = holdup_trace::create_private(&cfg.output)
        .with_context(|| format!("cannot create {}", cfg.output.display()))?;
    let header = header(cfg, start_ns);
    let out = match &cfg.flight {
        None => TraceOut::File(file),
        Some(f) => TraceOut::Flight {
            buffer: Box::new(FlightBuffer::new(
                f.keep.as_nanos() as u64,
                f.max_bytes,
                f.trigger,
            )),
            file,
            header: header.clone(),
            features: trace_features(cfg),
        },
    };
    start_trace(cfg, &header, out)
}

/// What the trace's records will carry, as its header says.
fn trace_features(cfg: &Config) -> u32 {
    let mut features = 0;
    if cfg.options.segments {
        features |= features::SEGMENTS;
    }
    if cfg.options.block_io {
        features |= features::BLOCK_IO;
    }
    features
}

/// A trace written to `out`: its header, the system call settings, the
/// processes that exist already.
pub(crate) fn start_trace<W: Write>(
    cfg: &Config,
    header: &Header,
    out: W,
) -> anyhow::Result<Converter<W>> {
    let start_ns = header.start_ns;
    let writer = Writer::new(out, header, trace_features(cfg)).context("writing the trace")?;
    let mut d = Converter::new(writer);
    d.goroutines = crate::goroutines::Goroutines::new(cfg.options.goroutines, cfg.cgroup.clone());
    if let Some(sc) = &cfg.options.syscalls {
        d.writer
            .write(&Record::SyscallConfig(SyscallConfig {
                keep_ns: sc.keep_ns,
                sample_every: sc.sample_every,
            }))
            .context("writing the trace")?;
    }
    let existing: Vec<u32> = match &cfg.target {
        Target::Pids(p) => p.clone(),
        Target::All => std::fs::read_dir("/proc")?
            .flatten()
            .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
            .filter(|&p| p != std::process::id())
            .filter(|&p| !matches!(&cfg.cgroup, Some(c) if !c.holds(p)))
            .collect(),
    };
    for &pid in &existing {
        d.load_existing(pid);
        d.goroutines.existing(pid);
        let _ = d.name_existing(pid, start_ns);
    }
    Ok(d)
}

/// What asked the flight recorder for its trace, if anything did.
fn flight_trigger(f: &FlightBuffer) -> Option<String> {
    if crate::flight::dump_asked() {
        return Some("SIGUSR1 asked for the flight recorder's trace".into());
    }
    let (pid, tid, nr, ns) = f.trigger()?;
    Some(format!(
        "{} took {:.1} ms in process {pid} thread {tid}",
        holdup_analysis::syscalls::name(nr),
        ns as f64 / 1e6
    ))
}

/// Record as `cfg` says, writing the trace as it goes, until the command
/// exits, the duration is over or a signal arrives.
pub fn record(cfg: &Config) -> anyhow::Result<Summary> {
    let invoked = Instant::now();
    // The command is forked first and held before exec, so that it can be
    // tracked from its first instruction.
    // The command is forked before the map exists, so it cannot inherit
    // it: it takes it from us with pidfd_getfd(2), at a descriptor number
    // chosen now and passed in its environment.
    let debox_fd = match &cfg.options.syscalls {
        Some(s) if s.inband => {
            let fd = free_fd(500).context("no free descriptor for the in-band map")?;
            std::env::set_var("HOLDUP_DEBOX", format!("{}:{fd}", std::process::id()));
            Some(fd)
        }
        _ => None,
    };
    if cfg.flight.is_some() {
        crate::flight::catch_dump_signal();
    }
    let until = Until::of(&cfg.target, cfg.duration);
    let mut recording = Recording::launch(&cfg.command, until)?;
    let mut rec = Recorder::start(cfg.options.clone()).context("starting the recorder")?;
    if let Some(fd) = debox_fd {
        use std::os::fd::AsRawFd;
        if unsafe { libc::dup2(rec.debox_fd().as_raw_fd(), fd) } < 0 {
            return Err(std::io::Error::last_os_error()).context("passing the in-band map");
        }
    }
    if let Some(pid) = recording.pid() {
        rec.track(pid)?;
    }
    let func_watch = match cfg.flight.as_ref().and_then(|f| f.func_trigger.as_ref()) {
        Some(t) => {
            let w = crate::flight::FuncWatch::start(t, &cfg.target, cfg.options.follow_children)
                .context("timing the --trigger-latency function")?;
            if let Some(pid) = recording.pid() {
                w.track(pid)?;
            }
            Some(w)
        }
        None => None,
    };
    let start_ns = holdup_bpf::monotonic_ns();
    rec.set_start(start_ns);
    let mut d = open_trace(cfg, start_ns)?;
    d.set_waker_stacks(rec.waker_stacks());
    if let Some(pid) = recording.pid() {
        // Until it execs, the command is a copy of this process.
        d.load_existing(pid);
        if let Some(command) = cfg.command.first() {
            d.goroutines.launched(pid, command);
        }
    }
    d.python.hand_over(&mut rec);
    hand_over_go_processes(&mut rec, &mut d);
    drain_ahead_of_the_target();
    if let Err(e) = recording.start() {
        drop(d);
        let _ = std::fs::remove_file(&cfg.output);
        return Err(e);
    }

    let began = recording.began();
    let startup = began - invoked;
    let cpu_at_start = own_cpu();
    let mut losses = Losses::default();
    let mut policy = DrainPolicy::new(cfg.options.ring_bytes);
    let stop = recording.run(Duration::from_millis(50), &[], || {
        if let Some(cg) = cfg.cgroup.as_ref().filter(|c| !c.still_there()) {
            eprintln!(
                "holdup: cgroup {} was removed; the recording ends here",
                cg.path
            );
            return Ok(Flow::Done);
        }
        if policy.due(rec.ring_pending()) {
            drain(&mut rec, &mut d, &mut losses)?;
            policy.drained(rec.ring_pending());
            d.jit.refresh();
        } else {
            collect(&mut rec, &mut d)?;
        }
        let why = d
            .writer
            .get_ref()
            .flight()
            .and_then(flight_trigger)
            .or_else(|| func_watch.as_ref().and_then(|w| w.triggered()));
        if let Some(why) = why {
            let keep = cfg.flight.as_ref().map_or(0.0, |f| f.keep.as_secs_f64());
            eprintln!("holdup: {why}: writing the last {keep} s");
            return Ok(Flow::Done);
        }
        Ok(Flow::Continue)
    })?;
    let exit = stop.status();

    let ended = Instant::now();
    // What the drain loop took while the target ran: the cost it shares
    // the CPUs with. Detaching and the last drain are finishing.
    let cpu_recording = own_cpu() - cpu_at_start;
    // Threads still off-CPU (and samples still waiting for a user stack).
    rec.flush_open()?;
    drain(&mut rec, &mut d, &mut losses)?;
    let end_ns = holdup_bpf::monotonic_ns();
    let lost = rec.lost();
    let fallback = rec.fallback_attached();
    let task_work_stacks = rec.task_work_stacks();
    let user_stacks_given_up = rec.user_stacks_given_up();
    if user_stacks_given_up > 0 {
        d.writer
            .write(&Record::Note(user_stacks_given_up_note(
                user_stacks_given_up,
            )))
            .context("writing the trace")?;
    }
    let kstacks = rec.kstack_counts();
    let load_cost = rec.load_cost().clone();
    let stack_budget = (cfg.options.stack_budget > 0).then(|| rec.stack_budget_counts());
    if let Some(b) = &stack_budget {
        d.writer
            .write(&Record::Note(stack_budget_note(b, cfg.period_ns)))
            .context("writing the trace")?;
    }
    d.python.walks = rec.python_counts();
    d.goroutines.probe_counts = rec.go_counts();
    if cfg.options.syscalls.is_some() {
        write_syscall_totals(&rec, &mut d)?;
    }
    let lost_mmaps = rec.lost_mmaps();
    drop(rec);
    drop(func_watch);

    let recorded_for = ended - began;
    let sym_began = Instant::now();
    let sym = embed_symbols::symbolize(&mut d)?;
    let sym_took = sym_began.elapsed();
    for (irq, name) in embed_symbols::irq_names() {
        d.writer.write(&Record::IrqName { irq, name })?;
    }
    d.writer.write(&Record::Finish(Finish {
        time: end_ns,
        exit_code: exit.map(ExitStatus::as_shell_code),
    }))?;
    let counts = d.counts;
    let unwinds = d.unwind_stats();
    let refused_files = d.refused_files();
    let writer_stats = d.writer.stats().collect();
    let out = d.writer.finish()?.into_file()?;
    let size = out.metadata()?.len();
    Ok(Summary {
        counts,
        lost,
        lost_mmaps,
        unparsable: losses.unparsable,
        size,
        exit,
        failed_files: sym.failed_files,
        jit: sym.jit,
        notes: sym.notes,
        refused_files,
        writer_stats,
        timings: Timings {
            startup,
            recorded: recorded_for,
            finishing: ended.elapsed(),
            symbolization: sym_took,
            drain_cpu: cpu_recording,
            finish_cpu: own_cpu() - cpu_at_start - cpu_recording,
        },
        addresses: sym.frames,
        cached_addresses: sym.cached,
        fallback,
        task_work_stacks,
        user_stacks_given_up,
        kstacks,
        load_cost,
        stack_budget,
        unwinds,
    })
}

/// What readers of a trace are told of the blocked samples written without
/// their user stack (see [`Summary::user_stacks_given_up`]).
pub fn user_stacks_given_up_note(n: u64) -> String {
    format!(
        "{n} blocked samples of threads without rseq have no user stack: no BPF task work took it (kernel before 6.18, or it failed), and with a stack budget no sys_exit hook runs at every system call to take it"
    )
}

/// How the note of [`stack_budget_note`] begins, up to the ratio.
const STACK_BUDGET_NOTE: &str = "blocked-sample stacks were sampled (stack budget): 1 in ";

/// The ratio a trace's stack-budget note states, if it has one.
pub fn stack_budget_ratio(notes: &[String]) -> Option<f64> {
    notes.iter().find_map(|n| {
        n.strip_prefix(STACK_BUDGET_NOTE)?
            .split(' ')
            .next()?
            .parse()
            .ok()
    })
}

/// What every reader of a trace recorded with a stack budget is told: the
/// ratio, and the exact blocked time by subclass the weighted samples
/// estimate.
pub fn stack_budget_note(b: &holdup_bpf::StackBudgetCounts, period_ns: u64) -> String {
    use holdup_trace::Class;
    let secs = |points: u64| points as f64 * period_ns as f64 / 1e9;
    let by_class: Vec<String> = [Class::Io, Class::Lock, Class::Sched, Class::Other]
        .iter()
        .map(|&c| {
            let i = c.index();
            format!(
                "{} {:.3} s (samples {:.3} s)",
                c.name(),
                secs(b.points[i]),
                secs(b.scaled[i])
            )
        })
        .collect();
    format!(
        "{STACK_BUDGET_NOTE}{:.2} blocked intervals had its stacks taken ({} of {}), each weighted by the inverse of its odds; exact blocked time {}",
        b.ratio(),
        b.stacks,
        b.intervals,
        by_class.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::{stack_budget_note, stack_budget_ratio, DrainPolicy};

    #[test]
    fn the_stack_budget_notes_ratio_reads_back() {
        let b = holdup_bpf::StackBudgetCounts {
            intervals: 10,
            stacks: 4,
            ..Default::default()
        };
        let notes = ["other".to_string(), stack_budget_note(&b, 1_000_000)];
        assert_eq!(stack_budget_ratio(&notes), Some(2.5));
        assert_eq!(stack_budget_ratio(&notes[..1]), None);
    }
    use std::time::{Duration, Instant};

    const MB: u64 = 1 << 20;

    #[test]
    fn records_wait_until_the_ring_fills_or_a_second_passed() {
        let mut p = DrainPolicy::new(64 << 20);
        // A slow trickle waits.
        assert!(!p.due(MB));
        assert!(!p.due(2 * MB));
        // Half full: convert.
        assert!(p.due(32 * MB));
        p.drained(0);
        // At 5 MiB a tick, 15 MiB would pass half within four ticks.
        assert!(!p.due(5 * MB));
        assert!(!p.due(10 * MB));
        assert!(p.due(15 * MB));
        p.drained(0);
        // A second since the last conversion: convert, however little.
        p.last_drain = Instant::now() - Duration::from_millis(1100);
        assert!(p.due(MB));
        p.drained(0);
        assert!(!p.due(MB));
    }
}
