/*
 * Emitting a sample: built in the CPU's scratch, then written to the ring in
 * one reservation with its variable tail. A blocked sample is parked in the
 * thread's state at switch-in, because only the thread itself can have its
 * user stack read: it is emitted on the way back to user space (rseq_update;
 * for threads without rseq a task work, or the sys_exit fallback on kernels
 * without task work), or failing that at the thread's next sample or
 * switch-out.
 */

static __always_inline struct scratch *scratch_at(enum scratch_slot slot)
{
	u32 key = slot;

	return bpf_map_lookup_elem(&scratch_map, &key);
}

static __always_inline struct scratch *get_scratch(enum scratch_slot slot)
{
	struct scratch *s = scratch_at(slot);

	if (s) {
		__builtin_memset(&s->rec, 0, sizeof(s->rec));
		s->rec.hdr.kind = REC_SAMPLE;
	}
	return s;
}

/* Write the sample in scratch, with `kstack` as its kernel stack. */
static __always_inline void submit_sample(struct scratch *s, u64 *kstack)
{
	u32 klen = s->rec.kstack_len, fplen = s->rec.fp_len, clen = s->rec.copy_len;
	u32 pylen = s->rec.py_len;
	u32 kbytes, fpbytes, pybytes, size, off;
	struct bpf_dynptr dp;

	if (klen > MAX_KSTACK)
		klen = MAX_KSTACK;
	if (fplen > MAX_FP)
		fplen = MAX_FP;
	if (pylen > MAX_PY_FRAMES)
		pylen = MAX_PY_FRAMES;
	clen &= STACK_COPY_MAX * 2 - 1;
	kbytes = klen * 8;
	fpbytes = fplen * 16;
	pybytes = pylen * sizeof(struct py_frame);
	size = sizeof(s->rec) + kbytes + fpbytes + clen + pybytes;
	s->rec.hdr.size = size;
	s->rec.kstack_len = klen;
	s->rec.fp_len = fplen;
	s->rec.copy_len = clen;
	s->rec.py_len = pylen;

	if (bpf_ringbuf_reserve_dynptr(&events, size, 0, &dp)) {
		bpf_ringbuf_discard_dynptr(&dp, 0);
		count_lost(LOST_RING_FULL, s->rec.hdr.kind);
		if (s->rec.flags & SF_SEGMENT)
			count_lost(LOST_RING_FULL, REC_SEGMENT);
		return;
	}
	off = sizeof(s->rec);
	bpf_dynptr_write(&dp, 0, &s->rec, sizeof(s->rec), 0);
	if (kbytes <= MAX_KSTACK * 8)
		bpf_dynptr_write(&dp, off, kstack, kbytes, 0);
	off += kbytes;
	if (fpbytes <= MAX_FP * 16)
		bpf_dynptr_write(&dp, off, s->fp, fpbytes, 0);
	off += fpbytes;
	bpf_dynptr_write(&dp, off, s->copy, clen, 0);
	off += clen;
	if (pybytes <= sizeof(s->py))
		bpf_dynptr_write(&dp, off, s->py, pybytes, 0);
	bpf_ringbuf_submit_dynptr(&dp, BPF_RB_NO_WAKEUP);
}

/* Emit the parked blocked sample of `task`, with its user stack if `how`
 * allows reading it. */
static __always_inline void emit_pending(enum scratch_slot slot, struct thread_state *st,
					 struct task_struct *task, enum user_access how, u16 flags)
{
	struct scratch *s;
	struct kstack *k;

	if (!__sync_lock_test_and_set(&st->pending, 0))
		return;
	if ((flags & SF_LATE_USTACK) && !task->rseq &&
	    task->se.sum_exec_runtime > RSEQ_STARTUP_NS)
		__sync_fetch_and_add(&late_without_rseq, 1);
	if (st->p_unserved && budget_per_window && how != USER_NONE) {
		/* The thread has most likely been back in user space since:
		 * its user stack now is not the one it blocked with. */
		how = USER_NONE;
		__sync_fetch_and_add(&ustacks_given_up, 1);
	}
	s = get_scratch(slot);
	if (!s)
		return;
	s->rec.pid = task->tgid;
	s->rec.tid = task->pid;
	s->rec.start = st->p_start;
	s->rec.wake = st->p_wake;
	s->rec.end = st->p_end;
	s->rec.weight = st->p_weight;
	s->rec.sched_weight = st->p_sched_weight;
	s->rec.class = st->p_class;
	s->rec.waker_kind = st->p_waker_kind;
	s->rec.waker_id = st->p_waker_id;
	s->rec.waker_kstack = st->p_waker_kstack;
	s->rec.waker_ustack = st->p_waker_ustack;
	s->rec.waker_pid = st->p_waker_pid;
	s->rec.cpu = st->p_cpu;
	s->rec.flags = flags | (st->p_segment ? SF_SEGMENT : 0);
	k = &st->ks[st->p_slot & 1];
	s->rec.kstack_len = k->len / 8;
	if (how != USER_NONE)
		capture_user(s, task, how);
	if (how == USER_LOADED) {
		capture_python(s, st, task);
		py_gil_holder(s, task);
	}
	submit_sample(s, k->ips);
}

/* Emit the sample parked at current's switch-in, if it has one: the
 * per-CPU hint spares the state lookup on every other return. */
static __always_inline void emit_parked(void)
{
	u32 *parked = this_parked_tid();
	struct task_struct *task;
	struct thread_state *st;

	if (!parked || !*parked || *parked != (u32)bpf_get_current_pid_tgid())
		return;
	*parked = 0;
	task = bpf_get_current_task_btf();
	st = state_of(task, false);
	if (st && st->pending)
		emit_pending(SCRATCH_TASK, st, task, USER_LOADED, 0);
}


/* Threads without rseq (Go's, static and musl programs') get no
 * rseq_update. Where the kernel has BPF task work (6.18+), a work queued at
 * their switch-in emits the parked sample on the way back to user space:
 * one work per such sample, where the sys_exit fallback below makes every
 * system call on the machine pay. */
struct park_work {
	struct bpf_task_work tw;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, u32);
	__type(value, struct park_work);
} park_works SEC(".maps");

extern int bpf_task_work_schedule_resume_impl(struct task_struct *task,
					      struct bpf_task_work *tw, void *map__map,
					      bpf_task_work_callback_t callback,
					      void *aux__prog) __ksym __weak;

#define EBUSY 16

/* Samples whose user stack a task work took, and threads without rseq
 * that no work could serve (no such kfunc, or it refused). */
u64 park_works_run = 0;
u64 park_works_unavailable = 0;

static int emit_parked_work(struct bpf_map *map, void *key, void *value)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct thread_state *st = state_of(task, false);

	if (st && st->pending) {
		emit_pending(SCRATCH_TASK, st, task, USER_LOADED, 0);
		__sync_fetch_and_add(&park_works_run, 1);
	}
	return 0;
}

/* Behave as on a kernel without BPF task work (set by the loader, to test
 * that path on any kernel). */
const volatile bool no_task_work = false;

/* Queue the work that emits the parked sample of `task` if it has no rseq:
 * false if the sample is left unserved (no such kfunc, or no work could be
 * queued). A work still queued for the thread (EBUSY) will emit it as well. */
static __always_inline bool queue_park_work(struct task_struct *task)
{
	struct park_work zero = {}, *w;
	u32 tid = task->pid;
	int err;

	if (task->rseq)
		return true;
	if (no_task_work || !bpf_ksym_exists(bpf_task_work_schedule_resume_impl))
		goto unserved;
	w = bpf_map_lookup_elem(&park_works, &tid);
	if (!w) {
		bpf_map_update_elem(&park_works, &tid, &zero, BPF_NOEXIST);
		w = bpf_map_lookup_elem(&park_works, &tid);
		if (!w)
			goto unserved;
	}
	err = bpf_task_work_schedule_resume_impl(task, &w->tw, &park_works, emit_parked_work,
						 NULL);
	if (!err || err == -EBUSY)
		return true;
unserved:
	__sync_fetch_and_add(&park_works_unavailable, 1);
	return false;
}

/* The same for threads without rseq, on their way out of a system call:
 * attached only when such threads are seen, no task work serves them and
 * there is no stack budget. */
SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit)
{
	emit_parked();
	return 0;
}
