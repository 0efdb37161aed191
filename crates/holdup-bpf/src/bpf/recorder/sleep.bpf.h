/*
 * What a sleeping thread waits for (the blocked subclass), decided at its
 * switch-out from what is cheap to read then: the I/O-wait flag, a futex
 * system call in its saved registers, or a sleeping kernel lock it was seen
 * contending for.
 */

/* Blocked in futex(2) or futex_waitv(2): a pthread mutex, condition variable,
 * barrier or rwlock. The syscall number is in the saved user registers, which
 * is far cheaper than tracing every syscall (x86-64 numbers). */
static __always_inline bool in_futex_wait(struct task_struct *t)
{
	struct pt_regs *regs;
	long nr;

	if (t->flags & PF_KTHREAD)
		return false;
	regs = (struct pt_regs *)bpf_task_pt_regs(t);
	if (!regs)
		return false;
	nr = regs->orig_ax;
	return nr == NR_futex || nr == NR_futex_waitv;
}

static __always_inline u8 classify_sleep(struct task_struct *t, struct thread_state *st)
{
	if (BPF_CORE_READ_BITFIELD(t, in_iowait))
		return CLASS_IO;
	if (st->klock || in_futex_wait(t))
		return CLASS_LOCK;
	return CLASS_OTHER;
}

/* Sleeping kernel locks (mutex, rwsem, semaphore, rt_mutex) count as lock
 * waits; spinning does not sleep and is ignored. */
SEC("tp_btf/contention_begin")
int BPF_PROG(on_contention_begin, void *lock, unsigned int flags)
{
	struct task_struct *task;
	struct thread_state *st;

	if (flags & LCB_F_SPIN)
		return 0;
	task = bpf_get_current_task_btf();
	if (!is_tracked(task))
		return 0;
	st = state_of(task, true);
	if (st)
		st->klock = 1;
	return 0;
}

SEC("tp_btf/contention_end")
int BPF_PROG(on_contention_end, void *lock, int ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct thread_state *st = state_of(task, false);

	if (st)
		st->klock = 0;
	return 0;
}
