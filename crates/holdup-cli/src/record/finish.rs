//! End of a recording: symbols for every frame seen and names of interrupt
//! lines, written into the trace so that reports need neither the binaries
//! nor this machine.

use super::drain::Drainer;
use holdup_symbolize::Symbolizer;
use holdup_trace::{Frame, Record, SymFrame, Symbol, KERNEL_DSO, UNKNOWN_DSO};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

#[derive(Debug, Default)]
pub struct SymbolStats {
    pub frames: usize,
    pub symbolized: usize,
    /// Files that could not be read or changed since they were mapped.
    pub failed_files: Vec<String>,
}

fn to_sym_frames(frames: Vec<holdup_symbolize::Frame>) -> Vec<SymFrame> {
    frames
        .into_iter()
        .filter_map(|f| {
            Some(SymFrame {
                function: f.function?,
                file: f.file,
                line: f.line.unwrap_or(0),
            })
        })
        .collect()
}

pub fn symbolize<W: Write>(d: &mut Drainer<W>) -> std::io::Result<SymbolStats> {
    let mut by_dso: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
    for f in d.frames() {
        if f.dso != UNKNOWN_DSO {
            by_dso.entry(f.dso).or_default().insert(f.addr);
        }
    }
    let mut stats = SymbolStats::default();
    let mut symbolizer = Symbolizer::new();
    let dsos: BTreeMap<u32, (String, Option<Vec<u8>>)> = d
        .dsos
        .iter()
        .map(|(id, p, b)| (*id, (p.clone(), b.clone())))
        .collect();
    for (dso, addrs) in by_dso {
        let addrs: Vec<u64> = addrs.into_iter().collect();
        stats.frames += addrs.len();
        let results = if dso == KERNEL_DSO {
            symbolizer.symbolize_kernel(&addrs)
        } else {
            let Some((path, build_id)) = dsos.get(&dso) else {
                continue;
            };
            match symbolizer.symbolize_file(Path::new(path), build_id.as_deref(), &addrs) {
                Ok(r) => r,
                Err(_) => {
                    // Reports fall back to file+offset for these frames.
                    stats.failed_files.push(path.clone());
                    continue;
                }
            }
        };
        for (addr, frames) in addrs.into_iter().zip(results) {
            let frames = to_sym_frames(frames);
            if frames.is_empty() {
                continue;
            }
            stats.symbolized += 1;
            d.writer.write(&Record::Symbol(Symbol {
                frame: Frame { dso, addr },
                frames,
            }))?;
        }
    }
    Ok(stats)
}

/// `irq number → name` from /proc/interrupts (the last column: the
/// device the line serves).
pub fn irq_names() -> Vec<(u32, String)> {
    let Ok(text) = std::fs::read_to_string("/proc/interrupts") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let (num, rest) = line.trim_start().split_once(':')?;
            let irq = num.parse::<u32>().ok()?;
            let name = rest.split_whitespace().last()?.to_string();
            Some((irq, name))
        })
        .collect()
}
