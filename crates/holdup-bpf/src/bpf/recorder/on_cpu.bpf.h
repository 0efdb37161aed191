/*
 * On-CPU samples: a cpu-clock perf event ticks on every CPU, and the tick
 * that finds a tracked thread running turns the points its on-CPU clock
 * passed into one weighted sample with its stacks (the tick is where they can
 * be read). Steal time rides on it as runqueue points.
 */

/* Turn what the on-CPU and steal clocks of the running `task` hold into an
 * on-CPU sample at its current stacks, if that is a sampling point or more,
 * leaving `keep` on-CPU points on the clock for a later sample. `kflags`
 * says how to read the kernel stack's first frame and `kskip` how many of
 * its frames are the tracing's own; `flags` are the sample's own (an exit
 * tail takes no kernel stack: it would be the exit path and this program's
 * own frames, where none of that time was spent). */
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
	n = flags & SF_EXIT_TAIL ? 0 :
				   bpf_get_stack(ctx, s->kstack, sizeof(s->kstack),
						 kskip & BPF_F_SKIP_FIELD_MASK);
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

/* The longest run whose stacks at its end stand for all of it (see below).
 * Longer, the end of a run that computed before it blocked took the points
 * of that computing: with 100 us, a loop of fdatasync calls got 108% of the
 * time it measured itself; with 25 us, 100-101% (left to the ticks: 92%). */
#define SHORT_RUN_NS 25000ULL

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
	/* A tick in a run's first SHORT_RUN_NS leaves the points on the clock.
	 * Were the run to end short, its own point is sampled at its end
	 * (sample_short_run), and this tick would have charged it the points
	 * the thread's earlier computing left for the ticks as well: a loop of
	 * fdatasync calls got 102-112% of the time it measured itself, its CPU
	 * time up to 138%; skipped, 96-104%, and CPU 79-103% (the first moments
	 * of longer runs are now seen by no tick). */
	if (st->run_mark && st->run_start && bpf_ktime_get_ns() - st->run_start < SHORT_RUN_NS)
		return 0;
	take_cpu_sample(ctx, SCRATCH_IRQ, task, st, SF_KSTACK_LEAF_IS_IP, 0, 0, steal, 0);
	return 0;
}

/* Frames of a kernel stack taken in the sched_switch tracepoint that are
 * the tracing's own (the program, bpf_trace_run4): it starts at __schedule. */
#define SWITCH_TRACE_FRAMES 2

/* The run of `prev`, ending now, if it is a short burst between waits (a
 * system call's own work between two of its waits) that passed a sampling
 * point: sampled here, at the stacks it leaves with. The next
 * tick that finds the thread running would charge those points to a later
 * run, elsewhere: to its longest stretches of computing, since those are
 * where the ticks find it, and never to the system call whose work it was.
 * A longer run is left to the ticks, which find it running where its time
 * went; so are points a longer run left unsampled (`keep`). */
static __always_inline void sample_short_run(void *ctx, struct task_struct *prev,
					     struct thread_state *st, u64 now, u64 steal)
{
	u64 run, carried;

	if (!st->run_mark || now <= st->run_mark)
		return;
	run = now - st->run_mark;
	if (run > SHORT_RUN_NS)
		return;
	carried = st->cpu_credit / period_ns;
	if ((st->cpu_credit + run) / period_ns == carried)
		return;
	take_cpu_sample(ctx, SCRATCH_TASK, prev, st, 0, SWITCH_TRACE_FRAMES, 0, steal,
			(u32)carried);
}
