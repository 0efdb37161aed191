/*
 * Task lifecycle (fork, exec, rename, exit): user space names threads and
 * follows processes with these, and an exiting thread's clocks are paid out
 * so that its last points are not lost.
 */

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	struct fork_rec *r;
	u32 parent_tgid, child_tgid;
	bool inherited = false;

	if (!is_tracked(parent))
		return 0;
	parent_tgid = BPF_CORE_READ(parent, tgid);
	child_tgid = BPF_CORE_READ(child, tgid);
	/* A new process, not a thread. */
	if (child_tgid != parent_tgid) {
		if (!trace_all) {
			if (!follow_children)
				return 0;
			track_tgid(child_tgid);
		}
		inherited = py_inherit(parent_tgid, child_tgid);
	}
	r = reserve(REC_FORK, sizeof(*r));
	if (!r)
		return 0;
	r->time = bpf_ktime_get_ns();
	r->parent_pid = parent_tgid;
	r->parent_tid = BPF_CORE_READ(parent, pid);
	r->pid = child_tgid;
	r->tid = BPF_CORE_READ(child, pid);
	BPF_CORE_READ_STR_INTO(&r->comm, child, comm);
	r->py_inherited = inherited;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct exec_rec *r;

	if (!is_tracked(p))
		return 0;
	/* The new image is not the interpreter (user space registers it
	 * again if it is one). */
	forget_python(BPF_CORE_READ(p, tgid));
	r = reserve(REC_EXEC, sizeof(*r));
	if (!r)
		return 0;
	r->time = bpf_ktime_get_ns();
	r->pid = BPF_CORE_READ(p, tgid);
	r->tid = BPF_CORE_READ(p, pid);
	BPF_CORE_READ_STR_INTO(&r->comm, p, comm);
	bpf_probe_read_kernel_str(r->filename, sizeof(r->filename), bprm->filename);
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

static __always_inline void emit_task_rec(u32 kind, struct task_struct *t, const char *comm)
{
	struct task_rec *r = reserve(kind, sizeof(*r));

	if (!r)
		return;
	r->time = bpf_ktime_get_ns();
	r->pid = BPF_CORE_READ(t, tgid);
	r->tid = BPF_CORE_READ(t, pid);
	bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), comm);
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

SEC("tp_btf/task_rename")
int BPF_PROG(on_rename, struct task_struct *task, const char *comm)
{
	if (is_tracked(task))
		emit_task_rec(REC_COMM, task, comm);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p, bool group_dead)
{
	u64 steal = rq_steal(p);	/* p is current */
	struct thread_state *st;

	if (!is_tracked(p))
		return 0;
	st = state_of(p, false);
	if (st && st->pending)
		emit_pending(SCRATCH_TASK, st, p, USER_LOADED, SF_LATE_USTACK);
	/* Its last points: the CPU time no on-CPU sample found it running
	 * (it runs for less than a period at a time, or for a long steal no
	 * sample fired at all). User space puts them where its last on-CPU
	 * sample was. */
	if (st)
		take_cpu_sample(ctx, SCRATCH_TASK, p, st, 0, KSTACK_NONE, SF_EXIT_TAIL, steal, 0);
	emit_task_rec(REC_EXIT, p, p->comm);
	if (group_dead)
		forget_python(p->tgid);
	if (group_dead && !trace_all)
		untrack_tgid(p->tgid);
	return 0;
}
