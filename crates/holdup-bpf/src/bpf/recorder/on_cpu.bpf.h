/*
 * On-CPU samples: a cpu-clock perf event ticks on every CPU, and the tick
 * that finds a tracked thread running turns the points its on-CPU clock
 * passed into one weighted sample with its stacks (the tick is where they can
 * be read). Steal time rides on it as runqueue points.
 */

/* Turn what the on-CPU and steal clocks of the running `task` hold into an
 * on-CPU sample at its current stacks, if that is a sampling point or more.
 * `kflags` says how to read the kernel stack's first frame; `flags` are the
 * sample's own (an exit tail takes no kernel stack: it would be the exit
 * path and this program's own frames, where none of that time was spent). */
static __always_inline void take_cpu_sample(void *ctx, enum scratch_slot slot,
					    struct task_struct *task, struct thread_state *st,
					    u16 kflags, u16 flags, u64 steal)
{
	struct scratch *s;
	u32 w, ws;
	u64 now;
	long n;

	resume_if_switch_in_missed(st);
	now = bpf_ktime_get_ns();
	/* Not seen switching in: running since before the recording. */
	if (!st->run_mark)
		st->run_mark = start_ns ? start_ns : now;
	count_run_time(st, now);
	take_steal(st, steal);
	w = take_points(&st->cpu_credit, 0);
	ws = take_points(&st->steal_credit, 0);
	st->run_mark = now;
	if (!w && !ws)
		return;

	s = get_scratch(slot);
	if (!s)
		return;
	s->rec.pid = task->tgid;
	s->rec.tid = task->pid;
	s->rec.start = now;
	s->rec.end = now;
	s->rec.weight = w;
	s->rec.sched_weight = ws;
	s->rec.class = CLASS_CPU;
	s->rec.cpu = bpf_get_smp_processor_id();
	s->rec.flags = flags;
	/* Empty when the sample hit user mode. */
	n = flags & SF_EXIT_TAIL ? 0 : bpf_get_stack(ctx, s->kstack, sizeof(s->kstack), 0);
	if (n > 0) {
		s->rec.kstack_len = (u64)n / 8;
		s->rec.flags |= kflags;
	}
	capture_user(s, task, USER_LOADED);
	/* An exit tail's stack is not used (see above). */
	if (!(flags & SF_EXIT_TAIL))
		capture_python(s, st, task);
	submit_sample(s, s->kstack);
}

SEC("perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	u64 steal = rq_steal(task);
	struct thread_state *st;

	if (!is_tracked(task))
		return 0;
	st = state_of(task, true);
	if (!st) {
		count_lost(LOST_NO_STATE, REC_SAMPLE);
		return 0;
	}
	if (st->pending)
		emit_pending(SCRATCH_IRQ, st, task, USER_LOADED, SF_LATE_USTACK);
	take_cpu_sample(ctx, SCRATCH_IRQ, task, st, SF_KSTACK_LEAF_IS_IP, 0, steal);
	return 0;
}
