//! Sample points of the recorder's samples: how much of one counts for a line, for io, for
//! the runqueue, and how much falls inside an experiment.

use crate::experiment::mix64;
use holdup_bpf::records::{self, SampleRec};

/// Points of one sample that can be charged to a line, to io, to runqueue.
#[derive(Clone, Copy, Default, Debug)]
pub struct Points {
    pub line: u64,
    pub io: u64,
    pub sched: u64,
    /// The wait of a lock wait (never a line's: the holder's lines are
    /// what make it shorter), which only says that the lock it waits for is
    /// worth an experiment.
    pub lock: u64,
}

/// The share of `w` points spread over [a, b) that falls at or after
/// `from`. The recorder counts points on per-thread clocks, so a part of an
/// interval gets its proportional share of the interval's weight.
fn share_after(w: u64, a: u64, b: u64, from: u64) -> u64 {
    if w == 0 || from <= a {
        return w;
    }
    if from >= b {
        return 0;
    }
    let (part, len) = ((b - from) as u128, (b - a) as u128);
    ((w as u128 * part + len / 2) / len) as u64
}

/// How crowded the CPUs are for the program: of its threads' time on a CPU
/// or preempted, the part spent waiting for one, over the samples seen.
#[derive(Clone, Copy, Default, Debug)]
pub struct Crowding {
    running: u64,
    queued: u64,
}

impl Crowding {
    pub fn see(&mut self, r: &SampleRec) {
        match r.class {
            records::CLASS_CPU => self.running += u64::from(r.weight),
            records::CLASS_SCHED => self.queued += u64::from(r.sched_weight),
            _ => {}
        }
    }

    /// Of `runq` points waited for a CPU after a wakeup, those a thread
    /// that had not blocked would not have waited anyway: runnable instead,
    /// it would have waited the crowding's share of that time too. Rounded
    /// up or down by a hash of the sample, with the odds of the remainder,
    /// as a sample has a point or two.
    fn beyond_the_crowd(&self, r: &SampleRec, runq: u64) -> u64 {
        let all = u128::from(self.running + self.queued);
        if self.queued == 0 || runq == 0 {
            return runq;
        }
        let scaled = u128::from(runq) * u128::from(self.running);
        let odds = u128::from(mix64(r.start ^ u64::from(r.tid) << 32)) % all;
        (scaled / all + u128::from(scaled % all > odds)) as u64
    }
}

/// The points of `r` at or after `from` (0: all of them), on CPUs as
/// crowded as `crowd` says.
pub fn points_of(r: &SampleRec, from: u64, crowd: &Crowding) -> Points {
    if r.class == records::CLASS_CPU {
        // Steal time in a line is the line's: doing less there also takes
        // less of it. More cores would not give it back, so it is no
        // runqueue time here.
        let line = u64::from(r.weight + r.sched_weight) * u64::from(r.start >= from);
        return Points {
            line,
            io: 0,
            sched: 0,
            lock: 0,
        };
    }
    let wake = if r.wake == 0 {
        r.end
    } else {
        r.wake.clamp(r.start, r.end)
    };
    let (blocked, runq) = if r.class == records::CLASS_SCHED {
        (0, share_after(r.sched_weight.into(), r.start, r.end, from))
    } else {
        (
            share_after(r.weight.into(), r.start, wake, from),
            share_after(r.sched_weight.into(), wake, r.end, from),
        )
    };
    Points {
        // For a line, a whole off-CPU interval counts: doing less I/O (or
        // sleeping less) also saves the wait for a CPU after each wakeup,
        // but for the part a runnable thread waits anyway on CPUs this
        // crowded (more cores give that back, not less work). A faster
        // disk does not, so `io` has the blocked part only. Of a lock
        // wait, the line has the wait for a CPU after it is woken, which
        // each contended take pays and a shorter hold makes rarer (the
        // blocked part is the holder's time, credited to its lines).
        line: match r.class {
            records::CLASS_SCHED => runq,
            records::CLASS_LOCK => crowd.beyond_the_crowd(r, runq),
            _ => blocked + crowd.beyond_the_crowd(r, runq),
        },
        io: if r.class == records::CLASS_IO {
            blocked
        } else {
            0
        },
        sched: runq,
        lock: if r.class == records::CLASS_LOCK {
            blocked
        } else {
            0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(
        class: u8,
        start: u64,
        wake: u64,
        end: u64,
        weight: u32,
        sched_weight: u32,
    ) -> SampleRec {
        SampleRec {
            class,
            start,
            wake,
            end,
            weight,
            sched_weight,
            ..Default::default()
        }
    }

    #[test]
    fn points_keep_the_recorders_weights() {
        let open = Crowding::default();
        // io: 3 blocked points, 1 runqueue point.
        let r = rec(records::CLASS_IO, 500_000, 3_500_000, 4_500_000, 3, 1);
        let all = points_of(&r, 0, &open);
        assert_eq!((all.line, all.io, all.sched), (4, 3, 1));
        // An experiment that began in the middle of the wait gets its share.
        let part = points_of(&r, 2_500_000, &open);
        assert_eq!((part.line, part.io, part.sched), (2, 1, 1));
        assert_eq!(points_of(&r, 5_000_000, &open).line, 0);
        // A short wait that the thread's clock gave a point keeps it whole.
        let short = rec(records::CLASS_IO, 1_000, 200_000, 250_000, 1, 0);
        assert_eq!(points_of(&short, 500, &open).io, 1);
        // A lock wait counts for its line from the wakeup on only.
        let l = points_of(
            &rec(records::CLASS_LOCK, 1, 3_000_001, 3_000_001, 3, 0),
            0,
            &open,
        );
        assert_eq!((l.line, l.io, l.sched, l.lock), (0, 0, 0, 3));
        let handoff = points_of(
            &rec(records::CLASS_LOCK, 1, 3_000_001, 5_000_001, 3, 2),
            0,
            &open,
        );
        assert_eq!((handoff.line, handoff.sched, handoff.lock), (2, 2, 3));
        assert_eq!(all.lock, 0);
        // Preempted: runqueue throughout, and for the line it ran.
        let s = points_of(&rec(records::CLASS_SCHED, 1, 0, 2_000_001, 0, 2), 0, &open);
        assert_eq!((s.line, s.io, s.sched), (2, 0, 2));
        // On-CPU with steal: all of it is the line's, none is runqueue.
        let c = points_of(&rec(records::CLASS_CPU, 10, 0, 10, 2, 3), 0, &open);
        assert_eq!((c.line, c.io, c.sched), (5, 0, 0));
        assert_eq!(
            points_of(&rec(records::CLASS_CPU, 10, 0, 10, 2, 3), 11, &open).line,
            0
        );
    }

    #[test]
    fn a_wakeups_wait_for_a_cpu_counts_beyond_what_the_crowd_waits() {
        // Preempted a quarter of their runnable time: 3 of 4 runqueue points
        // after a wakeup are the line's, on average over many samples.
        let mut crowd = Crowding::default();
        crowd.see(&rec(records::CLASS_CPU, 1, 0, 1, 300, 0));
        crowd.see(&rec(records::CLASS_SCHED, 1, 0, 2, 0, 100));
        let (mut line, mut sched) = (0, 0);
        for i in 0..4000u64 {
            let start = 1_000 + i * 10_000_000;
            for class in [records::CLASS_LOCK, records::CLASS_IO] {
                let p = points_of(
                    &rec(class, start, start + 2_000_000, start + 3_000_000, 0, 1),
                    0,
                    &crowd,
                );
                line += p.line;
                sched += p.sched;
            }
        }
        assert_eq!(sched, 8000, "more cores still give all of it back");
        assert!((5800..6200).contains(&line), "{line} of 8000");
        // The same sample, the same points, whole or from an experiment's
        // start before it: the rounding draws on the sample, not on `from`.
        for i in 0..100u64 {
            let start = 1_000 + i * 7_000_003;
            let r = rec(
                records::CLASS_IO,
                start,
                start + 2_000_000,
                start + 3_000_000,
                2,
                1,
            );
            assert_eq!(
                points_of(&r, 0, &crowd).line,
                points_of(&r, start - 1, &crowd).line
            );
        }
        // A preemption is the line's whole: it is the crowd.
        assert_eq!(
            points_of(&rec(records::CLASS_SCHED, 1, 0, 2_000_001, 0, 2), 0, &crowd).line,
            2
        );
    }
}
