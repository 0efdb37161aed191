// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Core-level virtual speedup (SCOZ §3.5) on a stock kernel: the idle-core
 * half of it.
 *
 * User space owns the global delay and credits the core that ran the
 * target; a handler thread per core spins off what the core owes. What
 * only the scheduler sees is done here:
 *  - pre_idle: a core that goes idle remembers the global delay;
 *  - post_idle: when it leaves idle for a task that a task on another
 *    core woke, the delays inserted meanwhile are skipped (the waker paid
 *    them); woken by an interrupt (a device, a timer), the core pays them,
 *    like a device that did not get faster, unless the device is what the
 *    experiment speeds up (subclass:io, BCOZ): then the woken thread
 *    waited for the target, as if woken by a core that ran it.
 * Our own threads leave an idle core idle: a handler spins only on a core
 * that was running something, and the thread that drains the samples and
 * credits them must not make its core owe the delays it inserts, which
 * the next thread to run there would pay. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "cores.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Our process: its threads are no work of the profiled programs. */
const volatile __u32 self_tgid;

__u64 global_delay;
struct holdup_core cores[MAX_CORES];

/* How a task was last woken: by a task running on another core, or at
 * the end of a wait for I/O. */
struct core_waker {
	__u32 by_core;
	__u32 cpu;
	__u32 io;
	__u32 _pad;
};

/* Set by user space while the experiment speeds up I/O (subclass:io). */
__u32 io_is_target;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct core_waker);
} wakers SEC(".maps");

static __always_inline struct holdup_core *core(__u32 cpu)
{
	if (cpu >= MAX_CORES)
		return NULL;
	return &cores[cpu];
}

SEC("tp_btf/sched_waking")
int BPF_PROG(core_waking, struct task_struct *p)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct holdup_core *c = core(cpu);
	struct core_waker *w;

	if (!c)
		return 0;
	w = bpf_task_storage_get(&wakers, p, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!w)
		return 0;
	/* On an idle core, or in an interrupt, current is not the waker. */
	w->by_core = !c->idle && !c->in_irq;
	w->cpu = cpu;
	w->io = BPF_CORE_READ_BITFIELD_PROBED(p, in_iowait);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(core_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct holdup_core *c = core(cpu);
	struct core_waker *w;
	__u64 g, from;

	if (!c)
		return 0;
	/* No interrupt spans a context switch (an exit missed while
	 * attaching must not last). */
	c->in_irq = 0;
	if (next->pid == 0) {
		if (!c->idle) {
			c->idle_global = global_delay;
			c->idle = 1;
		}
		return 0;
	}
	if (c->idle && next->tgid != self_tgid) {
		c->idle = 0;
		w = bpf_task_storage_get(&wakers, next, NULL, 0);
		/* Woken by a core that paid, or by the device being sped up:
		 * the delays inserted while idle are skipped (not those owed
		 * from before, nor what a credit settled meanwhile). */
		if (w && ((w->by_core && w->cpu != cpu) || (w->io && io_is_target))) {
			w->by_core = 0;
			w->io = 0;
			g = global_delay;
			from = c->paid > c->idle_global ? c->paid : c->idle_global;
			if (g > from) {
				__sync_fetch_and_add(&c->paid, g - from);
				__sync_fetch_and_add(&c->skipped, g - from);
			}
		}
	}
	return 0;
}

static __always_inline void irq_enter(void)
{
	struct holdup_core *c = core(bpf_get_smp_processor_id());

	if (c)
		c->in_irq++;
}

static __always_inline void irq_exit(void)
{
	struct holdup_core *c = core(bpf_get_smp_processor_id());

	if (c && c->in_irq)
		c->in_irq--;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(core_irq_entry) { irq_enter(); return 0; }
SEC("tp_btf/irq_handler_exit")
int BPF_PROG(core_irq_exit) { irq_exit(); return 0; }
SEC("tp_btf/softirq_entry")
int BPF_PROG(core_softirq_entry) { irq_enter(); return 0; }
SEC("tp_btf/softirq_exit")
int BPF_PROG(core_softirq_exit) { irq_exit(); return 0; }
SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(core_timer_entry) { irq_enter(); return 0; }
SEC("tp_btf/hrtimer_expire_exit")
int BPF_PROG(core_timer_exit) { irq_exit(); return 0; }
