//! The bookkeeping of a core-level run, apart from the machinery that
//! feeds it: what each resolved sample counts for (sample points per
//! target, credit for the running experiment) and the choice of the next
//! target.

use super::targets::Hit;
use holdup_coz::experiment::Rng;
use holdup_coz::points::Points;
use std::collections::HashMap;

/// A new target is a whole process about once in this many experiments,
/// when more than one process runs (SCOZ's process targets).
const PROCESS_TARGET_ONE_IN: u64 = 8;
/// Whole processes are offered only while at least two of them each had
/// 1/PROCESS_SHARE of the on-CPU samples since the last experiment began.
/// With one (a single program under -a, beside daemons that barely run),
/// `process:NAME` is the whole program: its answer is known without an
/// experiment, and its delays (every core, all the time) are the dearest.
const PROCESS_SHARE: u64 = 16;

/// The running experiment, as samples see it.
#[derive(Clone, Copy, Debug)]
pub struct Running {
    pub target: u32,
    /// Delay per sample point.
    pub delay_ns: u64,
}

/// What a sample in the experiment's target owes the other cores: the
/// core it ran on is credited (on-CPU), or, for a wait, every other core
/// owes the delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Credit {
    pub cpu: usize,
    pub delay_ns: u64,
    pub on_cpu: bool,
}

/// COZ's choice of the next target (the first in-scope frame of a random
/// sample: a weighted reservoir over the samples since the last experiment
/// began), with SCOZ's whole processes now and then.
pub struct Choice {
    pub rng: Rng,
    pick: Option<u32>,
    pick_total: u64,
    pick_process: Option<u32>,
    pick_process_total: u64,
    /// On-CPU sample points per process since the last experiment began.
    process_points: HashMap<u32, u64>,
}

impl Choice {
    pub fn new(rng: Rng) -> Choice {
        Choice {
            rng,
            pick: None,
            pick_total: 0,
            pick_process: None,
            pick_process_total: 0,
            process_points: HashMap::new(),
        }
    }

    fn offer(&mut self, target: u32, w: u64) {
        self.pick_total += w;
        if self.rng.below(self.pick_total) < w {
            self.pick = Some(target);
        }
    }

    fn offer_process(&mut self, process: u32, w: u64) {
        *self.process_points.entry(process).or_default() += w;
        self.pick_process_total += w;
        if self.rng.below(self.pick_process_total) < w {
            self.pick_process = Some(process);
        }
    }

    /// The next experiment's target, if any was offered; the offers start
    /// anew.
    pub fn next(&mut self) -> Option<u32> {
        let total: u64 = self.process_points.values().sum();
        let sharing = self
            .process_points
            .values()
            .filter(|&&n| n > 0 && n * PROCESS_SHARE >= total)
            .count();
        self.process_points.clear();
        let process = sharing > 1 && self.rng.below(PROCESS_TARGET_ONE_IN) == 0;
        let t = if process {
            self.pick_process.or(self.pick)
        } else {
            self.pick.or(self.pick_process)
        };
        self.pick = None;
        self.pick_total = 0;
        self.pick_process = None;
        self.pick_process_total = 0;
        t
    }
}

/// Sample points per target and the next target's choice.
pub struct Tally {
    pub choice: Choice,
    /// Sample points per target (`samples` records).
    pub points: HashMap<u32, u64>,
    /// All sample points seen.
    pub samples: u64,
    /// The subclasses' target ids.
    pub io: u32,
    pub sched: u32,
}

impl Tally {
    pub fn new(rng: Rng, io: u32, sched: u32) -> Tally {
        Tally {
            choice: Choice::new(rng),
            points: HashMap::new(),
            samples: 0,
            io,
            sched,
        }
    }

    /// One sample of any class, with its targets `hit` and points `pts`,
    /// taken on `cpu`: its points counted and offered as targets, and what
    /// it owes the running experiment with its selected points (BCOZ: the
    /// off-CPU time of a line is the line's; io and runqueue waits are the
    /// subclasses'; a process is its threads' on-CPU time).
    pub fn sample(
        &mut self,
        hit: &Hit,
        pts: Points,
        cpu: usize,
        on_cpu: bool,
        running: Option<Running>,
    ) -> Option<(u64, Credit)> {
        let (io, sched) = (self.io, self.sched);
        self.samples += pts.line + pts.io + pts.sched;
        let owed = running.and_then(|r| {
            let w = if r.target == io {
                pts.io
            } else if r.target == sched {
                pts.sched
            } else if hit.contains(r.target) {
                pts.line
            } else {
                0
            };
            (w > 0).then(|| {
                let credit = Credit {
                    cpu,
                    delay_ns: r.delay_ns * w,
                    on_cpu,
                };
                (w, credit)
            })
        });
        // COZ offers the sample's first frame in scope. In the kernel that
        // is a helper (memset, a spinlock) more often than not; what one
        // would make faster is a function further down, so any function
        // of the kernel stack is offered, each as likely.
        let first = if hit.kernel.is_empty() {
            hit.lines.first().copied()
        } else {
            Some(hit.kernel[self.choice.rng.below(hit.kernel.len() as u64) as usize])
        };
        // Sample counts: a line's are the samples where it is the first
        // frame in scope (COZ's); a kernel function's, its whole call tree's.
        let counted: &[u32] = if hit.kernel.is_empty() {
            &hit.lines[..hit.lines.len().min(1)]
        } else {
            &hit.kernel
        };
        for (&t, w) in counted
            .iter()
            .map(|t| (t, pts.line))
            .chain([(&io, pts.io), (&sched, pts.sched)])
        {
            if w > 0 {
                *self.points.entry(t).or_default() += w;
            }
        }
        for (t, w) in [
            (first, pts.line),
            (Some(io), pts.io),
            (Some(sched), pts.sched),
        ] {
            if let Some(t) = t.filter(|_| w > 0) {
                self.choice.offer(t, w);
            }
        }
        if let Some(p) = hit.process.filter(|_| on_cpu) {
            self.choice.offer_process(p, pts.line);
        }
        owed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IO: u32 = 0;
    const SCHED: u32 = 1;

    fn tally() -> Tally {
        Tally::new(Rng::from_seed(7), IO, SCHED)
    }

    fn hit(kernel: &[u32], lines: &[u32], process: Option<u32>) -> Hit {
        Hit {
            kernel: kernel.to_vec(),
            lines: lines.to_vec(),
            process,
        }
    }

    fn on_cpu(line: u64) -> Points {
        Points {
            line,
            ..Points::default()
        }
    }

    #[test]
    fn a_sample_in_the_target_credits_its_core_by_its_points() {
        let mut t = tally();
        let running = Some(Running {
            target: 5,
            delay_ns: 250,
        });
        // In a line below the first frame: in the target (SCOZ: any frame).
        let (w, credit) = t
            .sample(&hit(&[], &[4, 5], Some(9)), on_cpu(3), 1, true, running)
            .unwrap();
        assert_eq!(w, 3);
        assert_eq!(
            credit,
            Credit {
                cpu: 1,
                delay_ns: 750,
                on_cpu: true
            }
        );
        // A wait in the line: every other core owes it.
        let blocked = Points {
            line: 2,
            io: 2,
            ..Points::default()
        };
        let (_, credit) = t
            .sample(&hit(&[], &[5], None), blocked, 0, false, running)
            .unwrap();
        assert!(!credit.on_cpu && credit.delay_ns == 500);
        // Not in the target, or no experiment: nothing owed.
        assert!(t
            .sample(&hit(&[], &[4], Some(9)), on_cpu(3), 1, true, running)
            .is_none());
        assert!(t
            .sample(&hit(&[], &[5], None), on_cpu(3), 1, true, None)
            .is_none());
        // The io subclass takes a wait's io points only.
        let io = Some(Running {
            target: IO,
            delay_ns: 100,
        });
        let (w, _) = t
            .sample(&hit(&[], &[5], None), blocked, 0, false, io)
            .unwrap();
        assert_eq!(w, 2);
        assert!(t
            .sample(&hit(&[], &[5], None), on_cpu(3), 0, true, io)
            .is_none());
    }

    #[test]
    fn a_line_counts_where_first_and_a_kernel_function_in_all_its_callers() {
        let mut t = tally();
        t.sample(&hit(&[], &[4, 5], None), on_cpu(2), 0, true, None);
        t.sample(&hit(&[7, 8], &[4], None), on_cpu(1), 0, true, None);
        let waits = Points {
            line: 3,
            io: 2,
            sched: 1,
            ..Points::default()
        };
        t.sample(&hit(&[], &[], None), waits, 0, false, None);
        let p = |id| t.points.get(&id).copied().unwrap_or(0);
        assert_eq!((p(4), p(5), p(7), p(8)), (2, 0, 1, 1));
        assert_eq!((p(IO), p(SCHED)), (2, 1));
        assert_eq!(t.samples, 2 + 1 + 6);
    }

    /// Whole processes are drawn about one time in eight while two share
    /// the CPU, never while one has it (nearly) alone.
    #[test]
    fn whole_processes_are_chosen_only_while_several_share_the_cpu() {
        let (reader, writer) = (20, 21);
        let draws = |writer_share: u64| {
            let mut t = tally();
            let mut processes = 0;
            for _ in 0..800 {
                t.sample(&hit(&[], &[4], Some(reader)), on_cpu(16), 0, true, None);
                t.sample(
                    &hit(&[], &[5], Some(writer)),
                    on_cpu(writer_share),
                    1,
                    true,
                    None,
                );
                let next = t.choice.next().unwrap();
                processes += usize::from(next == reader || next == writer);
                assert!([4, 5, reader, writer].contains(&next));
            }
            processes
        };
        let shared = draws(16);
        assert!((60..140).contains(&shared), "{shared} of 800");
        assert_eq!(draws(0), 0);
        // Nothing offered since the last experiment: no target.
        assert_eq!(tally().choice.next(), None);
    }

    #[test]
    fn targets_are_drawn_by_their_points() {
        let mut t = tally();
        let mut first = 0;
        for _ in 0..1000 {
            t.sample(&hit(&[], &[4], None), on_cpu(3), 0, true, None);
            t.sample(&hit(&[], &[5], None), on_cpu(1), 0, true, None);
            first += usize::from(t.choice.next() == Some(4));
        }
        assert!((680..820).contains(&first), "{first} of 1000");
    }
}
