/*
 * Wakeups: when and by whom a sleeping thread was made runnable, which splits
 * its interval into waiting and runqueue time and is the edge of the
 * wait-for graph. A wakeup can be traced before the sleeper's switch-out is
 * (two CPUs race), so one seen while the thread still runs is kept as early.
 */

SEC("tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct *p)
{
	/* Only tracked threads have a state. */
	struct thread_state *st = state_of(p, false);

	if (!st)
		return 0;
	if (!st->out) {
		st->early_wake = bpf_ktime_get_ns();
		current_waker(&st->early_waker_kind, &st->early_waker_id);
		return 0;
	}
	if (st->wake)
		return 0;
	st->wake = bpf_ktime_get_ns();
	current_waker(&st->waker_kind, &st->waker_id);
	return 0;
}

/* A new thread is runnable from its creation: all of it until its first
 * switch-in is runqueue time, and its creator is its waker. */
SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_wakeup_new, struct task_struct *p)
{
	struct thread_state *st;
	u64 now;

	if (!is_tracked(p))
		return 0;
	st = state_of(p, true);
	if (!st) {
		count_lost(LOST_NO_STATE, REC_SEGMENT);
		return 0;
	}
	now = bpf_ktime_get_ns();
	st->seen = 1;
	st->out = now;
	st->wake = now;
	st->class = CLASS_SCHED;
	current_waker(&st->waker_kind, &st->waker_id);
	return 0;
}
