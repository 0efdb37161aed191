/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * The layout shared by latency.bpf.c and its loader (holdup-bpf/src/latency.rs,
 * through the Rust that build.rs generates from it): one log2 histogram of
 * latencies per process, operation and interval.
 */
#ifndef HOLDUP_LATENCY_H
#define HOLDUP_LATENCY_H

#ifndef __KERNEL__
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
#endif

enum latency_consts {
	LAT_SLOTS = 40,		/* bucket s holds [2^s, 2^(s+1)) ns; the last is open */
	LAT_KFUNC_SLOTS = 8,	/* fentry/fexit program pairs */
	LAT_UFUNCS = 64,	/* user functions (operations and callees) */
	LAT_FNODES = 128,	/* call-path nodes below the roots (DARC's ftree) */
	LAT_SITES = 4,		/* kernel wait sites kept per system call */
};

/* A user function's uprobe cookie: its index, and its role in DARC's
 * descent. A root's calls collect the time of the callees called inside
 * them (call-path filtering: callees count only while a root is open in
 * the thread); a callee has no histogram of its own. */
enum latency_ufunc_role {
	LAT_UFUNC_ID_MASK = 0xffff,
	LAT_UFUNC_ROOT = 1 << 16,
	LAT_UFUNC_CALLEE = 1 << 17,
};

enum latency_kind {
	LAT_SYSCALL = 1,	/* id: system call number */
	LAT_KFUNC = 2,		/* id: fentry slot */
	LAT_UFUNC = 3,		/* id: the uprobe's cookie */
	LAT_BLOCK = 4,		/* id: device, major << 20 | minor */
	LAT_LOCK = 5,		/* a futex wait, switch-out to switch-in; id 0 */
};

/* Where a call's time went besides its own work on a CPU (DARC's causes
 * below a peak): off-CPU causes, and time interrupts took from it, per
 * interrupt (DARC §3.6); the rest of the call's time was its own, on a
 * CPU. Device interrupts get a slot each, in the order they are first
 * seen, named by the loader from the irq_names map; later ones share
 * LAT_CAUSE_IRQ_OTHER. */
enum latency_cause {
	LAT_CAUSE_IO = 0,	/* blocked with in_iowait set */
	LAT_CAUSE_LOCK = 1,	/* blocked in futex() */
	LAT_CAUSE_RUNQ = 2,	/* preempted: runnable, not running */
	LAT_CAUSE_OTHER = 3,	/* blocked otherwise (sleep, poll, pipe…) */
	LAT_CAUSE_IRQ_TIMER = 4,	/* the local timer interrupt */
	LAT_CAUSE_IRQ_DEV = 5,	/* first device interrupt slot */
	LAT_IRQ_DEV_SLOTS = 4,
	LAT_CAUSE_IRQ_OTHER = 9,	/* device interrupts beyond the slots */
	LAT_CAUSE_SOFTIRQ = 10,	/* + vector: softirqs run on the thread's time */
	LAT_SOFTIRQ_VECS = 10,
	LAT_CAUSES = 20,
};

/* The name of a device interrupt slot (the irqaction's). */
struct lat_irq_name {
	u32 irq;
	u8 name[28];
};

/* Why an event was not counted (per-CPU counters, by kind). */
enum latency_lost {
	LAT_LOST_HIST_FULL = 0,		/* a call: its histogram (or time) table was full */
	LAT_LOST_START_FULL = 1,	/* a call: no room for its start or its thread's state */
	LAT_LOST_NO_STACK = 2,		/* a wait of a system call: its kernel stack was not taken */
	LAT_LOST_SITES_FULL = 3,	/* a wait of a system call: more sites than LAT_SITES */
	LAT_LOST_KINDS = 4,
};

struct lat_key {
	u32 tgid;
	u16 kind;
	u16 pad;
	u32 id;
	u32 interval;		/* (time - start) / interval_ns */
};

/* One bucket; its fields together, so a call touches one cache line. */
struct lat_slot {
	u64 count;
	u64 ns;			/* time spent in the bucket's calls */
	u64 cause_ns[LAT_CAUSES];	/* of which off-CPU, by cause */
};

struct lat_hist {
	struct lat_slot slots[LAT_SLOTS];
};

/* The first user-function call at least slow_ns long (a flight recorder's
 * trigger); ns is written last, and stays 0 until there is one. */
struct lat_slow {
	u32 tgid;
	u32 tid;
	u32 id;			/* the operation */
	u32 pad;
	u64 end;		/* CLOCK_MONOTONIC at its return */
	u64 ns;
};

/* A call path below a root is a node of DARC's ftree: the child of
 * node `parent` that calls user function `func` (roots are nodes without
 * a parent, set by the loader per root). */
struct lat_fnode_key {
	u32 parent;
	u32 func;
};

/* The time a call path took inside the calls of a root that landed in one
 * bucket of the root's histogram: the next levels of a peak's path. */
struct lat_callee_key {
	u32 tgid;
	u16 root;
	u16 fnode;
	u32 slot;		/* the root call's bucket */
};

/* The off-CPU time of system calls, in one bucket of their histogram,
 * spent blocked at one kernel stack (a wait site). */
struct lat_site_key {
	u32 tgid;
	u32 nr;			/* system call */
	u32 slot;
	s32 stack;		/* kernel stack id at the switch-out */
	u32 cause;
};

struct lat_site_time {
	u64 count;
	u64 ns;
};

struct lat_callee_time {
	u64 calls;
	u64 ns;
	u64 cause_ns[LAT_CAUSES];	/* of which off-CPU, by cause */
	/* DARC's maxcount: root calls in which this path took longer than
	 * each of its siblings and than its caller's own time (the largest
	 * contributor below its caller); and those in which its own time
	 * took longer than each of its timed callees. */
	u64 largest;
	u64 own_largest;
};

/* A node's parent in the ftree, for fnode_parent; a root's node has none. */
#define LAT_NO_PARENT 0xff

#endif
