//! Interpreter frames into a native stack: each native frame of the
//! evaluator (`_PyEval_EvalFrameDefault`) runs one group of interpreter
//! frames (3.10: one frame; 3.11+: the frames one evaluator call runs, up to
//! the one marked as its entry), so the k-th evaluator frame from the leaf
//! is replaced by the k-th group. Native frames around them stay
//! (`time_sleep → pysleep` under `worker (app.py:42)`). Groups left when the
//! native stack ends (its unwinding stops early: CPython has no frame
//! pointers and the recorder copies a few KiB of stack) go at the outer end.

/// What a splice did, for the recording's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spliced {
    /// Groups put in place of an evaluator frame.
    pub placed: usize,
    /// Groups past the end of the native stack.
    pub past_native: usize,
    /// Evaluator frames left without a group.
    pub unmatched: usize,
}

/// `native` (leaf first) with each evaluator frame (where `evaluator` is
/// true) replaced by the next of `groups` (leaf first, each leaf first),
/// into `out`.
pub fn splice<F: Clone>(
    native: &[F],
    evaluator: &[bool],
    groups: &[Vec<F>],
    out: &mut Vec<F>,
) -> Spliced {
    let mut done = Spliced::default();
    let mut next = groups.iter();
    for (i, f) in native.iter().enumerate() {
        if evaluator.get(i).copied().unwrap_or(false) {
            if let Some(g) = next.next() {
                out.extend(g.iter().cloned());
                done.placed += 1;
                continue;
            }
            done.unmatched += 1;
        }
        out.push(f.clone());
    }
    for g in next {
        out.extend(g.iter().cloned());
        done.past_native += 1;
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spliced(native: &[&str], groups: &[&[&str]]) -> (Vec<String>, Spliced) {
        let groups: Vec<Vec<String>> = groups
            .iter()
            .map(|g| g.iter().map(|s| s.to_string()).collect())
            .collect();
        let native: Vec<String> = native.iter().map(|s| s.to_string()).collect();
        let mut out = Vec::new();
        let evaluator: Vec<bool> = native
            .iter()
            .map(|f| f == "_PyEval_EvalFrameDefault")
            .collect();
        let done = splice(&native, &evaluator, &groups, &mut out);
        (out, done)
    }

    #[test]
    fn groups_replace_evaluator_frames_in_order_and_native_frames_stay() {
        let (out, done) = spliced(
            &[
                "clock_nanosleep",
                "pysleep",
                "time_sleep",
                "_PyEval_EvalFrameDefault",
                "method_vectorcall",
                "_PyEval_EvalFrameDefault",
                "thread_run",
            ],
            &[
                &["worker (app.py:42)", "run (app.py:50)"],
                &["Thread.run (threading.py:982)"],
            ],
        );
        assert_eq!(
            out,
            [
                "clock_nanosleep",
                "pysleep",
                "time_sleep",
                "worker (app.py:42)",
                "run (app.py:50)",
                "method_vectorcall",
                "Thread.run (threading.py:982)",
                "thread_run"
            ]
        );
        assert_eq!(
            done,
            Spliced {
                placed: 2,
                past_native: 0,
                unmatched: 0
            }
        );
    }

    #[test]
    fn groups_past_the_native_stack_go_outside_and_evaluators_without_a_group_stay() {
        let (out, done) = spliced(
            &["pymalloc_alloc", "_PyEval_EvalFrameDefault"],
            &[
                &["hot (app.py:3)"],
                &["main (app.py:9)"],
                &["<module> (app.py:12)"],
            ],
        );
        assert_eq!(
            out,
            [
                "pymalloc_alloc",
                "hot (app.py:3)",
                "main (app.py:9)",
                "<module> (app.py:12)"
            ]
        );
        assert_eq!(
            done,
            Spliced {
                placed: 1,
                past_native: 2,
                unmatched: 0
            }
        );

        let (out, done) = spliced(&["_PyEval_EvalFrameDefault", "main"], &[]);
        assert_eq!(out, ["_PyEval_EvalFrameDefault", "main"]);
        assert_eq!(done.unmatched, 1);
    }
}
