/*
 * Context switches advance the off-CPU clocks by cause of threads with an
 * operation open: the cause is decided at switch-out (runqueue, I/O wait,
 * futex, other) and the time credited at switch-in, so a call's end reads
 * the difference from its start's snapshot. Futex waits are also the lock
 * operation, timed whole.
 */

static __always_inline bool in_futex(struct task_struct *t)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
	long nr;

	if (!regs)
		return false;
	nr = BPF_CORE_READ(regs, orig_ax);
	return nr == 202 /* futex */ || nr == 449 /* futex_waitv */;
}

/* One wait of the lock operation: all of it waiting for the lock. */
static __always_inline void lock_wait(struct task_struct *t, u64 now, u64 delta)
{
	struct causes waited = {}, none = {};
	u32 tgid = BPF_CORE_READ(t, tgid);
	char comm[16];

	waited.ns[LAT_CAUSE_LOCK] = delta;
	waited.any = delta;
	add(tgid, LAT_LOCK, 0, now, delta, &waited, &none);
	/* add() names processes after the current task: here, the one
	 * switching out. */
	BPF_CORE_READ_STR_INTO(&comm, t, group_leader, comm);
	bpf_map_update_elem(&comms, &tgid, &comm, BPF_NOEXIST);
}

/* Advance the off-CPU clocks of threads that have an operation open (only
 * those have storage). Time from wakeup to switch-in counts for the cause
 * of the sleep, preemption for the runqueue. */
SEC("tp_btf/sched_switch")
int BPF_PROG(lat_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct thread_starts *s;
	u64 now = bpf_ktime_get_ns();

	s = bpf_task_storage_get(&starts, prev, 0, 0);
	/* Lock waits are timed for every traced thread, open call or not. */
	if (!s && lock_waits && prev_state != 0 && tgid_tracked(BPF_CORE_READ(prev, tgid))) {
		s = bpf_task_storage_get(&starts, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!s)
			count_lost(LAT_LOST_START_FULL);
	}
	if (s) {
		s->out_at = now;
		if (prev_state == 0 /* TASK_RUNNING */)
			s->out_cause = LAT_CAUSE_RUNQ;
		else if (BPF_CORE_READ_BITFIELD_PROBED(prev, in_iowait))
			s->out_cause = LAT_CAUSE_IO;
		else if (in_futex(prev))
			s->out_cause = LAT_CAUSE_LOCK;
		else
			s->out_cause = LAT_CAUSE_OTHER;
		/* Where an open system call blocked: the level below its
		 * cause. (The current task here is prev.) */
		s->out_stack = -1;
		if (s->sys_start && s->out_cause != LAT_CAUSE_RUNQ) {
			/* A failed walk (or a full or colliding stack table)
			 * loses this wait's site. */
			s->out_stack = bpf_get_stackid(ctx, &wait_stacks, 0);
			if (s->out_stack < 0)
				count_lost(LAT_LOST_NO_STACK);
		}
	}
	s = bpf_task_storage_get(&starts, next, 0, 0);
	if (s && s->out_at) {
		if (s->out_cause < LAT_CAUSES) {
			s->off.ns[s->out_cause] += now - s->out_at;
			s->off.any += now - s->out_at;
		}
		if (lock_waits && s->out_cause == LAT_CAUSE_LOCK)
			lock_wait(next, now, now - s->out_at);
		if (s->sys_start && s->out_stack >= 0)
			add_site(s, now - s->out_at);
		s->out_at = 0;
	}
	return 0;
}
