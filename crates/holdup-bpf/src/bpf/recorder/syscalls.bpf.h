/*
 * System calls (record --syscalls): DeBox on a stock kernel. Every system
 * call of the target is timed between raw_syscalls sys_enter and sys_exit.
 * Its off-CPU time comes from the recorder's own switch bookkeeping (the hook
 * in switch_in, switch.bpf.h), split by the same subclasses as blocked
 * samples; its page faults are the task's fault counters read at both ends.
 * Exact per-process per-call totals live in a per-CPU map; an invocation
 * becomes a record (with the kernel stack of its longest sleep and the user
 * stack at sys_exit) when it was slow, slept or took a major fault, and one
 * in `syscall_sample_every` of the rest. The programs are attached only
 * with --syscalls.
 */
const volatile bool count_syscalls = false;
const volatile u64 syscall_keep_ns = 1000000;
const volatile u32 syscall_sample_every = 256;

struct sys_state {
	u64 start;		/* 0 while not inside a traced call */
	u64 blocked[4];		/* by class - 1 */
	u64 longest;		/* longest non-runqueue sleep so far */
	u64 min_flt;
	u64 maj_flt;
	u32 nr;
	u32 sleeps;
	u32 waker_id;
	u32 skipped;		/* ordinary calls since the last sampled one */
	u16 klen;		/* bytes in kstack */
	u8 waker_kind;
	u64 kstack[SYS_KSTACK];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sys_state);
} sys_threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct syscall_key);
	__type(value, struct syscall_totals);
} syscall_totals SEC(".maps");

/* In-band slots; one entry unless --inband (the loader sizes it). */
const volatile bool debox_inband = false;
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, DEBOX_SLOTS);
	__type(key, u32);
	__type(value, struct debox_info);
} debox SEC(".maps");

/* The initial value of a new totals entry (too large for the BPF stack). */
struct syscall_totals zero_totals = {};

/* The off-CPU interval [out, now) of `t`, woken at `wake` (0: not woken),
 * ended: add it to the system call it happened in, if any. */
static __always_inline void syscall_off_cpu(struct task_struct *t, struct thread_state *st,
					    u64 out, u64 wake, u64 now)
{
	struct sys_state *ss;
	u64 waited, runnable;
	u8 class = st->class;

	if (!count_syscalls)
		return;
	ss = bpf_task_storage_get(&sys_threads, t, 0, 0);
	if (!ss || !ss->start || out < ss->start || now <= out)
		return;
	if (class == CLASS_SCHED || !wake) {
		waited = class == CLASS_SCHED ? 0 : now - out;
		runnable = class == CLASS_SCHED ? now - out : 0;
	} else {
		waited = wake - out;
		runnable = now - wake;
	}
	ss->blocked[CLASS_SCHED - 1] += runnable;
	if (class < CLASS_IO || class > CLASS_OTHER || class == CLASS_SCHED)
		return;
	ss->blocked[(class - 1) & 3] += waited;
	ss->sleeps++;
	if (waited <= ss->longest)
		return;
	ss->longest = waited;
	ss->waker_kind = st->waker_kind;
	ss->waker_id = st->waker_id;
	{
		long n = bpf_get_task_stack(t, ss->kstack, sizeof(ss->kstack), 0);

		ss->klen = n > 0 ? n : 0;
	}
}

SEC("tp_btf/sys_enter")
int BPF_PROG(on_syscall_enter, struct pt_regs *regs, long id)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct sys_state *ss = bpf_task_storage_get(&sys_threads, task, 0, 0);

	/* Only tracked threads have the state: the (hash) lookup of whether
	 * a thread is tracked is made once per thread, not per call. */
	if (!ss) {
		if (!is_tracked(task))
			return 0;
		ss = bpf_task_storage_get(&sys_threads, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!ss) {
			count_lost(LOST_NO_STATE, REC_SYSCALL);
			return 0;
		}
	}
	ss->nr = id;
	ss->blocked[0] = 0;
	ss->blocked[1] = 0;
	ss->blocked[2] = 0;
	ss->blocked[3] = 0;
	ss->longest = 0;
	ss->sleeps = 0;
	ss->klen = 0;
	ss->waker_kind = WAKER_NONE;
	ss->waker_id = 0;
	ss->min_flt = task->min_flt;
	ss->maj_flt = task->maj_flt;
	ss->start = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_syscall_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct sys_state *ss = bpf_task_storage_get(&sys_threads, task, 0, 0);
	struct syscall_key key;
	struct syscall_totals *tot;
	struct syscall_rec *r;
	struct scratch *s;
	u64 now, wall, start, minf, majf, slept;
	u32 bucket;
	u8 sampled = 0;

	if (!ss || !ss->start)
		return 0;
	start = ss->start;
	ss->start = 0;
	now = bpf_ktime_get_ns();
	wall = now - start;
	minf = task->min_flt - ss->min_flt;
	majf = task->maj_flt - ss->maj_flt;

	key.pid = task->tgid;
	key.nr = ss->nr;
	tot = bpf_map_lookup_elem(&syscall_totals, &key);
	if (!tot) {
		bpf_map_update_elem(&syscall_totals, &key, &zero_totals, BPF_NOEXIST);
		tot = bpf_map_lookup_elem(&syscall_totals, &key);
		if (!tot) {
			count_lost(LOST_TABLE_FULL, REC_SYSCALL);
			return 0;
		}
	}
	tot->count++;
	tot->total_ns += wall;
	tot->blocked[0] += ss->blocked[0];
	tot->blocked[1] += ss->blocked[1];
	tot->blocked[2] += ss->blocked[2];
	tot->blocked[3] += ss->blocked[3];
	tot->min_flt += minf;
	tot->maj_flt += majf;
	bucket = log2_slot(wall, SYS_HIST);
	if (bucket < SYS_HIST)
		tot->hist[bucket]++;

	if (debox_inband) {
		u32 slot = (u32)task->pid & (DEBOX_SLOTS - 1);
		struct debox_info *d = bpf_map_lookup_elem(&debox, &slot);

		if (d) {
			d->tid = task->pid;
			d->nr = key.nr;
			d->start_ns = start;
			d->wall_ns = wall;
			d->blocked_ns[0] = ss->blocked[0];
			d->blocked_ns[1] = ss->blocked[1];
			d->blocked_ns[2] = ss->blocked[2];
			d->blocked_ns[3] = ss->blocked[3];
			d->sleeps = ss->sleeps;
			d->min_flt = minf;
			d->maj_flt = majf;
			d->seq++;
		}
	}

	slept = ss->blocked[0] + ss->blocked[1] + ss->blocked[3];
	if (wall < syscall_keep_ns && !slept && !majf) {
		if (++ss->skipped < syscall_sample_every)
			return 0;
		ss->skipped = 0;
		sampled = 1;
	}

	/* The stacks first, in a sample-shaped record; the invocation after. */
	s = get_scratch(SCRATCH_TASK);
	if (s) {
		s->rec.hdr.kind = REC_SYSCALL_STACK;
		s->rec.pid = key.pid;
		s->rec.tid = task->pid;
		s->rec.start = start;
		s->rec.end = now;
		s->rec.cpu = bpf_get_smp_processor_id();
		s->rec.kstack_len = ss->klen / 8;
		__builtin_memcpy(s->kstack, ss->kstack, sizeof(ss->kstack));
		capture_user(s, task, USER_LOADED);
		/* A Python program's calls are made from its Python code. */
		capture_python(s, state_of(task, false), task);
		submit_sample(s, s->kstack);
	}
	r = reserve(REC_SYSCALL, sizeof(*r));
	if (!r)
		return 0;
	r->pid = key.pid;
	r->tid = task->pid;
	r->start = start;
	r->end = now;
	r->blocked[0] = ss->blocked[0];
	r->blocked[1] = ss->blocked[1];
	r->blocked[2] = ss->blocked[2];
	r->blocked[3] = ss->blocked[3];
	r->nr = key.nr;
	r->sleeps = ss->sleeps;
	r->min_flt = minf;
	r->maj_flt = majf;
	r->waker_id = ss->waker_id;
	r->waker_kind = ss->waker_kind;
	r->sampled = sampled;
	r->_pad = 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}
