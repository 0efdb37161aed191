// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * holdup latency: log2 histograms of operation latencies, aggregated in the
 * kernel (OSprof). An operation's start is kept per thread; at its end the
 * elapsed time goes into the bucket floor(log2(ns)) of a per-CPU histogram
 * keyed by process, operation and time interval, so the cost per call is a
 * few map operations whatever the event rate, and user space reads the maps
 * once at the end. Operations: system calls (raw_syscalls enter/exit), kernel
 * functions (fentry/fexit pairs whose targets are set before load), user
 * functions (one uprobe/uretprobe pair attached per symbol, the operation id
 * in the attach cookie) and block requests (issue to completion).
 *
 * For the first level of DARC's root-cause search, each thread also keeps
 * clocks of its off-CPU time by cause (I/O wait, futex wait, preempted,
 * other), advanced at every context switch; a call's start snapshots them,
 * and its end adds the differences to its bucket, so each peak's time
 * splits into on-CPU time and the causes that made the call wait.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "latency.h"
#include "block.h"
#include "log2.h"
#include "tracked.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

const volatile bool follow_children = true;
const volatile u64 start_ns = 0;	/* CLOCK_MONOTONIC at the start */
const volatile u64 interval_ns = 1000000000;

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

/* Off-CPU clocks of a thread by cause, cumulative. */
struct causes {
	u64 ns[LAT_CAUSES];
};

/* The open system call and kernel-function calls of a thread. */
struct thread_starts {
	struct causes off;	/* advanced at each switch-in */
	u64 out_at;		/* switch-out time, while off-CPU */
	u32 out_cause;
	u32 pad;
	u64 sys_start;
	s64 sys_nr;
	struct causes sys_snap;
	u64 kfunc_start[LAT_KFUNC_SLOTS];
	struct causes kfunc_snap[LAT_KFUNC_SLOTS];
};

struct ufunc_start {
	u64 time;
	struct causes snap;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_starts);
} starts SEC(".maps");

/* Open user-function calls: (tid << 32 | op) → start. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct ufunc_start);
} ufunc_starts SEC(".maps");

struct rq_start {
	u64 time;
	u32 tgid;
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct rq_start);
} rq_starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LAT_LOST_KINDS);
	__type(key, u32);
	__type(value, u64);
} lost SEC(".maps");

static __always_inline void count_lost(u32 why)
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
		if (kind != LAT_BLOCK) {
			task = bpf_get_current_task_btf();
			BPF_CORE_READ_STR_INTO(&comm, task, group_leader, comm);
			bpf_map_update_elem(&comms, &tgid, &comm, BPF_ANY);
		}
	}
	slot = log2_slot(delta, LAT_SLOTS);
	h->slots[slot].count++;
	h->slots[slot].ns += delta;
	if (off && snap) {
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

SEC("tp_btf/sys_enter")
int BPF_PROG(lat_sys_enter, struct pt_regs *regs, long id)
{
	struct thread_starts *s = traced_starts();

	if (!s)
		return 0;
	s->sys_nr = id;
	s->sys_snap = s->off;
	s->sys_start = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(lat_sys_exit, struct pt_regs *regs, long ret)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct thread_starts *s = own_starts(false);
	u64 now;

	if (!s || !s->sys_start || s->sys_nr < 0)
		return 0;
	now = bpf_ktime_get_ns();
	add(tgid, LAT_SYSCALL, s->sys_nr, now, now - s->sys_start, &s->off, &s->sys_snap);
	s->sys_start = 0;
	return 0;
}

static __always_inline int kfunc_enter(u32 slot)
{
	struct thread_starts *s = traced_starts();

	if (!s)
		return 0;
	if (slot < LAT_KFUNC_SLOTS) {
		s->kfunc_snap[slot] = s->off;
		s->kfunc_start[slot] = bpf_ktime_get_ns();
	}
	return 0;
}

static __always_inline int kfunc_exit(u32 slot)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct thread_starts *s;
	u64 now, t0;

	if (slot >= LAT_KFUNC_SLOTS)
		return 0;
	s = own_starts(false);
	if (!s)
		return 0;
	t0 = s->kfunc_start[slot];
	if (!t0)
		return 0;
	s->kfunc_start[slot] = 0;
	now = bpf_ktime_get_ns();
	add(tgid, LAT_KFUNC, slot, now, now - t0, &s->off, &s->kfunc_snap[slot]);
	return 0;
}

/* The loader sets each used slot's target function; the others are not
 * loaded. A recursive call overwrites the outer call's start. */
#define KFUNC_SLOT(n)							\
	SEC("fentry")							\
	int BPF_PROG(lat_kfunc_enter##n) { return kfunc_enter(n); }	\
	SEC("fexit")							\
	int BPF_PROG(lat_kfunc_exit##n) { return kfunc_exit(n); }

KFUNC_SLOT(0)
KFUNC_SLOT(1)
KFUNC_SLOT(2)
KFUNC_SLOT(3)
KFUNC_SLOT(4)
KFUNC_SLOT(5)
KFUNC_SLOT(6)
KFUNC_SLOT(7)

SEC("uprobe")
int lat_ufunc_enter(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	struct ufunc_start start = {};
	struct thread_starts *s;
	u64 key;

	if (!tgid_tracked(id >> 32))
		return 0;
	s = own_starts(true);
	if (s)
		start.snap = s->off;
	key = (id << 32) | (u32)bpf_get_attach_cookie(ctx);
	start.time = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&ufunc_starts, &key, &start, BPF_ANY))
		count_lost(LAT_LOST_START_FULL);
	return 0;
}

SEC("uretprobe")
int lat_ufunc_exit(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 op = bpf_get_attach_cookie(ctx);
	u64 key = (id << 32) | op;
	struct ufunc_start *t0;
	struct thread_starts *s;
	u64 now;

	t0 = bpf_map_lookup_elem(&ufunc_starts, &key);
	if (!t0)
		return 0;
	now = bpf_ktime_get_ns();
	s = own_starts(false);
	add(id >> 32, LAT_UFUNC, op, now, now - t0->time, s ? &s->off : NULL, &t0->snap);
	bpf_map_delete_elem(&ufunc_starts, &key);
	return 0;
}


/* A request is charged to the process that issued it (with -a, whatever
 * task that was: often a kernel worker for writeback). */
SEC("tp_btf/block_rq_issue")
int BPF_PROG(lat_rq_issue, struct request *rq)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct rq_start s = {};
	u64 key = (u64)rq;

	if (!tgid_tracked(tgid))
		return 0;
	s.time = bpf_ktime_get_ns();
	s.tgid = tgid;
	if (bpf_map_update_elem(&rq_starts, &key, &s, BPF_ANY))
		count_lost(LAT_LOST_START_FULL);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(lat_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	u64 key = (u64)rq;
	struct rq_start *s = bpf_map_lookup_elem(&rq_starts, &key);
	u64 now;

	if (!s)
		return 0;
	now = bpf_ktime_get_ns();
	add(s->tgid, LAT_BLOCK, rq_dev(rq), now, now - s->time, NULL, NULL);
	bpf_map_delete_elem(&rq_starts, &key);
	return 0;
}

static __always_inline bool in_futex(struct task_struct *t)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
	long nr;

	if (!regs)
		return false;
	nr = BPF_CORE_READ(regs, orig_ax);
	return nr == 202 /* futex */ || nr == 449 /* futex_waitv */;
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
	}
	s = bpf_task_storage_get(&starts, next, 0, 0);
	if (s && s->out_at) {
		if (s->out_cause < LAT_CAUSES)
			s->off.ns[s->out_cause] += now - s->out_at;
		s->out_at = 0;
	}
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(lat_fork, struct task_struct *parent, struct task_struct *child)
{
	u32 child_tgid = BPF_CORE_READ(child, tgid);
	u8 one = 1;

	if (trace_all || !follow_children || !tgid_tracked(BPF_CORE_READ(parent, tgid)))
		return 0;
	bpf_map_update_elem(&tracked_tgids, &child_tgid, &one, BPF_ANY);
	return 0;
}
