//! A rarer caller of a costly progress point. The stacks of some of the
//! point's visits (a sampling uprobe on the same place) name the functions
//! that call it, one or more levels up; each is counted for a moment with
//! a uprobe of its own, and the nearest one visited seldom enough to cost
//! little is the place suggested instead. It works the same in every mode,
//! since nothing of it needs the program's runtime.

use holdup_bpf::records::UserStack;
use holdup_coz::names;
use holdup_coz::probe::{segments, Segment};
use holdup_symbolize::functions::{of_file, with_elf, Function};
use holdup_symbolize::{AddressSpaces, Unwinder};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long visits are sampled, and each caller counted.
const SAMPLE_FOR: Duration = Duration::from_millis(300);
/// Stacks wanted from the sampling.
const STACKS_WANTED: f64 = 200.0;
/// Callers looked at, levels up from the point.
const MAX_LEVELS: usize = 6;

/// A caller to count progress at instead.
#[derive(Clone, Debug, PartialEq)]
pub struct Caller {
    /// As `--progress` takes it.
    pub name: String,
    pub visits_per_s: f64,
}

/// A function seen as a caller: where its entry is, to count it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Place {
    name: String,
    binary: PathBuf,
    entry_offset: u64,
}

/// The nearest caller of the point at `sites` (uprobed places, visited
/// `per_s` times a second, at a cost of `share` of the program's CPU time)
/// whose visits would cost at most `allowed` of it; if none would, the
/// caller visited least. `point_visits` reads the point's counter: callers
/// are compared with it over the same moment (the program's pace changes
/// with the machine's load). None when no caller could be found or counted.
pub fn rarer_caller(
    sites: &[(PathBuf, u64)],
    per_s: f64,
    share: f64,
    allowed: f64,
    point_visits: impl Fn() -> usize,
) -> Option<Caller> {
    let levels = caller_levels(sites, per_s)?;
    let (counts, point) = count_visits(&levels, point_visits);
    choose(&levels, &counts, point, share, allowed)
}

/// The callers of each level, most seen first at each, from the sampled
/// stacks of the point's visits.
fn caller_levels(sites: &[(PathBuf, u64)], per_s: f64) -> Option<Vec<Place>> {
    let every = (per_s * SAMPLE_FOR.as_secs_f64() / STACKS_WANTED).max(1.0) as u64;
    let mut samplers: Vec<_> = sites
        .iter()
        .filter_map(|(binary, offset)| {
            holdup_bpf::perf::UprobeStacks::open(binary, *offset, every).ok()
        })
        .collect();
    if samplers.is_empty() {
        return None;
    }
    std::thread::sleep(SAMPLE_FOR);
    let mut stacks: Vec<(u32, Vec<u64>)> = Vec::new();
    let mut spaces = AddressSpaces::new();
    let mut unwinder = Unwinder::new();
    for s in &mut samplers {
        s.drain(|v| {
            if !spaces.pids().any(|p| p == v.pid) {
                let _ = spaces.load_proc_maps(v.pid);
            }
            let stack = UserStack {
                ip: v.ip,
                sp: v.sp,
                bp: v.bp,
                fp_chain: &[],
                copy: v.stack,
            };
            stacks.push((v.pid, unwinder.unwind(&spaces, v.pid, &stack)));
        });
    }
    let mut symbols = Symbols::default();
    let mut seen: Vec<HashMap<Place, usize>> = vec![HashMap::new(); MAX_LEVELS];
    for (pid, frames) in &stacks {
        for (level, &ret) in frames.iter().skip(1).take(MAX_LEVELS).enumerate() {
            // A return address is just past its call.
            let Some(place) = symbols.function_at(&spaces, *pid, ret.wrapping_sub(1)) else {
                break;
            };
            *seen[level].entry(place).or_insert(0) += 1;
        }
    }
    let mut levels: Vec<Place> = Vec::new();
    for level in seen {
        let Some((place, _)) = level.into_iter().max_by_key(|(_, n)| *n) else {
            break;
        };
        if !levels.contains(&place) {
            levels.push(place);
        }
    }
    (!levels.is_empty()).then_some(levels)
}

/// Visits of each place and of the point over the same moment, counted
/// with uprobes (None where one could not be attached).
fn count_visits(places: &[Place], point_visits: impl Fn() -> usize) -> (Vec<Option<usize>>, usize) {
    let counters: Vec<_> = places
        .iter()
        .map(|p| holdup_bpf::perf::uprobe_counters(&p.binary, p.entry_offset).ok())
        .collect();
    let before = point_visits();
    std::thread::sleep(SAMPLE_FOR);
    let point = point_visits().saturating_sub(before);
    let counts = counters
        .iter()
        .map(|c| {
            let fds = c.as_ref()?;
            Some(holdup_bpf::counter_total(
                fds.iter().map(std::os::fd::AsRawFd::as_raw_fd),
            ))
        })
        .collect();
    (counts, point)
}

/// The nearest place (first in `places`) visited at all whose visits, at
/// the point's cost per visit, take at most `allowed` of the CPU time
/// (`share` is what the point's `point` visits take); else the one visited
/// least, if less than the point.
fn choose(
    places: &[Place],
    counts: &[Option<usize>],
    point: usize,
    share: f64,
    allowed: f64,
) -> Option<Caller> {
    let counted = places
        .iter()
        .zip(counts)
        .filter_map(|(p, n)| Some((p, (*n)?)))
        .filter(|(_, n)| *n > 0);
    let cheap = |n: usize| share * n as f64 <= allowed * point as f64;
    let (place, n) = counted
        .clone()
        .find(|(_, n)| cheap(*n))
        .or_else(|| counted.filter(|(_, n)| *n < point).min_by_key(|(_, n)| *n))?;
    Some(Caller {
        name: place.name.clone(),
        visits_per_s: n as f64 / SAMPLE_FOR.as_secs_f64(),
    })
}

/// A binary's functions, and the segments that turn its file offsets into
/// their addresses.
type Binary = (Vec<Function>, Vec<Segment>);

/// The functions of the binaries the stacks pass through, read once each.
#[derive(Default)]
struct Symbols {
    binaries: HashMap<String, Option<Binary>>,
}

impl Symbols {
    /// The function of process `pid` that holds `addr`.
    fn function_at(&mut self, spaces: &AddressSpaces, pid: u32, addr: u64) -> Option<Place> {
        let m = spaces.find(pid, addr)?;
        let offset = m.file_offset_of(addr);
        let (functions, segs) = self
            .binaries
            .entry(m.path.clone())
            .or_insert_with(|| read_functions(&m.candidates(pid)))
            .as_ref()?;
        let svma = Segment::svma_of(segs, offset)?;
        let f = functions
            .iter()
            .find(|f| f.address <= svma && svma < f.address.saturating_add(f.size.max(1)))?;
        Some(Place {
            name: names::readable(&f.name),
            binary: PathBuf::from(&m.path),
            entry_offset: offset - (svma - f.address),
        })
    }
}

/// The functions and segments of the first readable of `candidates`.
fn read_functions(candidates: &[PathBuf]) -> Option<Binary> {
    candidates.iter().find_map(|path: &PathBuf| {
        with_elf(Path::new(path), |file, data| {
            Ok((of_file(file)?, segments(data)?))
        })
        .ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(name: &str) -> Place {
        Place {
            name: name.into(),
            binary: PathBuf::from("/bin/x"),
            entry_offset: 0,
        }
    }

    #[test]
    fn the_nearest_caller_cheap_enough_is_chosen() {
        let places = [place("inner"), place("outer"), place("main")];
        // The point: 30 000 visits in the moment, taking 20% of the CPU.
        // inner is visited as often; outer 1 000 times less; main never
        // again.
        let counts = [Some(30_000), Some(30), Some(0)];
        let c = choose(&places, &counts, 30_000, 0.2, 0.05).unwrap();
        assert_eq!((c.name.as_str(), c.visits_per_s), ("outer", 100.0));
        // A caller that could not be counted is passed over.
        let c = choose(&places, &[None, Some(30), None], 30_000, 0.2, 0.05).unwrap();
        assert_eq!(c.name, "outer");
        // inner, though counted when the program went slower, is not
        // cheaper: its visits are compared with the point's in the same
        // moment.
        let c = choose(&places, &[Some(9_000), Some(9), Some(0)], 9_000, 0.08, 0.05).unwrap();
        assert_eq!(c.name, "outer");
        // None cheap enough: the rarest one, when rarer than the point.
        let c = choose(
            &places,
            &[Some(27_000), Some(15_000), Some(0)],
            30_000,
            0.9,
            0.05,
        )
        .unwrap();
        assert_eq!(c.name, "outer");
        // Nothing visited less often than the point: no suggestion.
        assert!(choose(&places, &[Some(30_000), None, Some(0)], 30_000, 0.2, 0.05).is_none());
    }
}
