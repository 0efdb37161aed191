/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * The layout shared by latency.bpf.c and its loader (holdup-bpf/src/latency.rs):
 * one log2 histogram of latencies per process, operation and interval.
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
};

enum latency_kind {
	LAT_SYSCALL = 1,	/* id: system call number */
	LAT_KFUNC = 2,		/* id: fentry slot */
	LAT_UFUNC = 3,		/* id: the uprobe's cookie */
	LAT_BLOCK = 4,		/* id: device, major << 20 | minor */
};

/* Where a call's off-CPU time went (DARC's causes below a peak); the
 * rest of the call's time was on a CPU. */
enum latency_cause {
	LAT_CAUSE_IO = 0,	/* blocked with in_iowait set */
	LAT_CAUSE_LOCK = 1,	/* blocked in futex() */
	LAT_CAUSE_RUNQ = 2,	/* preempted: runnable, not running */
	LAT_CAUSE_OTHER = 3,	/* blocked otherwise (sleep, poll, pipe…) */
	LAT_CAUSES = 4,
};

/* Why an event was not counted. */
enum latency_lost {
	LAT_LOST_HIST_FULL = 0,
	LAT_LOST_START_FULL = 1,
	LAT_LOST_KINDS = 2,
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

#endif
