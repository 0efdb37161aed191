/*
 * The two sampling clocks of a thread (and its steal clock): time is credited
 * to a clock and paid out in whole sampling points, the remainder carried
 * over, so that the points of a thread add up to its lifetime whatever the
 * lengths of its intervals; an off-CPU interval is split at its wakeup into
 * blocked and runqueue points.
 */

/* Advance a clock by `len` ns: the sampling points it passes. */
static __always_inline u32 take_points(u64 *credit, u64 len)
{
	u64 w;

	*credit += len;
	w = *credit / period_ns;
	*credit -= w * period_ns;
	return w;
}

/* Advance the off-CPU clock over [out, end), split at the wakeup into
 * blocked and runqueue points. */
static __always_inline void split_points(u64 *credit, u64 out, u64 wake, u64 end, u8 class,
					 u32 *w, u32 *ws)
{
	if (end <= out) {
		*w = 0;
		*ws = 0;
	} else if (class == CLASS_SCHED) {
		*w = 0;
		*ws = take_points(credit, end - out);
	} else if (!wake) {
		*w = take_points(credit, end - out);
		*ws = 0;
	} else {
		*w = take_points(credit, wake - out);
		*ws = take_points(credit, end - wake);
	}
}

/* The thread is running, yet its last switch-out was never followed by a
 * switch-in. The kernel does report preemptions that do not happen (a
 * sched_switch to a task that never runs, then the old task goes on), so
 * the switch-out did not take: the thread ran all along since it. */
static __always_inline void resume_if_switch_in_missed(struct thread_state *st)
{
	if (st->run_mark || !st->out)
		return;
	st->run_mark = st->out;
	st->out = 0;
}

/* Add the time the thread has run since its last look (or since the
 * recording began) to its on-CPU clock. */
static __always_inline void count_run_time(struct thread_state *st, u64 now)
{
	u64 mark = st->run_mark;

	if (!mark)
		return;
	if (mark < start_ns)
		mark = start_ns;
	if (now > mark)
		st->cpu_credit += now - mark;
}

/* The steal time of the runqueue `t` runs on so far: what the scheduler left
 * out of the runtime of the tasks that ran there because the hypervisor did
 * not run the virtual CPU (paravirt steal accounting). One counter per CPU,
 * kept current by the scheduler's clock updates (at every switch, tick and
 * wakeup there), where a tracepoint on each runtime update cost a program
 * run every time. The runqueue is reached through the task's CFS runqueue,
 * which exists with group scheduling (on in distribution kernels); without
 * it, or without steal accounting, no steal is seen. Programs read it once,
 * at their start, for the task on the CPU: the verifier checks each load
 * through these large structures slowly, and one at the start is checked
 * once rather than on every path (on_switch loaded in twice the time). */
static __always_inline u64 rq_steal(struct task_struct *t)
{
	if (!bpf_core_field_exists(struct rq, prev_steal_time_rq) ||
	    !bpf_core_field_exists(struct cfs_rq, rq) ||
	    !bpf_core_field_exists(struct sched_entity, cfs_rq))
		return 0;
	/* Plain loads (BTF pointers): three helper reads cost about as much
	 * as the program this replaces. */
	return t->se.cfs_rq->rq->prev_steal_time_rq;
}

/* Start counting the steal time of the thread's CPU, `steal` now. */
static __always_inline void mark_steal(struct thread_state *st, u64 steal)
{
	st->steal_mark = steal;
	st->steal_cpu = bpf_get_smp_processor_id() + 1;
}

/* Move the steal time of its CPU since the last look (`steal` now) from the
 * on-CPU clock of a running thread to its steal clock (its run time counted
 * first). The counter lags the steal by up to a scheduler clock update, so
 * part of a steal can come after the on-CPU sample that already paid the
 * time out, and paid points cannot be taken back: the clock does not go
 * below zero, so that on-CPU and steal points together always add up to the
 * time the thread was on a CPU. */
static __always_inline void take_steal(struct thread_state *st, u64 steal)
{
	u64 mark = st->steal_mark, stolen;

	if (st->steal_cpu == bpf_get_smp_processor_id() + 1 && steal > mark) {
		stolen = steal - mark;
		if (stolen > st->cpu_credit)
			stolen = st->cpu_credit;
		st->cpu_credit -= stolen;
		st->steal_credit += stolen;
	}
	mark_steal(st, steal);
}

/* Stop the on-CPU clock of a thread leaving its CPU. */
static __always_inline void stop_cpu_clock(struct thread_state *st, u64 now)
{
	count_run_time(st, now);
	st->run_mark = 0;
}

/*
 * The stack budget: blocked-sample stacks (a kernel walk, a user stack copy
 * and its unwinding) cost far more than the clocks, and a context-switch
 * storm passes a sampling point at most of its intervals. With a budget,
 * each CPU takes stacks by threshold sampling: an interval of `points` is
 * taken with probability points / tau and then weighs tau points (scaled
 * as drawn), one of tau points or more is always taken, unscaled. Every
 * sample's expected points stay what they were (an unbiased estimate), the
 * exact points of every interval are counted by class, the long waits a
 * user looks for are never left to chance, and the expected stacks of a
 * window are at most its points / tau. tau follows the points of the CPU's
 * last window, so that this is the budget.
 */
#define BUDGET_WINDOW_NS 100000000ULL

/* Stacks a CPU may take per window, 0: no budget (every stack is taken). */
const volatile u32 budget_per_window = 0;

struct budget_state {
	struct stack_budget_counts c;
	u64 window_start;
	u64 seen;		/* points of the intervals in this window */
	u32 tau;		/* the threshold, this window (1: take all) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct budget_state);
} stack_budget SEC(".maps");

/* Draw for one interval of about `points` (at least 1) whether its stacks
 * are taken: returns the threshold of the draw and sets `keep`. */
static __always_inline u32 stack_budget_draw(struct budget_state *b, u64 now, u32 points,
					     u8 *keep)
{
	u64 tau;

	if (now - b->window_start >= BUDGET_WINDOW_NS) {
		tau = (b->seen + budget_per_window - 1) / budget_per_window;
		b->tau = tau ? (tau > 0xffffffffULL ? 0xffffffff : tau) : 1;
		b->seen = 0;
		b->window_start = now;
	}
	tau = b->tau ? b->tau : 1;
	*keep = points >= tau || bpf_get_prandom_u32() % tau < points;
	return tau;
}

/* Draw early, at the wakeup of the thread of `st` with `points` waited so
 * far, so that the waker's stacks are taken only for an interval whose
 * stacks will be: true if they will (or there is no budget). */
static __always_inline bool stack_budget_draw_early(struct thread_state *st, u64 now,
						    u32 points)
{
	struct budget_state *b;
	u32 zero = 0;

	if (!budget_per_window)
		return true;
	b = bpf_map_lookup_elem(&stack_budget, &zero);
	if (!b)
		return true;
	st->b_tau = stack_budget_draw(b, now, points, &st->b_keep);
	st->b_points = points;
	if (st->b_keep)
		b->c.waker_stacks++;
	return st->b_keep;
}

/* points * tau / drawn, rounded up with the odds of its remainder: a
 * floor takes up to a point off each scaled part (1 blocked and 1
 * runqueue point, kept at odds of 2 in 5, would weigh 2 + 2, not 5), a
 * bias that adds up over many short waits. */
static __always_inline u32 scale_points(u32 points, u32 tau, u32 drawn)
{
	u64 p = (u64)points * tau;
	u64 q = p / drawn;

	if (bpf_get_prandom_u32() % drawn < p % drawn)
		q++;
	return q > 0xffffffffULL ? 0xffffffff : q;
}

/* Whether the interval of `st` ending at `now` with `w` points of `class`
 * and `ws` runqueue points gets its stacks taken (drawn at its wakeup, or
 * now); if so its points are scaled by the inverse of the draw's odds. */
static __always_inline bool within_stack_budget(struct thread_state *st, u32 *w, u32 *ws,
						u8 class, u64 now)
{
	struct budget_state *b;
	u32 zero = 0, tau = st->b_tau, drawn = st->b_points;
	u8 keep = st->b_keep;

	st->b_tau = 0;
	if (!budget_per_window)
		return true;
	b = bpf_map_lookup_elem(&stack_budget, &zero);
	if (!b)
		return true;
	if (!tau) {
		drawn = *w + *ws;
		tau = stack_budget_draw(b, now, drawn, &keep);
	}
	b->seen += *w + *ws;
	b->c.intervals++;
	b->c.points[class & 7] += *w;
	b->c.points[CLASS_SCHED] += *ws;
	if (!keep)
		return false;
	if (drawn && drawn < tau) {
		*w = scale_points(*w, tau, drawn);
		*ws = scale_points(*ws, tau, drawn);
	}
	b->c.stacks++;
	b->c.scaled[class & 7] += *w;
	b->c.scaled[CLASS_SCHED] += *ws;
	return true;
}
