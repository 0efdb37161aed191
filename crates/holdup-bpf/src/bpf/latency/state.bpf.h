/*
 * What every operation shares: the options, the histograms (per-CPU, so a
 * call's end adds to its bucket without atomics; user space sums the CPUs
 * when it reads them), the per-thread state in task storage (made for a
 * traced thread when it first starts an operation: looking it up first
 * spares the tracked test on the hot path), add(), which puts one call into
 * its bucket with the off-CPU time it spent by cause, and the following of
 * forked processes.
 */

const volatile bool follow_children = true;
const volatile u64 start_ns = 0;	/* CLOCK_MONOTONIC at the start */
const volatile u64 interval_ns = 1000000000;
const volatile bool lock_waits = false;	/* the lock operation */
/* Each call-path node's parent node (LAT_NO_PARENT for a root's). */
const volatile u8 fnode_parent[LAT_FNODES] = {};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct lat_key);
	__type(value, struct lat_hist);
} hists SEC(".maps");

/* An all-zero histogram to insert from (too large for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct lat_hist);
} zero_hist SEC(".maps");

/* The comm of each process seen, for the report. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, char[16]);
} comms SEC(".maps");

/* Off-CPU clocks of a thread by cause, cumulative; `any` is their sum, so
 * a call's end can tell at one compare that nothing took time from it
 * (most calls), without walking every cause. */
struct causes {
	u64 ns[LAT_CAUSES];
	u64 any;
};

/* The open system call and kernel-function calls of a thread. */
struct site {
	s32 stack;
	u32 cause;
	u64 ns;
};

struct thread_starts {
	struct causes off;	/* advanced at each switch-in */
	u64 out_at;		/* switch-out time, while off-CPU */
	u32 out_cause;
	s32 out_stack;		/* kernel stack at the switch-out, in a system call */
	struct site sites[LAT_SITES];	/* the open system call's wait sites */
	u32 nsites;
	u32 pad2;
	u64 sys_start;
	s64 sys_nr;
	struct causes sys_snap;
	u64 kfunc_start[LAT_KFUNC_SLOTS];
	struct causes kfunc_snap[LAT_KFUNC_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_starts);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LAT_LOST_KINDS);
	__type(key, u32);
	__type(value, u64);
} lost SEC(".maps");

static __always_inline void count_lost(enum latency_lost why)
{
	u64 *n = bpf_map_lookup_elem(&lost, &why);

	if (n)
		(*n)++;
}

static __always_inline void add(u32 tgid, u16 kind, u32 id, u64 now, u64 delta,
				struct causes *off, struct causes *snap)
{
	struct lat_key key = {
		.tgid = tgid,
		.kind = kind,
		.id = id,
		.interval = now > start_ns ? (now - start_ns) / interval_ns : 0,
	};
	struct lat_hist *h = bpf_map_lookup_elem(&hists, &key);
	u32 slot;

	if (!h) {
		u32 zero = 0;
		struct lat_hist *z = bpf_map_lookup_elem(&zero_hist, &zero);
		struct task_struct *task;
		char comm[16];

		if (!z)
			return;
		bpf_map_update_elem(&hists, &key, z, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&hists, &key);
		if (!h) {
			count_lost(LAT_LOST_HIST_FULL);
			return;
		}
		/* The process's name, not the thread's; block completions run
		 * in interrupt context, where the current task is unrelated. */
		if (kind != LAT_BLOCK && kind != LAT_LOCK) {
			task = bpf_get_current_task_btf();
			BPF_CORE_READ_STR_INTO(&comm, task, group_leader, comm);
			bpf_map_update_elem(&comms, &tgid, &comm, BPF_ANY);
		}
	}
	slot = log2_slot(delta, LAT_SLOTS);
	h->slots[slot].count++;
	h->slots[slot].ns += delta;
	if (off && snap && off->any != snap->any) {
		for (int c = 0; c < LAT_CAUSES; c++)
			if (off->ns[c] != snap->ns[c])
				h->slots[slot].cause_ns[c] += off->ns[c] - snap->ns[c];
	}
}

static __always_inline struct thread_starts *own_starts(bool create)
{
	return bpf_task_storage_get(&starts, bpf_get_current_task_btf(), 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

/* The storage of a traced thread: it exists only for threads that were
 * traced when they started an operation, so looking it up first spares
 * the pid filter's hash lookup on the hot path. */
static __always_inline struct thread_starts *traced_starts(void)
{
	struct thread_starts *s = own_starts(false);

	if (s || !tgid_tracked(bpf_get_current_pid_tgid() >> 32))
		return s;
	s = own_starts(true);
	if (!s)
		count_lost(LAT_LOST_START_FULL);
	return s;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(lat_fork, struct task_struct *parent, struct task_struct *child)
{
	if (trace_all || !follow_children || !tgid_tracked(BPF_CORE_READ(parent, tgid)))
		return 0;
	track_tgid(BPF_CORE_READ(child, tgid));
	return 0;
}
