//! COZ's experiment choices, shared by the runtime (thread-level delays)
//! and by `holdup causal run -a/-p` (core-level delays): the speedup of an
//! experiment, its length, and the pause after it.

/// Pause between experiments, so that one's delays do not leak into the next.
pub const COOL_OFF_NS: u64 = 10_000_000;
/// Visits of every progress point wanted per experiment (COZ's value).
pub const TARGET_DELTA: usize = 5;
/// Speedups are drawn in 5% steps; 0% is drawn ZERO_WEIGHT times in
/// STEPS + ZERO_WEIGHT (≈ 26%), as in COZ, so every target has a baseline.
const STEPS: u64 = 20;
const ZERO_WEIGHT: u64 = 7;

/// A speedup in percent, drawn with `rng`.
pub fn draw_speedup(rng: &mut Rng) -> u64 {
    match rng.below(STEPS + ZERO_WEIGHT) {
        r if r < ZERO_WEIGHT => 0,
        r => (r - ZERO_WEIGHT + 1) * (100 / STEPS),
    }
}

/// COZ's adaptive length: longer until progress points are seen often
/// enough (at most 16 times the shortest), shorter again when they are
/// seen plenty. `min_delta` is the fewest visits of any point.
pub fn next_length(length_ns: u64, min_len_ns: u64, min_delta: usize) -> u64 {
    if min_delta < TARGET_DELTA {
        (length_ns * 2).min(min_len_ns * 16)
    } else if min_delta > TARGET_DELTA * 2 && length_ns >= min_len_ns * 2 {
        length_ns / 2
    } else {
        length_ns
    }
}

/// When a throughput point was first and last seen to move during an
/// experiment: (time, count, global delay) at each. Visits come in bursts
/// (a round of work, a batch); counting whole visits between the first and
/// the last one, instead of over the experiment's fixed length, removes the
/// error of the partial bursts at both ends.
#[derive(Clone, Copy, Debug, Default)]
pub struct Window {
    last_count: usize,
    first: Option<(u64, usize, u64)>,
    last: Option<(u64, usize, u64)>,
}

impl Window {
    /// A window over a point whose count is `count` at the start.
    pub fn new(count: usize) -> Window {
        Window {
            last_count: count,
            ..Window::default()
        }
    }

    /// The count is `count` at time `now`, with global delay `global`.
    pub fn observe(&mut self, now: u64, count: usize, global: u64) {
        if count != self.last_count {
            self.last_count = count;
            self.first.get_or_insert((now, count, global));
            self.last = Some((now, count, global));
        }
    }

    /// Visits between the first and the last move, and the virtual time
    /// between them (`window-delta`, `window-duration`).
    pub fn span(&self) -> Option<(usize, u64)> {
        let (f, l) = (self.first?, self.last?);
        Some((l.1 - f.1, (l.0 - f.0).saturating_sub(l.2 - f.2)))
    }
}

/// SplitMix64's finalizer: a well-spread number from any 64 bits (a
/// counter, a sample's identity).
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// xorshift64: fast, and good enough to draw targets and speedups.
pub struct Rng(u64);

impl Rng {
    pub fn from_seed(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speedups_are_steps_of_five_with_a_quarter_at_zero() {
        let mut rng = Rng::from_seed(42);
        let draws: Vec<u64> = (0..27_000).map(|_| draw_speedup(&mut rng)).collect();
        assert!(draws.iter().all(|s| s % 5 == 0 && *s <= 100));
        let zeros = draws.iter().filter(|&&s| s == 0).count();
        assert!((6_000..8_000).contains(&zeros), "{zeros}");
        assert!(draws.contains(&100));
    }

    #[test]
    fn the_length_doubles_without_progress_and_halves_with_plenty() {
        assert_eq!(next_length(200, 200, 0), 400);
        assert_eq!(next_length(3200, 200, 0), 3200);
        assert_eq!(next_length(800, 200, 11), 400);
        assert_eq!(next_length(200, 200, 11), 200);
        assert_eq!(next_length(400, 200, 7), 400);
    }
}
