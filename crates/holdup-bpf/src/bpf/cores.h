/* Shared with cores.rs: the per-core delay state of core-level virtual
 * speedups. */
#ifndef HOLDUP_CORES_H
#define HOLDUP_CORES_H

#define MAX_CORES 256

/* One cache line per core. `paid` is what the core has settled of the
 * global delay: credited (it ran the target), spun off by its handler, or
 * skipped (idle while another core's delays were inserted, then woken by
 * a core). The core owes global_delay - paid. */
struct holdup_core {
	__u64 paid;
	__u64 idle_global;	/* global_delay when the core went idle */
	__u64 skipped;		/* total skipped by post_idle, for the report */
	__u32 idle;		/* running the idle task, or our own thread woken from idle */
	__u32 in_irq;		/* interrupt nesting: wakeups here are not a core's */
	__u32 _pad[8];
};

#endif
