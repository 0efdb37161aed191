//! Peaks of a log2 latency histogram, and the earth mover's distance
//! between two histograms.
//!
//! A peak is a local maximum with the buckets down to the valleys on either
//! side. Noise makes small bumps, so peaks are merged until every valley
//! between neighbours is deep (at most [`VALLEY_RATIO`] of the lower of the
//! two maxima) and every peak holds at least [`MIN_MASS`] of the calls: the
//! shallowest valley, or the lighter peak's shallower side, goes first.

use super::{bucket_hi, bucket_lo, Histogram};

/// A valley separates two peaks only if it is at most this fraction of the
/// lower of their maxima.
pub const VALLEY_RATIO: f64 = 0.5;
/// A peak must hold at least this share of all calls.
pub const MIN_MASS: f64 = 0.03;

#[derive(Clone, Debug, PartialEq)]
pub struct Peak {
    /// 1, 2, … from the fastest peak to the slowest.
    pub index: usize,
    /// First and last non-empty bucket of the peak.
    pub lo_slot: usize,
    pub hi_slot: usize,
    /// The highest bucket.
    pub mode_slot: usize,
    pub count: u64,
    pub ns: u64,
    /// The peak's share of the operation's total time.
    pub share: f64,
}

impl Peak {
    pub fn lo_ns(&self) -> u64 {
        bucket_lo(self.lo_slot)
    }
    pub fn hi_ns(&self) -> u64 {
        bucket_hi(self.hi_slot)
    }
}

/// Buckets `start..=end`; the valley to the next segment is bucket `end`.
#[derive(Clone, Copy, Debug)]
struct Segment {
    start: usize,
    end: usize,
}

pub fn find_peaks(h: &Histogram) -> Vec<Peak> {
    let c = &h.count;
    let total: u64 = c.iter().sum();
    let (Some(first), Some(last)) = (
        c.iter().position(|&x| x > 0),
        c.iter().rposition(|&x| x > 0),
    ) else {
        return Vec::new();
    };
    // One segment per local maximum, cut at the minimum after it.
    let mut segs = Vec::new();
    let mut start = first;
    let mut descending = false;
    for i in first + 1..=last {
        if c[i] > c[i - 1] {
            if descending {
                segs.push(Segment { start, end: i - 1 });
                start = i;
            }
            descending = false;
        } else if c[i] < c[i - 1] {
            descending = true;
        }
    }
    segs.push(Segment { start, end: last });

    let height = |s: &Segment| c[s.start..=s.end].iter().copied().max().unwrap_or(0);
    let mass = |s: &Segment| c[s.start..=s.end].iter().sum::<u64>();
    // How shallow the valley after segment i is: valley / lower maximum.
    let shallowness = |segs: &[Segment], i: usize| {
        let low = height(&segs[i]).min(height(&segs[i + 1])).max(1);
        c[segs[i].end] as f64 / low as f64
    };
    while segs.len() > 1 {
        let shallowest = (0..segs.len() - 1)
            .max_by(|&x, &y| shallowness(&segs, x).total_cmp(&shallowness(&segs, y)))
            .unwrap();
        let light = (0..segs.len())
            .filter(|&i| (mass(&segs[i]) as f64) < MIN_MASS * total as f64)
            .min_by_key(|&i| mass(&segs[i]));
        let join = if shallowness(&segs, shallowest) > VALLEY_RATIO {
            shallowest
        } else if let Some(i) = light {
            // Into the neighbour across the shallower valley.
            match (i.checked_sub(1), i + 1 < segs.len()) {
                (Some(l), true) if shallowness(&segs, l) >= shallowness(&segs, i) => l,
                (Some(l), false) => l,
                _ => i,
            }
        } else {
            break;
        };
        segs[join].end = segs[join + 1].end;
        segs.remove(join + 1);
    }

    let total_ns: u64 = h.ns.iter().sum();
    segs.iter()
        .enumerate()
        .map(|(k, s)| {
            let lo = (s.start..=s.end).find(|&i| c[i] > 0).unwrap_or(s.start);
            let hi = (s.start..=s.end).rev().find(|&i| c[i] > 0).unwrap_or(s.end);
            let mode = (s.start..=s.end)
                .max_by_key(|&i| (c[i], usize::MAX - i))
                .unwrap();
            let ns: u64 = h.ns.get(s.start..=s.end).map_or(0, |v| v.iter().sum());
            Peak {
                index: k + 1,
                lo_slot: lo,
                hi_slot: hi,
                mode_slot: mode,
                count: mass(s),
                ns,
                share: if total_ns > 0 {
                    ns as f64 / total_ns as f64
                } else {
                    0.0
                },
            }
        })
        .collect()
}

/// Earth mover's distance between two histograms, each normalised to one:
/// the mass times the number of buckets (factors of two) it must move.
pub fn emd(a: &[u64], b: &[u64]) -> f64 {
    let (ta, tb) = (a.iter().sum::<u64>() as f64, b.iter().sum::<u64>() as f64);
    if ta == 0.0 || tb == 0.0 {
        return 0.0;
    }
    let (mut ca, mut cb, mut d) = (0.0, 0.0, 0.0);
    for i in 0..a.len().max(b.len()) {
        ca += *a.get(i).unwrap_or(&0) as f64 / ta;
        cb += *b.get(i).unwrap_or(&0) as f64 / tb;
        d += (ca - cb).abs();
    }
    d
}

/// Calls of an operation before its peaks are trusted for a decision
/// (DARC's start_ops, as in its use cases).
pub const START_OPS: u64 = 100;

/// DARC's decision point: the operation has had `START_OPS` calls and
/// each of its peaks `decision_ops` calls or more.
pub fn peaks_decided(h: &Histogram, decision_ops: u64) -> bool {
    let peaks = find_peaks(h);
    h.total_count() >= START_OPS
        && !peaks.is_empty()
        && peaks.iter().all(|p| p.count >= decision_ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(count: &[u64]) -> Histogram {
        Histogram {
            count: count.to_vec(),
            // Each call takes its bucket's lower bound.
            ns: count
                .iter()
                .enumerate()
                .map(|(s, &c)| c * bucket_lo(s).max(1))
                .collect(),
            cause_ns: Vec::new(),
        }
    }

    fn ranges(h: &Histogram) -> Vec<(usize, usize, u64)> {
        find_peaks(h)
            .iter()
            .map(|p| (p.lo_slot, p.hi_slot, p.count))
            .collect()
    }

    #[test]
    fn empty_and_single() {
        assert!(find_peaks(&hist(&[0, 0, 0])).is_empty());
        assert_eq!(ranges(&hist(&[0, 5, 0])), vec![(1, 1, 5)]);
        assert_eq!(ranges(&hist(&[0, 2, 9, 30, 8, 1])), vec![(1, 5, 50)]);
    }

    #[test]
    fn two_separated_peaks_numbered_left_to_right() {
        let h = hist(&[0, 0, 10, 100, 40, 0, 0, 0, 5, 60, 90, 20, 0]);
        let p = find_peaks(&h);
        assert_eq!(ranges(&h), vec![(2, 4, 150), (8, 11, 175)]);
        assert_eq!((p[0].index, p[1].index), (1, 2));
        assert_eq!((p[0].mode_slot, p[1].mode_slot), (3, 10));
        // The slow peak holds nearly all the time.
        assert!(p[1].share > 0.95 && (p[0].share + p[1].share - 1.0).abs() < 1e-9);
        assert_eq!((p[0].lo_ns(), p[0].hi_ns()), (4, 32));
    }

    #[test]
    fn shallow_valley_is_one_peak() {
        // 80 between 100 and 90: noise, not two populations.
        assert_eq!(ranges(&hist(&[0, 100, 80, 90, 10])), vec![(1, 4, 280)]);
        // A deep valley (20 ≤ half of 90) separates.
        assert_eq!(
            ranges(&hist(&[0, 100, 20, 90, 10])),
            vec![(1, 2, 120), (3, 4, 100)]
        );
    }

    #[test]
    fn light_bump_joins_a_neighbour() {
        // 3 calls of 1000 are below the minimum mass: part of the tail.
        let h = hist(&[0, 500, 497, 0, 0, 0, 3, 0]);
        assert_eq!(ranges(&h), vec![(1, 6, 1000)]);
        // 40 of 1000 is enough.
        let h = hist(&[0, 480, 480, 0, 0, 0, 40, 0]);
        assert_eq!(ranges(&h).len(), 2);
    }

    #[test]
    fn decided_once_every_peak_has_its_calls() {
        let mut c = vec![0; 24];
        c[10] = 90;
        assert!(!peaks_decided(&hist(&c), 20), "fewer than START_OPS calls");
        c[10] = 180;
        c[20] = 19;
        assert!(!peaks_decided(&hist(&c), 20), "the slow peak has 19");
        c[20] = 20;
        assert!(peaks_decided(&hist(&c), 20));
        assert!(!peaks_decided(&hist(&[0; 24]), 0));
    }

    #[test]
    fn emd_in_buckets() {
        assert_eq!(emd(&[0, 5, 5], &[0, 10, 10]), 0.0);
        assert!((emd(&[10, 0, 0, 0], &[0, 0, 0, 10]) - 3.0).abs() < 1e-12);
        // Half the mass moves three buckets.
        assert!((emd(&[10, 0, 0, 0], &[5, 0, 0, 5]) - 1.5).abs() < 1e-12);
        // Symmetric, and scale-free.
        assert_eq!(emd(&[1, 2, 3], &[3, 2, 1]), emd(&[30, 20, 10], &[1, 2, 3]));
    }
}
