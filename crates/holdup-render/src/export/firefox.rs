//! The Firefox Profiler's processed profile format, written with samply's
//! `fxprof-processed-profile`.
//!
//! One process per pid and one track per thread. An on-CPU sample is a
//! sample whose CPU delta is its points times the period; blocked time is
//! samples with zero CPU delta, so the CPU graph stays true while the call
//! tree (weights are points) shows on- and off-CPU time together. Each
//! subclass is a category (CPU, I/O, Lock, Runqueue, Blocked), set on every
//! frame of the sample's stack so the activity graph is coloured by it;
//! blocked stacks end in the subclass's pseudo frame (`[I] io wait`), as in
//! `holdup flame`. Wait segments are interval markers on their thread with
//! the waker and the waiting and runnable parts.

use super::{StackSample, CLASSES};
use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, MarkerFieldFlags,
    MarkerFieldFormat, MarkerTiming, ProcessHandle, Profile, ReferenceTimestamp, SamplingInterval,
    StaticSchemaMarker, StaticSchemaMarkerField, StringHandle, ThreadHandle, Timestamp,
};
use holdup_analysis::folded::leaf_name;
use holdup_analysis::profile::Filter;
use holdup_trace::{Class, Segment, Trace};
use std::collections::BTreeMap;

/// The category name of a subclass, as the profiler shows it.
pub fn category_name(class: Class) -> &'static str {
    match class {
        Class::Cpu => "CPU",
        Class::Io => "I/O",
        Class::Lock => "Lock",
        Class::Sched => "Runqueue",
        Class::Other => "Blocked",
    }
}

fn category_color(class: Class) -> CategoryColor {
    match class {
        Class::Cpu => CategoryColor::Blue,
        Class::Io => CategoryColor::Orange,
        Class::Lock => CategoryColor::Red,
        Class::Sched => CategoryColor::Yellow,
        Class::Other => CategoryColor::Gray,
    }
}

/// A wait segment: `[start, wake)` waiting in a subclass, `[wake, end)`
/// runnable.
#[derive(Debug, Clone)]
struct WaitMarker {
    name: StringHandle,
    category: CategoryHandle,
    waker: StringHandle,
    wait_ms: f64,
    runnable_ms: f64,
}

impl StaticSchemaMarker for WaitMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "HoldupWait";
    const DESCRIPTION: Option<&'static str> =
        Some("Off-CPU interval: waiting in a subclass, then runnable until it ran");
    const CHART_LABEL: Option<&'static str> = Some("{marker.name} ← {marker.data.waker}");
    const TOOLTIP_LABEL: Option<&'static str> = Some("{marker.name}, woken by {marker.data.waker}");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.name} ← {marker.data.waker}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "waker",
            label: "Woken by",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "wait",
            label: "Waiting",
            format: MarkerFieldFormat::Milliseconds,
            flags: MarkerFieldFlags::empty(),
        },
        StaticSchemaMarkerField {
            key: "runnable",
            label: "Runnable",
            format: MarkerFieldFormat::Milliseconds,
            flags: MarkerFieldFlags::empty(),
        },
    ];

    fn name(&self, _: &mut Profile) -> StringHandle {
        self.name
    }
    fn category(&self, _: &mut Profile) -> CategoryHandle {
        self.category
    }
    fn string_field_value(&self, _field_index: u32) -> StringHandle {
        self.waker
    }
    fn number_field_value(&self, field_index: u32) -> f64 {
        if field_index == 1 {
            self.wait_ms
        } else {
            self.runnable_ms
        }
    }
}

/// Processes and threads, created as they are first met.
struct Tracks<'t> {
    trace: &'t Trace,
    processes: BTreeMap<u32, ProcessHandle>,
    threads: BTreeMap<u32, ThreadHandle>,
}

impl Tracks<'_> {
    fn comm(&self, tid: u32) -> &str {
        match self.trace.threads.get(&tid) {
            Some(t) if !t.comm.is_empty() => &t.comm,
            _ => "[unknown]",
        }
    }

    fn time(&self, ns: u64) -> Timestamp {
        Timestamp::from_nanos_since_reference(ns.saturating_sub(self.trace.header.start_ns))
    }

    fn thread(&mut self, profile: &mut Profile, pid: u32, tid: u32) -> ThreadHandle {
        if let Some(&t) = self.threads.get(&tid) {
            return t;
        }
        let info = self.trace.threads.get(&tid);
        let start = self.time(info.map_or(0, |t| t.start));
        let process = match self.processes.get(&pid) {
            Some(&p) => p,
            None => {
                let p = profile.add_process(self.comm(pid), pid, start);
                self.processes.insert(pid, p);
                p
            }
        };
        let t = profile.add_thread(process, tid, start, tid == pid);
        profile.set_thread_name(t, self.comm(tid));
        if let Some(end) = info.map(|t| t.end).filter(|&e| e != 0) {
            profile.set_thread_end_time(t, self.time(end));
        }
        self.threads.insert(tid, t);
        t
    }
}

/// The profile of the samples (and of the kept threads' wait segments).
pub fn profile(trace: &Trace, samples: &[StackSample], filter: &Filter, name: &str) -> Profile {
    let period = trace.header.period_ns.max(1);
    let mut profile = Profile::new(
        name,
        ReferenceTimestamp::from_millis_since_unix_epoch(trace.header.start_unix_ns as f64 / 1e6),
        SamplingInterval::from_nanos(period),
    );
    profile.set_symbolicated(true);
    profile.set_os_name("Linux");
    let categories: Vec<CategoryHandle> = CLASSES
        .iter()
        .map(|&c| profile.add_category(category_name(c), category_color(c)))
        .collect();
    let category = |c: Class| categories[CLASSES.iter().position(|&x| x == c).unwrap_or(0)];
    let mut tracks = Tracks {
        trace,
        processes: BTreeMap::new(),
        threads: BTreeMap::new(),
    };

    // Samples of a thread in time order: blocked samples are written when
    // the thread runs again, after on-CPU samples that came later.
    let mut ordered: Vec<&StackSample> = samples.iter().collect();
    ordered.sort_by_key(|s| (s.tid, s.time));
    for s in ordered {
        let thread = tracks.thread(&mut profile, s.pid, s.tid);
        let pair = category(s.class).into();
        let mut frames: Vec<FrameInfo> = Vec::new();
        for f in s.frames.iter().rev() {
            // Outermost function of an inlined chain first.
            for func in f.funcs.iter().rev() {
                frames.push(FrameInfo {
                    frame: Frame::Label(profile.intern_string(&func.name)),
                    category_pair: pair,
                    flags: FrameFlags::empty(),
                });
            }
        }
        if let Some(leaf) = leaf_name(s.class) {
            frames.push(FrameInfo {
                frame: Frame::Label(profile.intern_string(leaf)),
                category_pair: pair,
                flags: FrameFlags::empty(),
            });
        }
        let stack = profile.intern_stack_frames(thread, frames.into_iter());
        let cpu = if s.class == Class::Cpu {
            CpuDelta::from_nanos(s.points.saturating_mul(period))
        } else {
            CpuDelta::ZERO
        };
        let weight = i32::try_from(s.points).unwrap_or(i32::MAX);
        profile.add_sample(thread, tracks.time(s.time), stack, cpu, weight);
    }

    for seg in &trace.segments {
        if !filter.keeps(seg.pid, seg.tid, tracks.comm(seg.tid)) {
            continue;
        }
        let thread = tracks.thread(&mut profile, seg.pid, seg.tid);
        let marker = wait_marker(trace, &mut profile, seg, category(seg.class));
        let timing = MarkerTiming::Interval(tracks.time(seg.start), tracks.time(seg.end));
        profile.add_marker(thread, timing, marker);
    }
    profile
}

fn wait_marker(
    trace: &Trace,
    profile: &mut Profile,
    seg: &Segment,
    category: CategoryHandle,
) -> WaitMarker {
    // Runqueue time is runnable throughout; without a wakeup (still
    // blocked at the end) the whole interval waited in its subclass.
    let wake = match seg.class {
        Class::Sched => seg.start,
        _ if seg.wake == 0 => seg.end,
        _ => seg.wake,
    };
    let ms = |ns: u64| ns as f64 / 1e6;
    WaitMarker {
        name: profile.intern_string(&format!("{} wait", category_name(seg.class))),
        category,
        waker: profile.intern_string(&trace.waker_name(seg.waker)),
        wait_ms: ms(wake.saturating_sub(seg.start)),
        runnable_ms: ms(seg.end.saturating_sub(wake)),
    }
}
