//! Sample points of the recorder's samples: how much of one counts for a line, for io, for
//! the runqueue, and how much falls inside an experiment.

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

/// The points of `r` at or after `from` (0: all of them).
pub fn points_of(r: &SampleRec, from: u64) -> Points {
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
        // sleeping less) also saves the wait for a CPU after each wakeup.
        // A faster disk does not, so `io` has the blocked part only. Of a
        // lock wait, the line has the wait for a CPU after it is woken,
        // which each contended take pays and a shorter hold makes rarer
        // (the blocked part is the holder's time, credited to its lines).
        line: match r.class {
            records::CLASS_LOCK | records::CLASS_SCHED => runq,
            _ => blocked + runq,
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
        // io: 3 blocked points, 1 runqueue point.
        let r = rec(records::CLASS_IO, 500_000, 3_500_000, 4_500_000, 3, 1);
        let all = points_of(&r, 0);
        assert_eq!((all.line, all.io, all.sched), (4, 3, 1));
        // An experiment that began in the middle of the wait gets its share.
        let part = points_of(&r, 2_500_000);
        assert_eq!((part.line, part.io, part.sched), (2, 1, 1));
        assert_eq!(points_of(&r, 5_000_000).line, 0);
        // A short wait that the thread's clock gave a point keeps it whole.
        let short = rec(records::CLASS_IO, 1_000, 200_000, 250_000, 1, 0);
        assert_eq!(points_of(&short, 500).io, 1);
        // A lock wait counts for its line from the wakeup on only.
        let l = points_of(&rec(records::CLASS_LOCK, 1, 3_000_001, 3_000_001, 3, 0), 0);
        assert_eq!((l.line, l.io, l.sched, l.lock), (0, 0, 0, 3));
        let handoff = points_of(&rec(records::CLASS_LOCK, 1, 3_000_001, 5_000_001, 3, 2), 0);
        assert_eq!((handoff.line, handoff.sched, handoff.lock), (2, 2, 3));
        assert_eq!(all.lock, 0);
        // Preempted: runqueue throughout, and for the line it ran.
        let s = points_of(&rec(records::CLASS_SCHED, 1, 0, 2_000_001, 0, 2), 0);
        assert_eq!((s.line, s.io, s.sched), (2, 0, 2));
        // On-CPU with steal: all of it is the line's, none is runqueue.
        let c = points_of(&rec(records::CLASS_CPU, 10, 0, 10, 2, 3), 0);
        assert_eq!((c.line, c.io, c.sched), (5, 0, 0));
        assert_eq!(
            points_of(&rec(records::CLASS_CPU, 10, 0, 10, 2, 3), 11).line,
            0
        );
    }
}
