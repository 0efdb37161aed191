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
 *
 * Below that level, DARC's descent: the callees of a user function (a
 * root) get uprobes too; while a root call is open in a thread, the time
 * (and off-CPU causes) of each call path below it (an fnode of DARC's
 * ftree, followed with a current-node pointer as DARC does) is summed per
 * thread, and at the root's return the sums go to the root call's bucket,
 * so a peak of the root splits into the call paths that made it.
 *
 * Interrupts are causes too (DARC §3.6): time in hard interrupt handlers
 * and softirqs while a traced thread was on the CPU advances that
 * thread's clock of that interrupt (the local timer, each device
 * interrupt, each softirq vector), so it is not counted as the call's own
 * on-CPU work.
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

struct ufunc_start {
	u64 time;
	u32 depth;		/* recursive calls open inside this one */
	u16 fnode;		/* a callee's call path */
	u16 saved;		/* the caller's call path, restored at return */
	struct causes snap;
};

/* The open root call of a thread: the current call path (DARC's
 * current_fnode) and the time of each call path in this root call. */
struct callee_acc {
	u32 open;
	u32 root;
	u32 cur;
	u32 root_node;
	struct lat_callee_time fnode[LAT_FNODES];
	/* Scratch of the root's return, per node: its timed callees' time,
	 * the largest of them and which, and whether the node was the
	 * largest contributor below its parent (bit 0) and its own time the
	 * largest below itself (bit 1). */
	u64 kids_ns[LAT_FNODES];
	u64 best_ns[LAT_FNODES];
	u8 best[LAT_FNODES];
	u8 won[LAT_FNODES];
};

/* The ftree: (parent node, function) → child node. A callee called on
 * any other path is not timed (DARC's call-path filtering). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LAT_FNODES);
	__type(key, struct lat_fnode_key);
	__type(value, u32);
} fnode_children SEC(".maps");

/* Each root's node, by the root's operation id. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LAT_UFUNCS);
	__type(key, u32);
	__type(value, u32);
} root_fnodes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct callee_acc);
} callee_accs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct lat_callee_key);
	__type(value, struct lat_callee_time);
} callee_times SEC(".maps");

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

/* Kernel stacks where system calls blocked, and their time per bucket. */
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 4096);
	__uint(key_size, sizeof(u32));
	__uint(value_size, 127 * sizeof(u64));
} wait_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct lat_site_key);
	__type(value, struct lat_site_time);
} wait_sites SEC(".maps");

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

SEC("tp_btf/sys_enter")
int BPF_PROG(lat_sys_enter, struct pt_regs *regs, long id)
{
	struct thread_starts *s = traced_starts();

	if (!s)
		return 0;
	s->sys_nr = id;
	s->sys_snap = s->off;
	if (s->nsites) {
		__builtin_memset(s->sites, 0, sizeof(s->sites));
		s->nsites = 0;
	}
	s->sys_start = bpf_ktime_get_ns();
	return 0;
}

/* Move the open system call's wait sites into its bucket. */
static __always_inline void flush_sites(struct thread_starts *s, u32 tgid, u32 slot)
{
	for (int i = 0; i < LAT_SITES; i++) {
		struct lat_site_key key = {
			.tgid = tgid,
			.nr = s->sys_nr,
			.slot = slot,
			.stack = s->sites[i].stack,
			.cause = s->sites[i].cause,
		};
		struct lat_site_time *t, one = { 1, s->sites[i].ns };

		if (!s->sites[i].ns)
			continue;
		t = bpf_map_lookup_elem(&wait_sites, &key);
		if (t) {
			__sync_fetch_and_add(&t->count, 1);
			__sync_fetch_and_add(&t->ns, s->sites[i].ns);
		} else if (bpf_map_update_elem(&wait_sites, &key, &one, BPF_NOEXIST)) {
			count_lost(LAT_LOST_HIST_FULL);
		}
	}
	__builtin_memset(s->sites, 0, sizeof(s->sites));
	s->nsites = 0;
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
	if (s->nsites)
		flush_sites(s, tgid, log2_slot(now - s->sys_start, LAT_SLOTS));
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

/* Open user-function calls; a recursive call only counts its depth, so
 * the outermost call keeps its start. */
SEC("uprobe")
int lat_ufunc_enter(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 cookie = bpf_get_attach_cookie(ctx);
	u32 op = cookie & LAT_UFUNC_ID_MASK;
	struct ufunc_start start = {}, *open;
	struct callee_acc *acc = NULL;
	struct thread_starts *s;
	u32 *child = NULL;
	u64 key;

	if (!tgid_tracked(id >> 32))
		return 0;
	key = (id << 32) | op;
	open = bpf_map_lookup_elem(&ufunc_starts, &key);
	if (open) {
		open->depth++;
		return 0;
	}
	if (cookie & LAT_UFUNC_CALLEE) {
		/* Call-path filtering: only inside a call of a root, on a
		 * path of the ftree. */
		struct lat_fnode_key fk = { .func = op };

		acc = bpf_task_storage_get(&callee_accs, bpf_get_current_task_btf(), 0, 0);
		if (!acc || !acc->open)
			return 0;
		fk.parent = acc->cur;
		child = bpf_map_lookup_elem(&fnode_children, &fk);
		if (!child || *child >= LAT_FNODES)
			return 0;
		start.fnode = *child;
		start.saved = acc->cur;
	}
	s = own_starts(true);
	if (s)
		start.snap = s->off;
	start.time = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&ufunc_starts, &key, &start, BPF_ANY)) {
		count_lost(LAT_LOST_START_FULL);
		return 0;
	}
	if (acc && child) {
		acc->cur = *child;
	} else if (cookie & LAT_UFUNC_ROOT) {
		u32 *root = bpf_map_lookup_elem(&root_fnodes, &op);

		acc = bpf_task_storage_get(&callee_accs, bpf_get_current_task_btf(), 0,
					   BPF_LOCAL_STORAGE_GET_F_CREATE);
		/* Without it, the call's callees go untimed. */
		if (!acc)
			count_lost(LAT_LOST_START_FULL);
		if (root && acc && !acc->open) {
			acc->open = 1;
			acc->root = op;
			acc->cur = *root;
			acc->root_node = *root;
		}
	}
	return 0;
}

/* DARC's per-call decision: which path below each node contributed most
 * to this root call (the largest of its timed callees, if larger than the
 * node's own time), marked in acc->won. The root's node took the whole
 * call. bpf_loop keeps the verifier from walking all nodes' branches. */
static long sum_kids(u32 i, void *ctx)
{
	struct callee_acc *acc = *(struct callee_acc **)ctx;
	u32 p;
	u64 ns;

	if (i >= LAT_FNODES)
		return 1;
	p = fnode_parent[i];
	ns = acc->fnode[i].ns;
	if (!acc->fnode[i].calls || p >= LAT_FNODES)
		return 0;
	barrier_var(p);
	p &= LAT_FNODES - 1;
	acc->kids_ns[p] += ns;
	if (ns > acc->best_ns[p]) {
		acc->best_ns[p] = ns;
		acc->best[p] = i;
	}
	return 0;
}

static long mark_won(u32 i, void *ctx)
{
	struct callee_acc *acc = *(struct callee_acc **)ctx;
	u64 ns, own;
	u8 won = 0;
	u32 p;

	if (i >= LAT_FNODES)
		return 1;
	if (!acc->fnode[i].calls)
		return 0;
	ns = acc->fnode[i].ns;
	p = fnode_parent[i];
	if (p < LAT_FNODES) {
		barrier_var(p);	/* keep the mask: the verifier lost the bound */
		p &= LAT_FNODES - 1;
		own = acc->fnode[p].ns > acc->kids_ns[p] ? acc->fnode[p].ns - acc->kids_ns[p] : 0;
		if (acc->best[p] == i && ns > own)
			won |= 1;
	}
	own = ns > acc->kids_ns[i] ? ns - acc->kids_ns[i] : 0;
	if (own >= acc->best_ns[i])
		won |= 2;
	acc->won[i] = won;
	return 0;
}

static __always_inline void mark_largest(struct callee_acc *acc, u64 delta)
{
	u32 r = acc->root_node & (LAT_FNODES - 1);

	acc->fnode[r].calls = 1;
	acc->fnode[r].ns = delta;
	bpf_loop(LAT_FNODES, sum_kids, &acc, 0);
	bpf_loop(LAT_FNODES, mark_won, &acc, 0);
}

/* Move the callee times a root call collected into its bucket. */
static __always_inline void flush_callees(struct callee_acc *acc, u32 tgid, u32 slot, u64 delta)
{
	mark_largest(acc, delta);
#pragma clang loop unroll(disable)
	for (u32 i = 0; i < LAT_FNODES; i++) {
		struct lat_callee_time *c = &acc->fnode[i], *t;
		struct lat_callee_key key = {
			.tgid = tgid,
			.root = acc->root,
			.fnode = i,
			.slot = slot,
		};
		u8 won = acc->won[i];

		if (!c->calls)
			continue;
		acc->kids_ns[i] = 0;
		acc->best_ns[i] = 0;
		acc->best[i] = 0;
		acc->won[i] = 0;
		t = bpf_map_lookup_elem(&callee_times, &key);
		if (!t) {
			struct lat_callee_time zero = {};

			bpf_map_update_elem(&callee_times, &key, &zero, BPF_NOEXIST);
			t = bpf_map_lookup_elem(&callee_times, &key);
		}
		if (t) {
			__sync_fetch_and_add(&t->calls, c->calls);
			__sync_fetch_and_add(&t->ns, c->ns);
			for (int k = 0; k < LAT_CAUSES; k++)
				if (c->cause_ns[k])
					__sync_fetch_and_add(&t->cause_ns[k], c->cause_ns[k]);
			if (won & 1)
				__sync_fetch_and_add(&t->largest, 1);
			if (won & 2)
				__sync_fetch_and_add(&t->own_largest, 1);
		} else {
			count_lost(LAT_LOST_HIST_FULL);
		}
		__builtin_memset(c, 0, sizeof(*c));
	}
	acc->open = 0;
}

SEC("uretprobe")
int lat_ufunc_exit(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	u32 cookie = bpf_get_attach_cookie(ctx);
	u32 op = cookie & LAT_UFUNC_ID_MASK;
	u64 key = (id << 32) | op;
	struct ufunc_start *t0;
	struct thread_starts *s;
	struct callee_acc *acc;
	u64 now, delta;

	t0 = bpf_map_lookup_elem(&ufunc_starts, &key);
	if (!t0)
		return 0;
	if (t0->depth) {
		t0->depth--;
		return 0;
	}
	now = bpf_ktime_get_ns();
	delta = now - t0->time;
	s = own_starts(false);
	if (cookie & (LAT_UFUNC_ROOT | LAT_UFUNC_CALLEE))
		acc = bpf_task_storage_get(&callee_accs, bpf_get_current_task_btf(), 0, 0);
	else
		acc = NULL;
	if (cookie & LAT_UFUNC_CALLEE) {
		if (acc && acc->open && t0->fnode < LAT_FNODES) {
			struct lat_callee_time *c = &acc->fnode[t0->fnode];

			acc->cur = t0->saved;
			c->calls++;
			c->ns += delta;
			if (s && s->off.any != t0->snap.any)
				for (int k = 0; k < LAT_CAUSES; k++)
					c->cause_ns[k] += s->off.ns[k] - t0->snap.ns[k];
		}
	} else {
		add(tgid, LAT_UFUNC, op, now, delta, s ? &s->off : NULL, &t0->snap);
		if (acc && acc->open && acc->root == op)
			flush_callees(acc, tgid, log2_slot(delta, LAT_SLOTS), delta);
	}
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

/* Add a wait of the open system call to its wait site. */
static __always_inline void add_site(struct thread_starts *s, u64 ns)
{
	for (int i = 0; i < LAT_SITES; i++) {
		struct site *w = &s->sites[i];

		if (w->ns && (w->stack != s->out_stack || w->cause != s->out_cause))
			continue;
		if (!w->ns) {
			w->stack = s->out_stack;
			w->cause = s->out_cause;
			s->nsites++;
		}
		w->ns += ns;
		return;
	}
	count_lost(LAT_LOST_SITES_FULL);
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

/* Interrupts that run while a thread is on a CPU take time from its
 * call: the current task in an interrupt is the interrupted thread. A
 * hard interrupt during a softirq counts for the interrupt only. */
struct irq_clock {
	u64 irq_at;		/* outermost hard interrupt's entry */
	u64 irq_total;		/* hard-interrupt time so far on this CPU */
	u64 softirq_at;
	u64 softirq_irq_snap;	/* irq_total at softirq entry */
	u32 irq_depth;
	u32 irq_cause;		/* of the outermost hard interrupt */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct irq_clock);
} irq_clocks SEC(".maps");

/* Device interrupt → its cause slot, given on first sight. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, u32);
	__type(value, u32);
} irq_slots SEC(".maps");

/* Cause slot - LAT_CAUSE_IRQ_DEV → the interrupt that has it; a slot is
 * taken by inserting it, so two CPUs cannot take the same one. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LAT_IRQ_DEV_SLOTS);
	__type(key, u32);
	__type(value, struct lat_irq_name);
} irq_names SEC(".maps");

static __always_inline struct irq_clock *irq_clock(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&irq_clocks, &zero);
}

static __always_inline void charge_current(u32 cause, u64 ns)
{
	struct thread_starts *s;

	u64 i = cause;

	s = bpf_task_storage_get(&starts, bpf_get_current_task_btf(), 0, 0);
	/* A 64-bit check on the index itself, next to its use: the
	 * compiler would otherwise fold it into a caller's check or make it
	 * on 32 bits, which the verifier does not carry over. */
	asm volatile("" : "+r"(i));
	if (s && i < LAT_CAUSES) {
		s->off.ns[i] += ns;
		s->off.any += ns;
	}
}

/* The cause slot of device interrupt `irq`, given on first sight. Two
 * CPUs seeing a new interrupt at once may both take a slot; the first
 * insert into irq_slots wins and the other slot is never charged. */
static __always_inline u32 irq_cause(int irq, struct irqaction *action)
{
	struct lat_irq_name n = { .irq = irq };
	u32 key = irq, cause = LAT_CAUSE_IRQ_OTHER, *found;

	found = bpf_map_lookup_elem(&irq_slots, &key);
	if (found)
		return *found;
	BPF_CORE_READ_STR_INTO(&n.name, action, name);
#pragma unroll
	for (int i = 0; i < LAT_IRQ_DEV_SLOTS; i++) {
		u32 slot = i;

		if (bpf_map_update_elem(&irq_names, &slot, &n, BPF_NOEXIST) == 0) {
			cause = LAT_CAUSE_IRQ_DEV + i;
			break;
		}
	}
	bpf_map_update_elem(&irq_slots, &key, &cause, BPF_NOEXIST);
	found = bpf_map_lookup_elem(&irq_slots, &key);
	return found ? *found : LAT_CAUSE_IRQ_OTHER;
}

static __always_inline int irq_enter(u32 cause)
{
	struct irq_clock *c = irq_clock();

	if (c && c->irq_depth++ == 0) {
		c->irq_at = bpf_ktime_get_ns();
		c->irq_cause = cause;
	}
	return 0;
}

static __always_inline int irq_exit(void)
{
	struct irq_clock *c = irq_clock();
	u64 d;

	if (!c || c->irq_depth == 0)
		return 0;
	if (--c->irq_depth == 0 && c->irq_at) {
		d = bpf_ktime_get_ns() - c->irq_at;
		c->irq_total += d;
		c->irq_at = 0;
		charge_current(c->irq_cause, d);
	}
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(lat_irq_entry, int irq, struct irqaction *action)
{
	return irq_enter(irq_cause(irq, action));
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(lat_irq_exit, int irq, struct irqaction *action, int ret)
{
	return irq_exit();
}

SEC("tp_btf/local_timer_entry")
int BPF_PROG(lat_timer_entry, int vector)
{
	return irq_enter(LAT_CAUSE_IRQ_TIMER);
}

SEC("tp_btf/local_timer_exit")
int BPF_PROG(lat_timer_exit, int vector)
{
	return irq_exit();
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(lat_softirq_entry, unsigned int vec)
{
	struct irq_clock *c = irq_clock();

	if (c) {
		c->softirq_at = bpf_ktime_get_ns();
		c->softirq_irq_snap = c->irq_total;
	}
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(lat_softirq_exit, unsigned int vec)
{
	struct irq_clock *c = irq_clock();
	u64 d, irq;

	if (!c || !c->softirq_at)
		return 0;
	d = bpf_ktime_get_ns() - c->softirq_at;
	irq = c->irq_total - c->softirq_irq_snap;
	c->softirq_at = 0;
	/* In ksoftirqd the current task is no traced thread: nothing is
	 * charged, its softirqs are not another thread's. */
	if (d > irq && vec < LAT_SOFTIRQ_VECS)
		charge_current(LAT_CAUSE_SOFTIRQ + vec, d - irq);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(lat_fork, struct task_struct *parent, struct task_struct *child)
{
	if (trace_all || !follow_children || !tgid_tracked(BPF_CORE_READ(parent, tgid)))
		return 0;
	track_tgid(BPF_CORE_READ(child, tgid));
	return 0;
}
