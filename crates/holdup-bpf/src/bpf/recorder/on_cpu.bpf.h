/*
 * On-CPU samples: a cpu-clock perf event ticks on every CPU, and the tick
 * that finds a tracked thread running turns the points its on-CPU clock
 * passed into one weighted sample with its stacks (the tick is where they can
 * be read). Steal time rides on it as runqueue points.
 */

/* `kskip` of a sample that takes no kernel stack. */
#define KSTACK_NONE (~0ULL)

/* Turn what the on-CPU and steal clocks of the running `task` hold into an
 * on-CPU sample at its current stacks, if that is a sampling point or more,
 * leaving `keep` on-CPU points on the clock for a later sample. `kflags`
 * says how to read the kernel stack's first frame and `kskip` how many of
 * its frames are the tracing's own (KSTACK_NONE: take none, where the
 * kernel stack is the way out and this program's own frames, none of the
 * time spent there: a return to user space, an exit tail); `flags` are the
 * sample's own. */
static __always_inline void take_cpu_sample(void *ctx, enum scratch_slot slot,
					    struct task_struct *task, struct thread_state *st,
					    u16 kflags, u64 kskip, u16 flags, u64 steal, u32 keep)
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
	if (keep > w)
		keep = w;
	st->cpu_credit += keep * period_ns;
	w -= keep;
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
	n = kskip == KSTACK_NONE ?
		    0 :
		    bpf_get_stack(ctx, s->kstack, sizeof(s->kstack), kskip & BPF_F_SKIP_FIELD_MASK);
	if (n > 0) {
		s->rec.kstack_len = (u64)n / 8;
		s->rec.flags |= kflags;
	}
	capture_user(s, task, USER_LOADED);
	/* An exit tail's stack is not used (user space puts its points at
	 * the thread's last on-CPU sample). */
	if (!(flags & SF_EXIT_TAIL))
		capture_python(s, st, task);
	submit_sample(s, s->kstack);
}

/*
 * Where a tick is not the place to sample. A thread that runs in bursts
 * shorter than a period between its waits (a system call's own work
 * between two of its waits) is rarely found running by a tick: the points
 * of its bursts would be charged by the next tick that finds it running,
 * to its longest stretches of computing, never to the system call whose
 * work they were. So a run's points are sampled where the run's own
 * stacks stand for them:
 * - a run's kernel part (from its switch-in to its return to user space,
 *   or to its switch-out if it never returns: a system call's or fault's
 *   work) is sampled at its end, or by the ticks within it, for the points
 *   it passed itself; the points carried from before it are left for the
 *   ticks. The return is seen for threads with rseq (glibc registers it);
 * - a short run in user space that ends in a wait (SHORT_RUN_NS or less:
 *   a few calls between two system calls) is sampled at its end, where it
 *   blocked; a tick in its first SHORT_RUN_NS takes nothing, since the run
 *   may end short and be sampled then;
 * - longer runs are left to the ticks, which find them running where their
 *   time went, and so are the points carried.
 */

/* The longest user-space run whose stacks at its end stand for all of it.
 * Longer, the end of a run that computed before it blocked took the points
 * of that computing: with 100 us, a loop of fdatasync calls got 108% of the
 * time it measured itself. */
#define SHORT_RUN_NS 25000ULL

/* `task` is switched in: its run starts in the kernel (where it blocked or
 * was preempted), and its return to user space will be seen if it has
 * rseq. */
static __always_inline void start_kernel_part(struct task_struct *task, struct thread_state *st)
{
	struct switch_hints *h;

	st->kernel_part = 0;
	if (!task->rseq)
		return;
	h = this_switch_hints();
	if (!h)
		return;
	h->kernel_part = task->pid;
	st->kernel_part = 1;
}

/* The on-CPU points `task`'s clock holds from before the current run part:
 * not the part's own. */
static __always_inline u32 carried_points(struct thread_state *st)
{
	return st->cpu_credit / period_ns;
}

SEC("perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	u64 steal = rq_steal(task);
	struct thread_state *st;
	u32 keep = 0;

	if (!is_tracked(task))
		return 0;
	st = state_of(task, true);
	if (!st) {
		count_lost(LOST_NO_STATE, REC_SAMPLE);
		return 0;
	}
	if (st->pending)
		emit_pending(SCRATCH_IRQ, st, task, USER_LOADED, SF_LATE_USTACK);
	/* In a kernel part the tick takes the part's own points; early in a
	 * user-space run, none (see above). Either way the tick charges a
	 * burst the points the thread's earlier computing left for the ticks
	 * no more: a loop of fdatasync calls got up to 112% of the time it
	 * measured itself, and up to 138% of its CPU time. */
	if (st->kernel_part && st->run_mark)
		keep = carried_points(st);
	else if (st->run_mark && st->run_start && bpf_ktime_get_ns() - st->run_start < SHORT_RUN_NS)
		return 0;
	take_cpu_sample(ctx, SCRATCH_IRQ, task, st, SF_KSTACK_LEAF_IS_IP, 0, 0, steal, keep);
	return 0;
}

/* Frames of a kernel stack taken in the sched_switch tracepoint that are
 * the tracing's own (the program, bpf_trace_run4): it starts at __schedule. */
#define SWITCH_TRACE_FRAMES 2

/* The run of `prev`, ending now: sampled at the stacks it leaves with if
 * it passed a sampling point and is a kernel part or a short run (see
 * above), for its own points. */
static __always_inline void sample_short_run(void *ctx, struct task_struct *prev,
					     struct thread_state *st, u64 now, u64 steal)
{
	u64 run;
	u32 carried;

	if (!st->run_mark || now <= st->run_mark)
		return;
	run = now - st->run_mark;
	if (run > SHORT_RUN_NS && !st->kernel_part)
		return;
	carried = carried_points(st);
	if ((st->cpu_credit + run) / period_ns == carried)
		return;
	take_cpu_sample(ctx, SCRATCH_TASK, prev, st, 0, SWITCH_TRACE_FRAMES, 0, steal, carried);
}

/* The current thread returns to user space: the end of its run's kernel
 * part, sampled for its own points at its user stack, which is still the
 * system call's (its kernel stack is the way out, where none of the time
 * went). A short run in user space is timed from here. */
static __always_inline void end_kernel_part(void *ctx)
{
	struct switch_hints *h = this_switch_hints();
	struct task_struct *task;
	struct thread_state *st;

	if (!h || !h->kernel_part || h->kernel_part != (u32)bpf_get_current_pid_tgid())
		return;
	h->kernel_part = 0;
	task = bpf_get_current_task_btf();
	st = state_of(task, false);
	if (!st || !st->kernel_part)
		return;
	st->kernel_part = 0;
	if (!st->run_mark)
		return;
	take_cpu_sample(ctx, SCRATCH_TASK, task, st, 0, KSTACK_NONE, 0, rq_steal(task),
			carried_points(st));
	st->run_start = st->run_mark;
}

/* The thread is on its way back to user space after being switched in (rseq
 * notifies every switched-out task that has registered rseq, as glibc does):
 * its user stack is still the one it blocked with, and its run's kernel
 * part ends. */
SEC("tp_btf/rseq_update")
int BPF_PROG(on_rseq_update, struct task_struct *t)
{
	emit_parked();
	end_kernel_part(ctx);
	return 0;
}
