/*
 * Context switches: the heart of blocked samples. The hooks only take
 * timestamps and decide the subclass at switch-out (bperf's approach); at
 * switch-in the off-CPU clock is advanced over the interval, and only if it
 * passed a sampling point is a blocked sample made, with its kernel stack
 * read from the sleeping task now and its user stack parked for later. Every
 * interval is also a wait segment for the wait-for graph.
 */

/* How far apart a wakeup traced before the switch-out and that switch-out
 * may be: the waker and the sleeper race on two CPUs for a few µs. */
#define EARLY_WAKE_NS 50000

/* Internal class of an interval the tool's delay took: no points, no sample. */
#define CLASS_DELAY 0xff

static __always_inline void switch_out(void *ctx, struct task_struct *prev,
				       struct thread_state *st, struct task_struct *next,
				       bool preempt, unsigned int prev_state, u64 now, u64 steal)
{
	st->seen = 1;
	if (st->pending)
		emit_pending(SCRATCH_TASK, st, prev, USER_LOADED, SF_LATE_USTACK);
	resume_if_switch_in_missed(st);
	sample_short_run(ctx, prev, st, now, steal);
	stop_cpu_clock(st, now);
	take_steal(st, steal);
	if (prev_state & TASK_DEAD) {
		st->out = 0;
		return;
	}
	st->out = now;
	st->wake = 0;
	st->b_tau = 0;
	st->waker_kind = WAKER_NONE;
	st->waker_id = 0;
	st->waker_kstack = 0;
	st->waker_ustack = 0;
	if (preempt || prev_state == TASK_RUNNING)
		st->class = own_preemption_is_delay && BPF_CORE_READ(next, tgid) == self_tgid ?
				    CLASS_DELAY : CLASS_SCHED;
	else
		st->class = classify_sleep(prev, st);
	if (st->class != CLASS_SCHED && st->early_wake &&
	    (s64)(now - st->early_wake) < EARLY_WAKE_NS &&
	    (s64)(st->early_wake - now) < EARLY_WAKE_NS) {
		/* Woken while going to sleep: runnable from the start. */
		st->wake = now;
		st->waker_kind = st->early_waker_kind;
		st->waker_id = st->early_waker_id;
	}
	st->early_wake = 0;
}

/* First sight of a thread that was already off-CPU when the recording
 * started (`asleep`: not just runnable): one interval from the start. */
static __always_inline void first_sight(struct task_struct *t, struct thread_state *st, bool asleep)
{
	if (st->seen)
		return;
	st->seen = 1;
	if (!st->out && start_ns && asleep) {
		st->out = start_ns;
		st->class = classify_sleep(t, st);
	}
}

/* The wait segment of the interval [out, now) of `task`, switched in on
 * `cpu`, for the wait-for graph. */
static __always_inline void write_segment(struct task_struct *task, struct thread_state *st,
					  u64 out, u64 wake, u64 now, u16 cpu)
{
	struct segment_rec *r = reserve(REC_SEGMENT, sizeof(*r));

	if (!r)
		return;
	r->pid = task->tgid;
	r->tid = task->pid;
	r->start = out;
	r->wake = wake;
	r->end = now;
	r->waker_id = st->waker_id;
	r->waker_kind = st->waker_kind;
	r->class = st->class == CLASS_DELAY ? CLASS_SCHED : st->class;
	r->cpu = cpu;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

/* End the off-CPU interval of `task` at `now`: switched in on `cpu`, or
 * still off-CPU at the end of the recording (cpu CPU_OPEN). If it passed a
 * sampling point, parks its blocked sample (with its kernel stack) for the
 * user stack and returns true; the sample is the interval's wait segment
 * too. Otherwise writes the wait segment alone. A sample parked before,
 * whose thread never got back to user space, is emitted first (`how`:
 * whether its user stack can be read here). */
static __always_inline bool close_interval(struct task_struct *task, struct thread_state *st,
					   u64 now, u16 cpu, enum scratch_slot slot,
					   enum user_access how, u16 flags)
{
	u64 out = st->out, wake = st->wake;
	u32 w, ws;

	st->out = 0;
	if (out < start_ns)
		out = start_ns;
	if (wake && wake < out)
		wake = out;
	if (wake > now)
		wake = now;
	syscall_off_cpu(task, st, out, wake, now);

	w = 0;
	ws = 0;
	if (st->class != CLASS_DELAY)
		split_points(&st->off_credit, out, wake, now, st->class, &w, &ws);
	if (w + ws && !within_stack_budget(st, &w, &ws, st->class, now))
		w = ws = 0;	/* counted; the segment alone is written */
	if (w + ws == 0) {
		if (emit_segments)
			write_segment(task, st, out, wake, now, cpu);
		return false;
	}
	if (st->pending)
		emit_pending(slot, st, task, how, flags);
	/* The sample has every field of the segment: one ring record less
	 * for each blocked sample. */
	st->p_segment = emit_segments;
	st->p_start = out;
	st->p_wake = wake;
	st->p_end = now;
	st->p_weight = w;
	st->p_sched_weight = ws;
	st->p_class = st->class;
	st->p_waker_kind = st->waker_kind;
	st->p_waker_id = st->waker_id;
	st->p_waker_kstack = st->waker_kstack;
	st->p_waker_ustack = st->waker_ustack;
	st->p_waker_pid = st->waker_pid;
	st->p_cpu = cpu;
	read_kstack(task, st, scratch_at(slot), slot == SCRATCH_TASK);
	st->p_unserved = 0;
	st->pending = 1;
	return true;
}

static __always_inline void switch_in(struct task_struct *prev, struct task_struct *next,
				      struct thread_state *st, u64 now, u64 steal)
{
	bool loaded;
	u32 *parked;

	st->run_mark = now;
	st->run_start = now;
	start_kernel_part(next, st);
	mark_steal(st, steal);
	first_sight(next, st, true);
	if (!st->out)
		return;
	/* Most switches stay inside one process: then the user stack can be
	 * read right away, otherwise it waits for the thread to run. A kernel
	 * thread has none to wait for. */
	loaded = mm_loaded(prev, next) || (next->flags & PF_KTHREAD);
	if (!close_interval(next, st, now, bpf_get_smp_processor_id(), SCRATCH_TASK,
			    loaded ? USER_LOADED : USER_NONE, SF_LATE_USTACK))
		return;
	if (loaded) {
		emit_pending(SCRATCH_TASK, st, next, USER_LOADED, 0);
	} else {
		parked = this_parked_tid();
		if (parked)
			*parked = next->pid;
		st->p_unserved = !queue_park_work(next);
	}
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	u64 now = bpf_ktime_get_ns(), steal = rq_steal(prev);	/* prev is still on this CPU */
	struct irq_context *ic = this_irq_ctx();
	struct switch_hints *hints = this_switch_hints();
	struct thread_state *st;

	/* No interrupt handler runs across a context switch: whatever the
	 * entry/exit hooks left behind (an exit missed while attaching) must
	 * not name the wakers of the rest of the recording. */
	if (ic)
		__builtin_memset(ic, 0, sizeof(*ic));
	if (hints)
		__builtin_memset(hints, 0, sizeof(*hints));
	/* Without its state a thread's interval is not seen starting or
	 * ending: its wait segment and blocked sample are lost. */
	if (is_tracked(prev)) {
		st = state_of(prev, true);
		if (st)
			switch_out(ctx, prev, st, next, preempt, prev_state, now, steal);
		else
			count_lost(LOST_NO_STATE, REC_SEGMENT);
	}
	if (is_tracked(next)) {
		st = state_of(next, true);
		if (st)
			switch_in(prev, next, st, now, steal);
		else
			count_lost(LOST_NO_STATE, REC_SEGMENT);
	}
	return 0;
}
