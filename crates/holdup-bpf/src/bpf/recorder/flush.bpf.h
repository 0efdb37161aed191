/*
 * The end of a recording: a task iterator writes what is still open as if it
 * ended now, since no hook will fire for it.
 */

/* At the end of a recording, threads that are still off-CPU have an open
 * interval, and threads switched in but not yet back in user space have a
 * parked sample. Both are flushed by walking all tasks; the program may
 * sleep, so it can read the user stacks of other processes. */
SEC("iter.s/task")
int flush_open(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct thread_state *st;

	if (!task || !is_tracked(task))
		return 0;
	st = state_of(task, true);
	if (!st) {
		count_lost(LOST_NO_STATE, REC_SEGMENT);
		return 0;
	}
	first_sight(task, st, task->__state != TASK_RUNNING);
	if (st->pending)
		emit_pending(SCRATCH_ITER, st, task, USER_REMOTE, SF_BLOCKED_TAIL);
	if (st->out && close_interval(task, st, bpf_ktime_get_ns(), CPU_OPEN, SCRATCH_ITER,
				      USER_REMOTE, SF_BLOCKED_TAIL))
		emit_pending(SCRATCH_ITER, st, task, USER_REMOTE, SF_BLOCKED_TAIL);
	return 0;
}
