//! The fuzz targets: every parser of a file or text that `holdup` reads and
//! did not write itself in this run, each followed by everything a command
//! does with what it parsed, minus the terminal. Errors are fine; panics,
//! hangs and allocations out of proportion to the input are the bugs.
//!
//! Each target returns whether the input parsed (so a run can tell how
//! often its mutations get past the parser).

use holdup_analysis::causal;
use holdup_analysis::folded::{folded, FoldOptions};
use holdup_analysis::latency as lat;
use holdup_analysis::profile::{self, Filter, Section};
use holdup_analysis::syscalls;
use holdup_analysis::waitgraph::{self, InMemory};
use holdup_render::export::{self, firefox, perfetto, pprof, speedscope};
use holdup_render::flame::{self, FlameOptions};
use holdup_render::html::{self, Page, WaitGraph};
use holdup_render::report::{self as text, ReportOptions};
use holdup_render::waitgraph as wg_render;
use holdup_symbolize::{AddressSpaces, KernelSymbols, Mapping, Symbolizer, Unwinder, UserStack};
use holdup_trace::latency::parse_latency;
use holdup_trace::{symfile, Reader, Trace};
use std::io::sink;

/// One fuzz target.
pub struct Target {
    pub name: &'static str,
    /// What it reads.
    pub about: &'static str,
    /// Run one input; true if it parsed.
    pub run: fn(&[u8]) -> bool,
    /// Valid inputs to start mutating from.
    pub seeds: fn() -> Vec<Vec<u8>>,
}

pub static TARGETS: &[Target] = &[
    Target {
        name: "trace",
        about: "holdup.data: the reader, then report, script, flame, html, export, syscalls and waitgraph",
        run: trace,
        seeds: crate::seeds::traces,
    },
    Target {
        name: "latency",
        about: "the latency file: the reader, then latency report, explain and diff",
        run: latency,
        seeds: crate::seeds::latency_files,
    },
    Target {
        name: "coz",
        about: "a causal profile in COZ's format: causal report",
        run: coz,
        seeds: crate::seeds::coz_profiles,
    },
    Target {
        name: "symcache",
        about: "symbol cache files: a file's symbols by offset, and the kernel's symbol table",
        run: symcache,
        seeds: crate::seeds::symbol_caches,
    },
    Target {
        name: "maps",
        about: "/proc/PID/maps text, into address spaces and lookups",
        run: maps,
        seeds: crate::seeds::proc_maps,
    },
    Target {
        name: "perfmap",
        about: "a JIT's perf map (/tmp/perf-PID.map): its code ranges and names, and lookups",
        run: perf_map,
        seeds: crate::seeds::perf_maps,
    },
    Target {
        name: "jitdump",
        about: "a JIT's jitdump file (jit-PID.dump): loads, moves, line tables, and lookups",
        run: jitdump,
        seeds: crate::seeds::jitdumps,
    },
    Target {
        name: "elf",
        about: "an ELF file: build-id, DWARF symbolization, CFI unwinding and the static call graph",
        run: elf,
        seeds: crate::seeds::elf_files,
    },
];

pub fn by_name(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// Run `target` on `input` for libFuzzer: a panic that holdup lets through
/// aborts (a crash libFuzzer keeps), one it catches itself (blazesym's on
/// malformed DWARF, see `Symbolizer::symbolize_file`) does not. libFuzzer's
/// own hook would abort at every panic, caught or not.
pub fn for_libfuzzer(target: fn(&[u8]) -> bool, input: &[u8]) {
    use std::sync::{Mutex, Once};
    static HOOK: Once = Once::new();
    // The last panic, kept by the hook (where it has its location) for
    // the abort to tell.
    static LAST: Mutex<Option<String>> = Mutex::new(None);
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let what = format!("{info}\n{}", std::backtrace::Backtrace::force_capture());
            *LAST.lock().unwrap_or_else(|e| e.into_inner()) = Some(what);
        }))
    });
    if std::panic::catch_unwind(|| target(input)).is_err() {
        let last = LAST.lock().unwrap_or_else(|e| e.into_inner()).take();
        eprintln!("holdup-fuzz: {}", last.unwrap_or_default());
        std::process::abort();
    }
}

/// `holdup report`, `script`, `flame`, `html`, `export`, `syscalls` and
/// `waitgraph` on a trace. The chunk checksums are made right first, so
/// that mutations reach the record decoder and the analyses (a damaged
/// checksum is the reader's simplest case, and its own tests cover it).
pub fn trace(input: &[u8]) -> bool {
    let input = crate::mutate::with_trace_checksums(input);
    let Ok(mut reader) = Reader::new(&input[..], "fuzz") else {
        return false;
    };
    let Ok(trace) = Trace::read(&mut reader) else {
        return false;
    };
    let p = profile::profile(&trace, &Filter::default());
    let _ = holdup_render::report::write_json(&p, sink());
    for section in [
        Section::Thread,
        Section::Process,
        Section::Comm,
        Section::All,
    ] {
        let mut grouped = p.clone();
        grouped.threads = profile::group(std::mem::take(&mut grouped.threads), section);
        let o = ReportOptions {
            children: section == Section::Thread,
            ..Default::default()
        };
        let _ = text::render(&mut sink(), &grouped, &o);
    }
    for per_thread in [false, true] {
        let stacks = folded(
            &trace,
            &FoldOptions {
                per_thread,
                ..Default::default()
            },
        );
        let _ = holdup_analysis::folded::write_folded(&mut sink(), &stacks);
        if !stacks.is_empty() && !per_thread {
            let o = FlameOptions {
                title: "fuzz".into(),
            };
            let _ = flame::render(&stacks, &o, &mut sink());
        }
    }
    exports(&trace, &p);
    let report = syscalls::analyze(
        &trace,
        &syscalls::Options {
            pids: Vec::new(),
            slowest: 5,
        },
    );
    if let Ok(r) = report {
        let _ = holdup_render::syscalls::write_json(&r, sink());
        let _ = holdup_render::syscalls::render(&mut sink(), &r);
    }
    waitgraph_of(&input);
    true
}

/// Addresses to look up in generated code: every 8-byte word of the input
/// (so that mutations reach the ranges it names), and the edges of the
/// address space.
fn lookups(input: &[u8]) -> Vec<u64> {
    let mut addrs: Vec<u64> = input
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
        .take(64)
        .collect();
    addrs.extend([0, 1, u64::MAX]);
    addrs
}

/// A perf map, read and looked up as a recording does.
pub fn perf_map(input: &[u8]) -> bool {
    let hex: Vec<u64> = input
        .split(|&b| b == b' ' || b == b'\n')
        .filter_map(|w| {
            u64::from_str_radix(std::str::from_utf8(w).ok()?.trim_start_matches("0x"), 16).ok()
        })
        .take(64)
        .collect();
    let mut addrs = lookups(input);
    addrs.extend(
        hex.iter()
            .flat_map(|&a| [a, a.wrapping_add(1), a.wrapping_sub(1)]),
    );
    let frames = holdup_symbolize::jit::frames_in(false, input, &addrs);
    frames.iter().any(|f| !f.is_empty())
}

/// A jitdump file, read and looked up as a recording does; it parsed if
/// its header did.
pub fn jitdump(input: &[u8]) -> bool {
    holdup_symbolize::jit::frames_in(true, input, &lookups(input));
    holdup_symbolize::jitdump::parse_header(input).is_ok()
}

/// `holdup html` and `holdup export` in every format.
fn exports(trace: &Trace, p: &profile::Profile) {
    let filter = Filter::default();
    let samples = export::stack_samples(trace, &filter);
    let critical = holdup_analysis::holder::critical_folded(trace, &|_| true);
    let _ = html::render(&Page {
        title: "fuzz",
        trace,
        profile: p,
        samples: &samples,
        waitgraph: WaitGraph::Missing("fuzz".into()),
        critical: Ok(&critical),
        causal: None,
    });
    let _ = pprof::encode(trace, &samples);
    let _ = serde_json::to_vec(&firefox::profile(trace, &samples, &filter, "fuzz"));
    let _ = perfetto::encode(trace, &samples, &filter);
    let _ = serde_json::to_vec(&speedscope::document(trace, &samples, "fuzz"));
}

/// `holdup waitgraph`: text, JSON and DOT.
fn waitgraph_of(input: &[u8]) {
    let Ok(mut reader) = Reader::new(input, "fuzz") else {
        return;
    };
    let mut records = Vec::new();
    if reader.for_each(|r| records.push(r)).is_err() {
        return;
    }
    let mut src = InMemory {
        header: reader.header.clone(),
        features: reader.features,
        records: &records,
    };
    if let Ok(g) = waitgraph::analyze(&mut src, &waitgraph::Options::default()) {
        let _ = wg_render::render(&mut sink(), &g, &wg_render::TextOptions::default());
        let _ = wg_render::write_json(sink(), &g);
        let _ = wg_render::to_dot(&g, &wg_render::DotOptions::default());
    }
}

/// `holdup latency report` (with and without a time lapse), `explain` of
/// every operation and `diff` of the file with itself. The body's length
/// and checksum are made right first, as for traces.
pub fn latency(input: &[u8]) -> bool {
    let input = crate::mutate::with_latency_checksum(input);
    let Ok(data) = parse_latency(&input, "fuzz") else {
        return false;
    };
    for lapse in [None, Some(2)] {
        let ops = lat::operations(&data, lapse);
        let _ = holdup_render::latency::render(&data, &ops);
        let _ = holdup_render::latency::to_json(&data, &ops).to_string();
    }
    let ops = lat::operations(&data, None);
    for op in &ops {
        if let Some(peaks) = lat::explain(op, &data) {
            let _ = holdup_render::latency::render_explain(op, &peaks);
            let _ = holdup_render::latency::explain_to_json(&data, op, &peaks).to_string();
        }
    }
    let diffs = lat::diff(&data, &data);
    let _ = holdup_render::latency::render_diff("a", "b", &diffs);
    let _ = holdup_render::latency::diff_to_json(&diffs).to_string();
    true
}

/// `holdup causal report`: the COZ-format profile parser, the analysis and
/// both renderings.
pub fn coz(input: &[u8]) -> bool {
    let Ok(p) = causal::CozProfile::parse(input) else {
        return false;
    };
    let c = causal::analyze(&p);
    let _ = holdup_render::causal::write_text(&c, sink());
    let _ = holdup_render::causal::write_json(&c, sink());
    true
}

/// A symbol cache entry (and the cached kernel symbol table, the same
/// text in `/proc/kallsyms` form). What is parsed formats to text that
/// parses to the same symbols.
pub fn symcache(input: &[u8]) -> bool {
    let text = String::from_utf8_lossy(input);
    let kernel = KernelSymbols::parse(&text);
    for (addr, _) in kernel.iter().take(64) {
        let _ = kernel.find(addr);
        let _ = kernel.find(addr.wrapping_add(1));
        let _ = kernel.find(addr.wrapping_sub(1));
    }
    let _ = kernel.find(u64::MAX);
    let Some(symbols) = symfile::parse(&text) else {
        return !kernel.is_empty();
    };
    let again = symfile::parse(&symfile::format(&symbols));
    assert_eq!(again.as_ref(), Some(&symbols), "format and parse differ");
    true
}

/// `/proc/PID/maps` text: its executable file mappings into an address
/// space (all at once, and one by one as mmap events would add them), then
/// lookups. A lookup finds only a mapping that contains the address, and
/// the mapping added last is found at its own start.
pub fn maps(input: &[u8]) -> bool {
    let text = String::from_utf8_lossy(input);
    let added: Vec<Mapping> = holdup_symbolize::parse_maps(&text)
        .map(|l| Mapping {
            start: l.start,
            end: l.end,
            file_offset: l.offset,
            path: l.path.to_string(),
            build_id: None,
        })
        .collect();
    let mut spaces = AddressSpaces::new();
    spaces.set_mappings(1, added.iter().cloned());
    for m in &added {
        spaces.add_mapping(2, m.clone());
    }
    for pid in [1, 2] {
        for l in &added {
            for addr in [
                l.start,
                l.end.wrapping_sub(1),
                l.end,
                l.start / 2 + l.end / 2,
            ] {
                if let Some(m) = spaces.find(pid, addr) {
                    assert!(m.start <= addr && addr < m.end, "{addr:#x} not in {m:?}");
                    let _ = m.file_offset_of(addr);
                }
            }
        }
    }
    if let Some(last) = added.iter().rev().find(|m| m.start < m.end) {
        let found = spaces.find(2, last.start).map(|m| &m.path);
        assert_eq!(
            found,
            Some(&last.path),
            "the last mapping is not where it was put"
        );
    }
    spaces.fork(2, 3);
    assert_eq!(spaces.mappings(2), spaces.mappings(3));
    spaces.exec(3);
    spaces.exit(1);
    !added.is_empty()
}

/// An ELF file, from a memory file: its build-id; symbolization (symbol
/// table, DWARF lines and inlined functions) at the offsets of its
/// symbols; an unwind through a mapping of it (its CFI tables); and the
/// static call graph below `main`.
pub fn elf(input: &[u8]) -> bool {
    let Some(path) = crate::memfile::holding(input) else {
        return false;
    };
    let build_id = holdup_symbolize::read_build_id(&path);
    let layout = crate::elfinfo::layout(input);
    let mut symbolizer = Symbolizer::new();
    let _ = symbolizer.symbolize_file(&path, build_id.as_deref(), &layout.offsets);

    let mut spaces = AddressSpaces::new();
    spaces.add_mapping(
        1,
        Mapping {
            start: layout.map_start,
            end: layout.map_start.saturating_add(layout.map_len),
            file_offset: layout.map_offset,
            path: path.to_string_lossy().into_owned(),
            build_id: build_id.clone(),
        },
    );
    let copy = &input[input.len() / 2..][..(input.len() / 2).min(512)];
    let mut unwinder = Unwinder::new();
    for &ip in layout.addresses.iter().take(4) {
        let stack = UserStack {
            ip,
            sp: 0x7fff_0000,
            bp: 0x7fff_0040,
            fp_chain: &[],
            copy,
        };
        let _ = unwinder.unwind(&spaces, 1, &stack);
    }
    let _ = holdup_symbolize::callgraph::defines_function(&path, "main");
    for name in layout.functions.iter().take(2) {
        let _ = holdup_symbolize::callgraph::callees(
            &path,
            name,
            3,
            holdup_symbolize::callgraph::Follow::SameFile,
        );
    }
    layout.parsed
}
