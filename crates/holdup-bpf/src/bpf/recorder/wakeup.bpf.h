/*
 * Wakeups: when and by whom a sleeping thread was made runnable, which splits
 * its interval into waiting and runqueue time and is the edge of the
 * wait-for graph. A wakeup can be traced before the sleeper's switch-out is
 * (two CPUs race), so one seen while the thread still runs is kept as early.
 */

#ifndef EFAULT
#define EFAULT 14
#endif

/* Take the wakers' stacks (set by the loader): off when nothing reads them,
 * and then a budget draws at the switch-in. */
const volatile bool wakers_stacks = true;

/* The waker's user stack at the wakeup of thread `wakee`, sent as a record
 * of its own that the wakee's blocked sample names by the number returned
 * (0: none sent). It is read like a sample's (registers, frame-pointer walk,
 * copy of the stack top) and unwound in user space with CFI: a walk of frame
 * pointers alone loses the caller of every libc wrapper, since Debian's libc
 * has none. A record the ring had no room for is counted as lost. */
static __always_inline u32 send_waker_ustack(struct thread_state *st, u32 wakee, u64 now)
{
	struct task_struct *task = bpf_get_current_task_btf();
	u64 id = bpf_get_current_pid_tgid();
	struct scratch *s;
	u32 seq;

	if (task->flags & PF_KTHREAD)
		return 0;
	s = get_scratch(SCRATCH_WAKER);
	if (!s)
		return 0;
	seq = (st->waker_seq + 1) & ~WAKER_USTACK_REC;
	st->waker_seq = seq;
	s->rec.hdr.kind = REC_WAKER_USTACK;
	s->rec.pid = id >> 32;
	s->rec.tid = (u32)id;
	s->rec.waker_id = wakee;
	s->rec.waker_ustack = seq | WAKER_USTACK_REC;
	s->rec.end = now;
	capture_user(s, task, USER_LOADED);
	if (!(s->rec.flags & SF_USER_REGS))
		return 0;
	submit_sample(s, s->kstack);
	return seq | WAKER_USTACK_REC;
}

/* The waker's stacks at the wakeup of `p` (state `st`), taken when the
 * waiting part of its interval passes a sampling point (its blocked sample
 * will carry them, if the stack budget takes its stacks) and the waker is
 * current in task context: in interrupt context current is only the thread
 * the interrupt came upon. */
static __always_inline void take_waker_stacks(void *ctx, struct task_struct *p,
					      struct thread_state *st, u64 now)
{
	struct irq_context *ic = this_irq_ctx();
	u64 out = st->out < start_ns ? start_ns : st->out;
	u64 waited = st->off_credit + (now > out ? now - out : 0);
	long k;

	st->waker_kstack = 0;
	st->waker_ustack = 0;
	if (st->waker_kind != WAKER_THREAD || st->class == CLASS_SCHED ||
	    st->waker_id != (u32)bpf_get_current_pid_tgid() || waited < period_ns)
		return;
	if (ic && (ic->hardirq || ic->ipi || ic->timer || ic->softirq))
		return;
	if (!stack_budget_draw_early(st, now, waited / period_ns))
		return;
	/* Without this program and the tracepoint's caller (bpf_trace_run1). */
	k = bpf_get_stackid(ctx, &waker_stacks, 2 & BPF_F_SKIP_FIELD_MASK);
	/* -EFAULT: no kernel stack to walk; the rest is no room. */
	if (k < 0 && k != -EFAULT)
		count_lost(LOST_STACK_TABLE, REC_WAKER_STACK);
	st->waker_kstack = k < 0 ? 0 : k + 1;
	st->waker_ustack = send_waker_ustack(st, p->pid, now);
	st->waker_pid = bpf_get_current_pid_tgid() >> 32;
}

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
	if (wakers_stacks)
		take_waker_stacks(ctx, p, st, st->wake);
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
