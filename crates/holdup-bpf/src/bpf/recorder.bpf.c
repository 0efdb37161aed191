// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * holdup's recorder: on-CPU samples and blocked samples on one scale.
 *
 * Every thread has two clocks, like perf's task-clock: one runs while it is
 * on a CPU, one while it is off. Each `period_ns` of either is a sampling
 * point, so a thread's on-CPU and blocked samples add up to its lifetime
 * exactly, whatever the timing of the workload. Blocked samples follow
 * bperf: the scheduler hooks only take timestamps (switch-out, wakeup,
 * switch-in); when a thread is switched back in and its off-CPU clock passed
 * one or more points, one blocked sample is made whose weight is that number.
 * The interval is split at the wakeup: the part before keeps the blocking
 * subclass, the part after is runqueue time. On-CPU points are turned into
 * samples at the next tick of a cpu-clock perf event that finds the thread
 * running (the tick is where its stack can be taken), weighted by the
 * points its on-CPU clock passed since its last sample.
 *
 * Under a hypervisor a running thread's virtual CPU may itself not run
 * (steal time). The thread's own CPU time excludes it, and so must its
 * on-CPU samples: the steal time the scheduler counted on the thread's CPU
 * while it ran (read at its switch-out and at its samples) moves from the
 * on-CPU clock to a steal clock, whose points ride on the next on-CPU
 * sample as runqueue points (the thread was waiting for a real CPU).
 *
 * Stacks are the expensive part, so they are taken only for intervals that
 * produce a sample. The kernel stack is read at switch-in from the sleeping
 * task; the user stack can only be read from the thread itself, so the sample
 * is parked in the thread's storage and emitted when the thread returns from
 * schedule() (or, failing that, at its next sample or switch-out). User stacks
 * are a frame-pointer walk plus a copy of the top of the stack, which user
 * space unwinds with CFI because Debian's libc has no frame pointers.
 *
 * Every off-CPU interval is also written as a compact segment (no stack) for
 * the wait-for graph, together with block requests and task lifecycle.
 * Records are submitted without wake-ups; user space drains on a timer.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "intf.h"
#include "block.h"
#include "log2.h"
#include "tracked.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define TASK_RUNNING 0
#define TASK_DEAD 0x80
#define PF_KTHREAD 0x00200000
#define LCB_F_SPIN (1U << 0)
#define REQ_OP_MASK 0xff

/* Options, set by the loader between open and load (and those of tracked.h). */
const volatile u64 period_ns = 1000000;
const volatile bool follow_children = true;
const volatile bool emit_segments = true;
const volatile bool emit_bio = true;
const volatile u32 stack_copy_bytes = 2048;
/* The tool's own real-time threads preempt recorded threads to delay them
 * (causal profiling's core-level virtual speedups): that runqueue time is
 * the delay itself, not the program's, and gets no sample points. */
const volatile bool own_preemption_is_delay = false;

/* Intervals that began before the recording are cut at its start. */
u64 start_ns = 0;

/* Samples emitted late (the thread ran on before its user stack was read)
 * for threads that have not registered rseq, so that rseq_update does not
 * fire for them: user space then attaches the (system-wide, hence
 * costlier: it runs on every system call of every task) sys_exit fallback.
 * A process just exec'd has no rseq until its libc registers it, and may
 * block before that (loading its libraries): only threads that have run
 * longer than startup takes count. */
u64 late_without_rseq = 0;
#define RSEQ_STARTUP_NS 10000000ULL

/* Kernel stacks are reused when the return addresses of their first
 * KSTACK_KEY frames are where they were (see read_kstack). */
#define KSTACK_KEY 4
#define KSTACK_SCAN_WORDS 256
/* A thread's first check of a reused stack comes at its KSTACK_CHECK-th
 * reuse; each check that agrees doubles the distance to the next, up to
 * KSTACK_CHECK << KSTACK_CHECK_MAX_SHIFT. */
#define KSTACK_CHECK 8
#define KSTACK_CHECK_MAX_SHIFT 4
/* Stacks walked lately on a CPU, shared by all threads: KSTACK_SHARED
 * system calls (by number, modulo) with two stacks each. */
#define KSTACK_SHARED 64

/* A kernel stack, and what it was walked at, to reuse it (see read_kstack). */
struct kstack {
	u64 ips[MAX_KSTACK];
	u64 hash;		/* of ips and len */
	u16 len;		/* bytes in ips */
	u16 off[KSTACK_KEY];	/* where its first frames lie above thread.sp */
	u32 nr;			/* system call the thread blocked in, or -1 */
	u8 keys;		/* frames that make the key: KSTACK_KEY, or all */
	u8 placed;		/* frames whose place is known */
};

struct thread_state {
	u64 out;		/* switch-out time, 0 while running */
	u64 wake;		/* wakeup time, 0 until woken */
	u32 waker_id;
	u8 waker_kind;
	u8 class;		/* subclass decided at switch-out */
	u8 klock;		/* waiting for a sleeping kernel lock */
	u8 seen;
	/* A wakeup traced while the thread was still on its CPU: the waker
	 * can find it off its runqueue before this CPU traces the switch-out,
	 * so the switch-out that follows at once takes it as its wakeup. */
	u64 early_wake;
	u32 early_waker_id;
	u8 early_waker_kind;
	/* The two clocks: time not yet turned into sampling points. */
	u64 run_mark;		/* on-CPU time counted up to here; 0 while off */
	u64 cpu_credit;
	u64 steal_credit;
	/* The steal time of the thread's CPU at its last look while it ran,
	 * and that CPU + 1 (0: none yet). */
	u64 steal_mark;
	u32 steal_cpu;
	u64 off_credit;
	/* A blocked sample waiting for the thread to run so that its user
	 * stack can be read. Claimed atomically: the on-CPU sample (an
	 * interrupt) may try to emit it while task context is doing so. */
	u64 pending;
	u8 p_class;
	u8 p_segment;		/* the sample stands for the interval's wait segment */
	u8 p_waker_kind;
	u16 p_cpu;
	u32 p_waker_id;
	u32 p_weight;
	u32 p_sched_weight;
	u64 p_start;
	u64 p_wake;
	u64 p_end;
	/* The last two kernel stacks walked; p_slot is the parked sample's. */
	struct kstack ks[2];
	u8 p_slot;
	u8 k_last;		/* the slot walked or reused last */
	u8 k_noreuse;		/* a check found a reused stack wrong */
	u8 k_reuses;		/* reuses since the last check */
	u8 k_check_shift;	/* the next check is at KSTACK_CHECK << this */
};

/* What the CPU is doing besides running current: names the waker when a
 * wakeup happens in interrupt context. */
struct irq_context {
	s32 hardirq;		/* irq number + 1 */
	s32 softirq;		/* vector + 1 */
	u32 timer;		/* inside an hrtimer expiry or the local timer */
	u32 ipi;		/* inside a function-call IPI */
	/* The thread a running softirq works for: the task that raised it in
	 * process context and runs it itself (local_bh_enable after a loopback
	 * send), 0 when it was raised in interrupt context. */
	u32 softirq_owner;
	/* Per vector, who raised it since it last ran: 0 nobody, a tid, or
	 * RAISED_IN_IRQ once any raise came from interrupt context. */
	u32 raised_by[16];
};

#define NR_SOFTIRQ_VECTORS_MASK 15
#define RAISED_IN_IRQ ((u32)-1)

struct scratch {
	struct sample_rec rec;
	u64 kstack[MAX_KSTACK];
	u64 fp[MAX_FP * 2];
	u32 cut;		/* copy bytes up to the last frame record in it */
	u64 task;		/* the task whose stack this is, as a number (stack_cut) */
	/* Twice the largest copy: its length is bounded with a mask, which
	 * the verifier follows without a branch (see submit_sample). */
	u8 copy[STACK_COPY_MAX * 2];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_state);
} threads SEC(".maps");

/* One scratch sample per CPU and context: the on-CPU sample runs in a timer
 * interrupt, which can arrive while a program in task context (rseq_update,
 * sys_exit) is half-way through building a sample in its scratch; the
 * end-of-recording iterator is sleepable, so it can be preempted by a task
 * whose switch builds one. */
enum scratch_slot {
	SCRATCH_TASK,
	SCRATCH_IRQ,
	SCRATCH_ITER,
	SCRATCH_SLOTS,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SCRATCH_SLOTS);
	__type(key, u32);
	__type(value, struct scratch);
} scratch_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct irq_context);
} irq_ctx SEC(".maps");

/* The thread whose blocked sample was parked at the CPU's last switch-in
 * (0: none): the hooks on the way back to user space, which run at every
 * return of every thread, look here before looking up the thread's state.
 * A thread that leaves the CPU first has its sample emitted at the
 * switch-out. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} parked_tid SEC(".maps");

/* The last two kernel stacks walked on this CPU in one system call (and
 * those whose number is the same modulo KSTACK_SHARED), from any thread:
 * a thread's first block at a site is mostly where other threads blocked
 * before (a pool's workers, the processes of a server). Per CPU, so that no
 * other CPU writes one while it is read; each CPU learns the sites once. */
struct kstack_shared {
	struct kstack ks[2];
	u8 last;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KSTACK_SHARED);
	__type(key, u32);
	__type(value, struct kstack_shared);
} kstack_shared SEC(".maps");

/* How the kernel stacks of blocked samples were taken (intf.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct kstack_counts);
} kstack_counts SEC(".maps");

/* Records not written, per cause and record kind (see enum lost_cause). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOST_CAUSES * REC_KIND_SLOTS);
	__type(key, u32);
	__type(value, u64);
} lost SEC(".maps");

static __always_inline struct irq_context *this_irq_ctx(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&irq_ctx, &zero);
}

static __always_inline u32 *this_parked_tid(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&parked_tid, &zero);
}

static __always_inline void count_lost(enum lost_cause cause, u32 kind)
{
	u32 key = cause * REC_KIND_SLOTS + kind;
	u64 *n = bpf_map_lookup_elem(&lost, &key);

	if (n)
		(*n)++;
}

static __always_inline bool is_tracked(struct task_struct *t)
{
	return tgid_tracked(t->tgid);
}

/* Advance a clock by `len` ns: the sampling points it passes. */
static __always_inline u32 take_points(u64 *credit, u64 len)
{
	u64 w;

	*credit += len;
	w = *credit / period_ns;
	*credit -= w * period_ns;
	return w;
}

/* Advance the off-CPU clock over [out, end), split at the wakeup into
 * blocked and runqueue points. */
static __always_inline void split_points(u64 *credit, u64 out, u64 wake, u64 end, u8 class,
					 u32 *w, u32 *ws)
{
	if (end <= out) {
		*w = 0;
		*ws = 0;
	} else if (class == CLASS_SCHED) {
		*w = 0;
		*ws = take_points(credit, end - out);
	} else if (!wake) {
		*w = take_points(credit, end - out);
		*ws = 0;
	} else {
		*w = take_points(credit, wake - out);
		*ws = take_points(credit, end - wake);
	}
}

/* The thread is running, yet its last switch-out was never followed by a
 * switch-in. The kernel does report preemptions that do not happen (a
 * sched_switch to a task that never runs, then the old task goes on), so
 * the switch-out did not take: the thread ran all along since it. */
static __always_inline void resume_if_switch_in_missed(struct thread_state *st)
{
	if (st->run_mark || !st->out)
		return;
	st->run_mark = st->out;
	st->out = 0;
}

/* Add the time the thread has run since its last look (or since the
 * recording began) to its on-CPU clock. */
static __always_inline void count_run_time(struct thread_state *st, u64 now)
{
	u64 mark = st->run_mark;

	if (!mark)
		return;
	if (mark < start_ns)
		mark = start_ns;
	if (now > mark)
		st->cpu_credit += now - mark;
}

/* The steal time of the runqueue `t` runs on so far: what the scheduler left
 * out of the runtime of the tasks that ran there because the hypervisor did
 * not run the virtual CPU (paravirt steal accounting). One counter per CPU,
 * kept current by the scheduler's clock updates (at every switch, tick and
 * wakeup there), where a tracepoint on each runtime update cost a program
 * run every time. The runqueue is reached through the task's CFS runqueue,
 * which exists with group scheduling (on in distribution kernels); without
 * it, or without steal accounting, no steal is seen. Programs read it once,
 * at their start, for the task on the CPU: the verifier checks each load
 * through these large structures slowly, and one at the start is checked
 * once rather than on every path (on_switch loaded in twice the time). */
static __always_inline u64 rq_steal(struct task_struct *t)
{
	if (!bpf_core_field_exists(struct rq, prev_steal_time_rq) ||
	    !bpf_core_field_exists(struct cfs_rq, rq) ||
	    !bpf_core_field_exists(struct sched_entity, cfs_rq))
		return 0;
	/* Plain loads (BTF pointers): three helper reads cost about as much
	 * as the program this replaces. */
	return t->se.cfs_rq->rq->prev_steal_time_rq;
}

/* Start counting the steal time of the thread's CPU, `steal` now. */
static __always_inline void mark_steal(struct thread_state *st, u64 steal)
{
	st->steal_mark = steal;
	st->steal_cpu = bpf_get_smp_processor_id() + 1;
}

/* Move the steal time of its CPU since the last look (`steal` now) from the
 * on-CPU clock of a running thread to its steal clock (its run time counted
 * first). The counter lags the steal by up to a scheduler clock update, so
 * part of a steal can come after the on-CPU sample that already paid the
 * time out, and paid points cannot be taken back: the clock does not go
 * below zero, so that on-CPU and steal points together always add up to the
 * time the thread was on a CPU. */
static __always_inline void take_steal(struct thread_state *st, u64 steal)
{
	u64 mark = st->steal_mark, stolen;

	if (st->steal_cpu == bpf_get_smp_processor_id() + 1 && steal > mark) {
		stolen = steal - mark;
		if (stolen > st->cpu_credit)
			stolen = st->cpu_credit;
		st->cpu_credit -= stolen;
		st->steal_credit += stolen;
	}
	mark_steal(st, steal);
}

/* Stop the on-CPU clock of a thread leaving its CPU. */
static __always_inline void stop_cpu_clock(struct thread_state *st, u64 now)
{
	count_run_time(st, now);
	st->run_mark = 0;
}

static __always_inline void *reserve(u32 kind, u32 size)
{
	struct rec_hdr *h = bpf_ringbuf_reserve(&events, size, 0);

	if (!h) {
		count_lost(LOST_RING_FULL, kind);
		return NULL;
	}
	h->kind = kind;
	h->size = size;
	return h;
}

/* Who is waking a thread right now: current, unless we run in interrupt
 * context, where current is just whoever was interrupted. */
static __always_inline void current_waker(u8 *kind, u32 *id)
{
	struct irq_context *ic = this_irq_ctx();

	if (ic) {
		if (ic->hardirq) {
			*kind = WAKER_IRQ;
			*id = ic->hardirq - 1;
			return;
		}
		if (ic->ipi) {
			*kind = WAKER_IRQ;
			*id = IRQ_IPI;
			return;
		}
		if (ic->timer) {
			*kind = WAKER_TIMER;
			*id = 0;
			return;
		}
		if (ic->softirq && ic->softirq_owner) {
			*kind = WAKER_THREAD;
			*id = ic->softirq_owner;
			return;
		}
		if (ic->softirq) {
			*kind = WAKER_SOFTIRQ;
			*id = ic->softirq - 1;
			return;
		}
	}
	*kind = WAKER_THREAD;
	*id = bpf_get_current_pid_tgid();
}

/* How user memory of a task can be read where a sample is emitted. */
enum user_access {
	USER_NONE,	/* not at all */
	USER_LOADED,	/* its address space is the one loaded: bpf_probe_read_user */
	USER_REMOTE,	/* from a sleepable program: bpf_copy_from_user_task */
};

static __always_inline long read_user(void *dst, u32 size, u64 src, struct task_struct *task,
				      enum user_access how)
{
	if (how == USER_REMOTE)
		return bpf_copy_from_user_task(dst, size, (void *)src, task, 0);
	return bpf_probe_read_user(dst, size, (void *)src);
}

struct fp_walk {
	struct scratch *s;
	struct task_struct *task;
	enum user_access how;
	u64 bp, sp;
	u32 len;		/* bytes in s->copy, the stack from sp */
	u32 n;			/* frames found */
	/* The frame record read: here rather than on the callback's stack,
	 * which this kernel's verifier mishandles ("verifier bug: stack
	 * slot"). */
	u64 pair[2];
};

static long fp_walk_frame(u64 i, struct fp_walk *w)
{
	u64 bp = w->bp, off = bp - w->sp, *pair = w->pair;
	u32 n = w->n;

	/* A frame record lies above the stack pointer. In code built without
	 * frame pointers rbp is just a register, often a count or a heap
	 * pointer, below it: reading there would often fault, which costs the
	 * sample as much as everything else it does. */
	if (!bp || (bp & 7) || n >= MAX_FP || bp < w->sp)
		return 1;
	if (!(w->sp & 7) && off + sizeof(w->pair) <= w->len) {
		pair[0] = *(u64 *)(w->s->copy + (off & (STACK_COPY_MAX - 8)));
		pair[1] = *(u64 *)(w->s->copy + ((off + 8) & (STACK_COPY_MAX - 8)));
		w->s->cut = off + 16;
	} else if (read_user(pair, sizeof(w->pair), bp, w->task, w->how)) {
		return 1;
	}
	/* Two links at least (see capture_user). Kept in the map value, whose
	 * contents the verifier does not follow: as a number on the stack, it
	 * made the verifier walk every program that takes stacks twice over. */
	if (n >= 1 && w->s->cut)
		w->s->rec.copy_len = w->s->cut;
	w->s->fp[(n * 2) & (MAX_FP * 2 - 1)] = bp;
	w->s->fp[(n * 2 + 1) & (MAX_FP * 2 - 1)] = pair[1];
	w->n = n + 1;
	if (pair[0] <= bp)
		return 1;
	w->bp = pair[0];
	return 0;
}

/* How much of a copy of `len` bytes from `sp`, of which a frame record kept
 * `kept` (all of it when none did), lies below the top of the stack sp is
 * on, where no frame lies above. The main thread's stack starts at the mm's
 * start_stack (above it are the arguments, the environment and the
 * auxiliary vector), and a thread that glibc (or musl) created has its
 * thread descriptor, the target of its TLS pointer, right above its stack
 * and static TLS. A thread blocked a few frames deep then sends a few
 * hundred bytes instead of the whole copy, mostly argument strings or its
 * thread descriptor, which a program without frame pointers (where no frame
 * record cuts the copy) sent with every sample. A stack pointer on another
 * stack (a signal stack, a coroutine's) is below neither within the copy,
 * and keeps it. A global function, checked once by the verifier: inlined
 * into every place that takes a stack, it made the programs load in 12 ms
 * more. The task comes as its address, a number, and its fields are read
 * by helper: a task pointer argument needs the trusted-argument tag, which
 * kernels before 6.8 do not know. */
__noinline u32 stack_cut(u64 task_addr, u64 sp, u32 len, u32 kept)
{
	struct task_struct *task = (struct task_struct *)task_addr;
	u64 top, fs;

	/* That record lies below the top: no need to look for it. */
	if (kept < len)
		return kept;
	top = BPF_CORE_READ(task, mm, start_stack);
	fs = BPF_CORE_READ(task, thread.fsbase);
	if (sp < top && top - sp < len)
		len = top - sp;
	if (sp < fs && fs - sp < len)
		len = fs - sp;
	return len;
}

/* The user half of a stack: registers, a frame-pointer walk and a copy of the
 * top of the stack, into s->fp and s->copy. */
static __always_inline void capture_user(struct scratch *s, struct task_struct *task,
					 enum user_access how)
{
	struct fp_walk w = { .s = s, .task = task, .how = how };
	struct pt_regs *regs;
	u64 bp, sp;
	u32 len;

	if (task->flags & PF_KTHREAD)
		return;
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return;
	s->rec.ip = regs->ip;
	sp = regs->sp;
	bp = regs->bp;
	s->rec.sp = sp;
	s->rec.bp = bp;
	s->rec.flags |= SF_USER_REGS;

	/* The copy must not run past the top of the stack mapping; on failure
	 * retry with what is left of the current page. */
	len = stack_copy_bytes;
	if (len > STACK_COPY_MAX)
		len = STACK_COPY_MAX;
	if (read_user(s->copy, len, sp, task, how)) {
		u32 rest = 4096 - (sp & 4095);

		len = rest < len ? rest : len;
		if (len > STACK_COPY_MAX)
			len = STACK_COPY_MAX;
		if (read_user(s->copy, len, sp, task, how))
			len = 0;
	}
	s->rec.copy_len = len;

	/* Frame records inside the copy are read from it: a user read costs
	 * about 150 ns here, most of it fixed, and most frames of a blocked
	 * thread lie within the copy's reach. A callback loop keeps the
	 * verifier's walk of every program that takes stacks short.
	 *
	 * The walk also cuts the copy sent: user space needs it only up to
	 * the outermost record of a genuine frame-pointer chain that lies in
	 * it. CFI unwinds the frames between the records (code without frame
	 * pointers, such as libc's wrapper under the vDSO's clock_gettime),
	 * and the chain gives the rest. Two links at least, so that rbp
	 * holding a pointer to a local is not taken for a chain. What is left
	 * out is the stack above the chain's end (the libc frames that start
	 * a thread) or above the copy's last record, which needs the record
	 * beyond. Most samples then carry a few hundred bytes of stack instead
	 * of the whole copy. */
	w.bp = bp;
	w.sp = sp;
	w.len = len;
	s->cut = 0;
	bpf_loop(MAX_FP, fp_walk_frame, &w, 0);
	s->rec.fp_len = w.n;
	/* Cut after the read: the read's length stays one the verifier knows
	 * the bounds of. The task pointer goes through the map value, read
	 * back as the number the function takes. */
	s->task = (u64)task;
	s->rec.copy_len = stack_cut(*(volatile u64 *)&s->task, sp, len, s->rec.copy_len);
}

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
	u32 kbytes, fpbytes, size, off;
	struct bpf_dynptr dp;

	if (klen > MAX_KSTACK)
		klen = MAX_KSTACK;
	if (fplen > MAX_FP)
		fplen = MAX_FP;
	clen &= STACK_COPY_MAX * 2 - 1;
	kbytes = klen * 8;
	fpbytes = fplen * 16;
	size = sizeof(s->rec) + kbytes + fpbytes + clen;
	s->rec.hdr.size = size;
	s->rec.kstack_len = klen;
	s->rec.fp_len = fplen;
	s->rec.copy_len = clen;

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
	s->rec.cpu = st->p_cpu;
	s->rec.flags = flags | (st->p_segment ? SF_SEGMENT : 0);
	k = &st->ks[st->p_slot & 1];
	s->rec.kstack_len = k->len / 8;
	if (how != USER_NONE)
		capture_user(s, task, how);
	submit_sample(s, k->ips);
}

static __always_inline struct thread_state *state_of(struct task_struct *t, bool create)
{
	return bpf_task_storage_get(&threads, t, 0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

/* Blocked in futex(2) or futex_waitv(2): a pthread mutex, condition variable,
 * barrier or rwlock. The syscall number is in the saved user registers, which
 * is far cheaper than tracing every syscall (x86-64 numbers). */
#define NR_futex 202
#define NR_futex_waitv 449
static __always_inline bool in_futex_wait(struct task_struct *t)
{
	struct pt_regs *regs;
	long nr;

	if (t->flags & PF_KTHREAD)
		return false;
	regs = (struct pt_regs *)bpf_task_pt_regs(t);
	if (!regs)
		return false;
	nr = regs->orig_ax;
	return nr == NR_futex || nr == NR_futex_waitv;
}

static __always_inline u8 classify_sleep(struct task_struct *t, struct thread_state *st)
{
	if (BPF_CORE_READ_BITFIELD(t, in_iowait))
		return CLASS_IO;
	if (st->klock || in_futex_wait(t))
		return CLASS_LOCK;
	return CLASS_OTHER;
}

/* The user memory of `t` is readable now: the kernel allows user reads from
 * tracing programs only when current's own address space is the one loaded,
 * so prev must be a thread of the same process (not the idle task, whose
 * borrowed address space does not count). */
static __always_inline bool mm_loaded(struct task_struct *prev, struct task_struct *t)
{
	/* Read with the helper: two mm pointers compared as BTF pointers
	 * multiplied the states the verifier walks (on_switch loaded in 30
	 * ms instead of 11). */
	struct mm_struct *mm = BPF_CORE_READ(t, mm);

	return mm && mm == BPF_CORE_READ(prev, mm);
}

/* ==== System calls (record --syscalls) ====================================
 *
 * DeBox on a stock kernel: every system call of the target is timed between
 * raw_syscalls sys_enter and sys_exit. Its off-CPU time comes from the
 * recorder's own switch bookkeeping (the hook in switch_in below), split by
 * the same subclasses as blocked samples; its page faults are the task's
 * fault counters read at both ends. Exact per-process per-call totals live in
 * a per-CPU map; an invocation becomes a record (with the kernel stack of its
 * longest sleep and the user stack at sys_exit) when it was slow, slept or
 * took a major fault, and one in `syscall_sample_every` of the rest. The
 * programs are attached only with --syscalls.
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

/* ==== end of system calls ================================================ */

/* How far apart a wakeup traced before the switch-out and that switch-out
 * may be: the waker and the sleeper race on two CPUs for a few µs. */
#define EARLY_WAKE_NS 50000

/* Internal class of an interval the tool's delay took: no points, no sample. */
#define CLASS_DELAY 0xff

static __always_inline void switch_out(struct task_struct *prev, struct thread_state *st,
				       struct task_struct *next, bool preempt,
				       unsigned int prev_state, u64 now, u64 steal)
{
	st->seen = 1;
	if (st->pending)
		emit_pending(SCRATCH_TASK, st, prev, USER_LOADED, SF_LATE_USTACK);
	resume_if_switch_in_missed(st);
	stop_cpu_clock(st, now);
	take_steal(st, steal);
	if (prev_state & TASK_DEAD) {
		st->out = 0;
		return;
	}
	st->out = now;
	st->wake = 0;
	st->waker_kind = WAKER_NONE;
	st->waker_id = 0;
	if (preempt || prev_state == TASK_RUNNING)
		st->class = own_preemption_is_delay && BPF_CORE_READ(next, tgid) == self_tgid ?
				    CLASS_DELAY : CLASS_SCHED;
	else
		st->class = classify_sleep(prev, st);
	if (st->class != CLASS_SCHED && st->early_wake &&
	    (s64)(now - st->early_wake) < EARLY_WAKE_NS &&
	    (s64)(st->early_wake - now) < EARLY_WAKE_NS) {
		/* Woken while going to sleep: runnable from the start. */
		st->wake = now;
		st->waker_kind = st->early_waker_kind;
		st->waker_id = st->early_waker_id;
	}
	st->early_wake = 0;
}

struct kstack_hash {
	u64 *ips;
	u64 h;
};

static long kstack_hash_word(u64 i, struct kstack_hash *c)
{
	if (i >= MAX_KSTACK)
		return 1;
	c->h = (c->h ^ c->ips[i]) * 0x100000001b3ULL;
	return 0;
}

/* A hash of a stack of `len` bytes (FNV-style), to compare it with others. */
static __always_inline u64 kstack_hash(u64 *ips, u32 len)
{
	struct kstack_hash c = { .ips = ips, .h = len };

	bpf_loop(len / 8, kstack_hash_word, &c, 0);
	return c.h;
}

/* Whether a thread blocked in system call `nr` with its stack saved at
 * `ksp` has the return addresses of k's key frames where k's walks found
 * them. */
static __always_inline bool kstack_in_place(struct kstack *k, u32 nr, u64 ksp)
{
	u64 w;
	int i;

	if (!k->keys || k->placed != k->keys || k->nr != nr)
		return false;
	for (i = 0; i < KSTACK_KEY; i++) {
		if (i >= k->keys)
			break;
		if (bpf_probe_read_kernel(&w, sizeof(w), (void *)(ksp + k->off[i])) ||
		    w != k->ips[i])
			return false;
	}
	return true;
}

struct kstack_scan {
	u64 *buf;
	struct kstack *k;
	u32 words;		/* in buf */
	u32 from;		/* the word the scan starts at */
	u32 found;		/* frames placed */
	u32 keys;		/* frames to place */
};

static long kstack_scan_word(u64 i, struct kstack_scan *c)
{
	u32 j = c->found, at = c->from + i;

	if (j >= c->keys || j >= KSTACK_KEY || at >= c->words || at >= KSTACK_SCAN_WORDS)
		return 1;
	if (c->buf[at & (KSTACK_SCAN_WORDS - 1)] == c->k->ips[j]) {
		c->k->off[j] = at * 8;
		c->found = j + 1;
	}
	return 0;
}

/* Place the key frames of k (its first KSTACK_KEY, or all of a shorter
 * stack but a system call's entry frame), just walked from the stack saved
 * at `ksp`, in the raw stack (read into `buf`, the scratch's copy area):
 * each at the first word above the one before that holds its return
 * address. (The walk leaves out the scheduler's own frames: frame 0 is the
 * function that called it.) That first word may be a stale copy (the stack
 * offset of every system call is random, so old frames lie anywhere below
 * and between the live ones). So when the same stack is walked again (its
 * placed frames kept), a frame whose word no longer holds its address moves
 * on to the next word that does, and the frames above it after that; the live word always holds
 * it, so every frame settles there. A callback loop: an inline one made
 * on_switch too large for the verifier. */
static __always_inline void kstack_place(struct kstack *k, u64 ksp, u64 *buf)
{
	struct kstack_scan c = { .buf = buf, .k = k };
	u32 len = KSTACK_SCAN_WORDS * 8, frames, j;

	/* The outermost frame of a system call, the entry code's, lies above
	 * the random offset, at no fixed distance from ksp; it is the same for
	 * every system call. */
	frames = k->len / 8;
	if (k->nr != (u32)-1 && frames)
		frames--;
	k->keys = frames < KSTACK_KEY ? frames : KSTACK_KEY;
	c.keys = k->keys;
	if (!k->keys)
		return;
	/* A read past the top of the stack fails; the top is a page boundary
	 * (a guard page follows), so then it is the next one. */
	if (bpf_probe_read_kernel(buf, len, (void *)ksp)) {
		len = 4096 - (ksp & 4095);
		if (len > KSTACK_SCAN_WORDS * 8 ||
		    bpf_probe_read_kernel(buf, len, (void *)ksp)) {
			k->placed = 0;
			return;
		}
	}
	c.words = len / 8;
	/* Frames placed before stay where their words still hold them. */
	for (j = 0; j < KSTACK_KEY && j < k->placed; j++) {
		u32 at = k->off[j] / 8;

		if (at >= c.words || buf[at & (KSTACK_SCAN_WORDS - 1)] != k->ips[j])
			break;
	}
	c.found = j;
	if (j < k->placed)
		c.from = k->off[j & (KSTACK_KEY - 1)] / 8 + 1;
	else if (j > 0)
		c.from = k->off[(j - 1) & (KSTACK_KEY - 1)] / 8 + 1;
	if (j < k->keys)
		bpf_loop(KSTACK_SCAN_WORDS, kstack_scan_word, &c, 0);
	k->placed = c.found;
}

/* Which of a pair of stacks (ks[last] looked at first) has its key frames
 * in place for a thread blocked in `nr` with its stack saved at `ksp`: 0 or
 * 1, or -1 for neither. */
static __always_inline int kstack_pair_in_place(struct kstack *ks, u32 last, u32 nr, u64 ksp)
{
	last &= 1;
	if (kstack_in_place(&ks[last], nr, ksp))
		return last;
	if (kstack_in_place(&ks[last ^ 1], nr, ksp))
		return last ^ 1;
	return -1;
}

/* Which of a pair of stacks (ks[last] looked at first) is the walk of hash
 * `h` and `len` bytes: 0 or 1, or -1 for neither. */
static __always_inline int kstack_pair_find(struct kstack *ks, u32 last, u64 h, u32 len)
{
	last &= 1;
	if (ks[last].hash == h && ks[last].len == len)
		return last;
	if (ks[last ^ 1].hash == h && ks[last ^ 1].len == len)
		return last ^ 1;
	return -1;
}

/* The stack another thread walked on this CPU whose key frames lie in place
 * for a thread blocked in `nr` with its stack saved at `ksp`, if any. */
static __always_inline struct kstack *shared_kstack(u32 nr, u64 ksp)
{
	u32 idx = nr % KSTACK_SHARED;
	struct kstack_shared *sh = bpf_map_lookup_elem(&kstack_shared, &idx);
	int i;

	if (!sh)
		return NULL;
	i = kstack_pair_in_place(sh->ks, sh->last, nr, ksp);
	return i < 0 ? NULL : &sh->ks[i & 1];
}

/* Offer k, just walked and placed, to the other threads on this CPU: it
 * replaces the same stack placed before (its places may have settled
 * since), or else the older of the two, and is looked at first. */
static __always_inline void share_kstack(struct kstack *k)
{
	u32 idx = k->nr % KSTACK_SHARED, last;
	struct kstack_shared *sh;

	if (!k->keys || k->placed != k->keys)
		return;
	sh = bpf_map_lookup_elem(&kstack_shared, &idx);
	if (!sh)
		return;
	last = sh->last & 1;
	if (kstack_pair_find(sh->ks, last, k->hash, k->len) != last) {
		last ^= 1;
		sh->last = last;
	}
	__builtin_memcpy(&sh->ks[last], k, sizeof(*k));
}

/* The kernel stack of a thread that is off-CPU, into one of its two stack
 * slots, which p_slot then names.
 *
 * Walking a sleeping thread's kernel stack costs some 3-5 µs here, almost
 * all of it fixed cost whatever the depth, at every blocked sample; and a
 * thread mostly blocks at one of a few places (the read it waits in, the
 * preemption after the write that wakes its peer). So from a switch-in
 * (`reuse`), a stack walked before is taken again when the thread blocked
 * in the same system call and the return addresses of its first KSTACK_KEY
 * frames lie where they lay then: a few one-word reads instead of a walk.
 * That is one of the thread's last two walks, or else one of the last two
 * on this CPU in that system call by any thread. The saved stack pointer
 * itself is no key, as the kernel randomizes the stack offset of each
 * system call; the frames lie at the same distances above it. Reuses are
 * walked anyway now and then and compared, the KSTACK_CHECK-th first and
 * ever more rarely while they agree: a thread whose reused stack was wrong
 * is walked from then on, and the counts reach the recording's summary. */
static __always_inline void read_kstack(struct task_struct *t, struct thread_state *st,
					struct scratch *s, bool reuse)
{
	u32 zero = 0;
	struct kstack_counts *c = bpf_map_lookup_elem(&kstack_counts, &zero);
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
	u64 ksp = t->thread.sp, h;
	u32 nr = 0, last = st->k_last & 1, slot = last ^ 1, len;
	bool hit = true, again = false;
	struct kstack *k, *shared = NULL;
	long n;
	int i;

	if (regs)
		nr = regs->orig_ax;
	reuse = reuse && s && c && regs && !st->k_noreuse && !(t->flags & PF_KTHREAD);
	if (!reuse) {
		/* A plain walk, into the slot of the older one. */
		k = &st->ks[slot];
		n = bpf_get_task_stack(t, k->ips, sizeof(k->ips), 0);
		k->len = n > 0 ? n : 0;
		k->placed = 0;
		k->hash = 0;
		st->p_slot = slot;
		st->k_last = slot;
		if (c)
			c->walked++;
		return;
	}
	i = kstack_pair_in_place(st->ks, last, nr, ksp);
	if (i >= 0) {
		slot = i & 1;
	} else {
		shared = shared_kstack(nr, ksp);
		if (shared)
			__builtin_memcpy(&st->ks[slot], shared, sizeof(*shared));
		else
			hit = false;
	}
	k = &st->ks[slot];
	if (hit && ++st->k_reuses < (KSTACK_CHECK << (st->k_check_shift & 7))) {
		st->p_slot = slot;
		st->k_last = slot;
		if (shared)
			c->shared++;
		else
			c->reused++;
		return;
	}

	/* A walk: into the scratch first, to find whether it is the stack of
	 * a slot already. */
	n = bpf_get_task_stack(t, s->kstack, sizeof(s->kstack), 0);
	len = n > 0 ? n : 0;
	h = kstack_hash(s->kstack, len);
	c->walked++;
	if (hit) {
		/* A check of a reuse. */
		st->k_reuses = 0;
		c->checked++;
		if (h == k->hash) {
			if (st->k_check_shift < KSTACK_CHECK_MAX_SHIFT)
				st->k_check_shift++;
			goto chosen;
		}
		c->differed++;
		st->k_noreuse = 1;
	} else {
		/* A stack walked before whose places did not hold. */
		i = kstack_pair_find(st->ks, last, h, len);
		if (i >= 0) {
			slot = i & 1;
			again = true;
		}
	}
	k = &st->ks[slot];
	if (!again) {
		__builtin_memcpy(k->ips, s->kstack, sizeof(k->ips));
		k->len = len;
		k->hash = h;
		k->placed = 0;
	}
	k->nr = nr;
	if (!st->k_noreuse) {
		kstack_place(k, ksp, (u64 *)s->copy);
		share_kstack(k);
	}
chosen:
	st->p_slot = slot;
	st->k_last = slot;
}

/* First sight of a thread that was already off-CPU when the recording
 * started (`asleep`: not just runnable): one interval from the start. */
static __always_inline void first_sight(struct task_struct *t, struct thread_state *st, bool asleep)
{
	if (st->seen)
		return;
	st->seen = 1;
	if (!st->out && start_ns && asleep) {
		st->out = start_ns;
		st->class = classify_sleep(t, st);
	}
}

/* The wait segment of the interval [out, now) of `task`, switched in on
 * `cpu`, for the wait-for graph. */
static __always_inline void write_segment(struct task_struct *task, struct thread_state *st,
					  u64 out, u64 wake, u64 now, u16 cpu)
{
	struct segment_rec *r = reserve(REC_SEGMENT, sizeof(*r));

	if (!r)
		return;
	r->pid = task->tgid;
	r->tid = task->pid;
	r->start = out;
	r->wake = wake;
	r->end = now;
	r->waker_id = st->waker_id;
	r->waker_kind = st->waker_kind;
	r->class = st->class == CLASS_DELAY ? CLASS_SCHED : st->class;
	r->cpu = cpu;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

/* End the off-CPU interval of `task` at `now`: switched in on `cpu`, or
 * still off-CPU at the end of the recording (cpu CPU_OPEN). If it passed a
 * sampling point, parks its blocked sample (with its kernel stack) for the
 * user stack and returns true; the sample is the interval's wait segment
 * too. Otherwise writes the wait segment alone. A sample parked before,
 * whose thread never got back to user space, is emitted first (`how`:
 * whether its user stack can be read here). */
static __always_inline bool close_interval(struct task_struct *task, struct thread_state *st,
					   u64 now, u16 cpu, enum scratch_slot slot,
					   enum user_access how, u16 flags)
{
	u64 out = st->out, wake = st->wake;
	u32 w, ws;

	st->out = 0;
	if (out < start_ns)
		out = start_ns;
	if (wake && wake < out)
		wake = out;
	if (wake > now)
		wake = now;
	syscall_off_cpu(task, st, out, wake, now);

	w = 0;
	ws = 0;
	if (st->class != CLASS_DELAY)
		split_points(&st->off_credit, out, wake, now, st->class, &w, &ws);
	if (w + ws == 0) {
		if (emit_segments)
			write_segment(task, st, out, wake, now, cpu);
		return false;
	}
	if (st->pending)
		emit_pending(slot, st, task, how, flags);
	/* The sample has every field of the segment: one ring record less
	 * for each blocked sample. */
	st->p_segment = emit_segments;
	st->p_start = out;
	st->p_wake = wake;
	st->p_end = now;
	st->p_weight = w;
	st->p_sched_weight = ws;
	st->p_class = st->class;
	st->p_waker_kind = st->waker_kind;
	st->p_waker_id = st->waker_id;
	st->p_cpu = cpu;
	read_kstack(task, st, scratch_at(slot), slot == SCRATCH_TASK);
	st->pending = 1;
	return true;
}

static __always_inline void switch_in(struct task_struct *prev, struct task_struct *next,
				      struct thread_state *st, u64 now, u64 steal)
{
	bool loaded;
	u32 *parked;

	st->run_mark = now;
	mark_steal(st, steal);
	first_sight(next, st, true);
	if (!st->out)
		return;
	/* Most switches stay inside one process: then the user stack can be
	 * read right away, otherwise it waits for the thread to run. */
	loaded = mm_loaded(prev, next);
	if (!close_interval(next, st, now, bpf_get_smp_processor_id(), SCRATCH_TASK,
			    loaded ? USER_LOADED : USER_NONE, SF_LATE_USTACK))
		return;
	if (loaded) {
		emit_pending(SCRATCH_TASK, st, next, USER_LOADED, 0);
	} else {
		parked = this_parked_tid();
		if (parked)
			*parked = next->pid;
	}
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	u64 now = bpf_ktime_get_ns(), steal = rq_steal(prev);	/* prev is still on this CPU */
	struct irq_context *ic = this_irq_ctx();
	u32 *parked = this_parked_tid();
	struct thread_state *st;

	/* No interrupt handler runs across a context switch: whatever the
	 * entry/exit hooks left behind (an exit missed while attaching) must
	 * not name the wakers of the rest of the recording. */
	if (ic)
		__builtin_memset(ic, 0, sizeof(*ic));
	if (parked)
		*parked = 0;
	/* Without its state a thread's interval is not seen starting or
	 * ending: its wait segment and blocked sample are lost. */
	if (is_tracked(prev)) {
		st = state_of(prev, true);
		if (st)
			switch_out(prev, st, next, preempt, prev_state, now, steal);
		else
			count_lost(LOST_NO_STATE, REC_SEGMENT);
	}
	if (is_tracked(next)) {
		st = state_of(next, true);
		if (st)
			switch_in(prev, next, st, now, steal);
		else
			count_lost(LOST_NO_STATE, REC_SEGMENT);
	}
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct *p)
{
	/* Only tracked threads have a state. */
	struct thread_state *st = state_of(p, false);

	if (!st)
		return 0;
	if (!st->out) {
		st->early_wake = bpf_ktime_get_ns();
		current_waker(&st->early_waker_kind, &st->early_waker_id);
		return 0;
	}
	if (st->wake)
		return 0;
	st->wake = bpf_ktime_get_ns();
	current_waker(&st->waker_kind, &st->waker_id);
	return 0;
}

/* A new thread is runnable from its creation: all of it until its first
 * switch-in is runqueue time, and its creator is its waker. */
SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_wakeup_new, struct task_struct *p)
{
	struct thread_state *st;
	u64 now;

	if (!is_tracked(p))
		return 0;
	st = state_of(p, true);
	if (!st) {
		count_lost(LOST_NO_STATE, REC_SEGMENT);
		return 0;
	}
	now = bpf_ktime_get_ns();
	st->seen = 1;
	st->out = now;
	st->wake = now;
	st->class = CLASS_SCHED;
	current_waker(&st->waker_kind, &st->waker_id);
	return 0;
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

/* The thread is on its way back to user space after being switched in (rseq
 * notifies every switched-out task that has registered rseq, as glibc does):
 * its user stack is still the one it blocked with. */
SEC("tp_btf/rseq_update")
int BPF_PROG(on_rseq_update, struct task_struct *t)
{
	emit_parked();
	return 0;
}

/* The same for threads without rseq, on their way out of a system call
 * (attached only when such threads are seen). */
SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit)
{
	emit_parked();
	return 0;
}

/* Turn what the on-CPU and steal clocks of the running `task` hold into an
 * on-CPU sample at its current stacks, if that is a sampling point or more.
 * `kflags` says how to read the kernel stack's first frame; `flags` are the
 * sample's own (an exit tail takes no kernel stack: it would be the exit
 * path and this program's own frames, where none of that time was spent). */
static __always_inline void take_cpu_sample(void *ctx, enum scratch_slot slot,
					    struct task_struct *task, struct thread_state *st,
					    u16 kflags, u16 flags, u64 steal)
{
	struct scratch *s;
	u32 w, ws;
	u64 now;
	long n;

	resume_if_switch_in_missed(st);
	now = bpf_ktime_get_ns();
	/* Not seen switching in: running since before the recording. */
	if (!st->run_mark)
		st->run_mark = start_ns ? start_ns : now;
	count_run_time(st, now);
	take_steal(st, steal);
	w = take_points(&st->cpu_credit, 0);
	ws = take_points(&st->steal_credit, 0);
	st->run_mark = now;
	if (!w && !ws)
		return;

	s = get_scratch(slot);
	if (!s)
		return;
	s->rec.pid = task->tgid;
	s->rec.tid = task->pid;
	s->rec.start = now;
	s->rec.end = now;
	s->rec.weight = w;
	s->rec.sched_weight = ws;
	s->rec.class = CLASS_CPU;
	s->rec.cpu = bpf_get_smp_processor_id();
	s->rec.flags = flags;
	/* Empty when the sample hit user mode. */
	n = flags & SF_EXIT_TAIL ? 0 : bpf_get_stack(ctx, s->kstack, sizeof(s->kstack), 0);
	if (n > 0) {
		s->rec.kstack_len = (u64)n / 8;
		s->rec.flags |= kflags;
	}
	capture_user(s, task, USER_LOADED);
	submit_sample(s, s->kstack);
}

SEC("perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	u64 steal = rq_steal(task);
	struct thread_state *st;

	if (!is_tracked(task))
		return 0;
	st = state_of(task, true);
	if (!st) {
		count_lost(LOST_NO_STATE, REC_SAMPLE);
		return 0;
	}
	if (st->pending)
		emit_pending(SCRATCH_IRQ, st, task, USER_LOADED, SF_LATE_USTACK);
	take_cpu_sample(ctx, SCRATCH_IRQ, task, st, SF_KSTACK_LEAF_IS_IP, 0, steal);
	return 0;
}

/* Sleeping kernel locks (mutex, rwsem, semaphore, rt_mutex) count as lock
 * waits; spinning does not sleep and is ignored. */
SEC("tp_btf/contention_begin")
int BPF_PROG(on_contention_begin, void *lock, unsigned int flags)
{
	struct task_struct *task;
	struct thread_state *st;

	if (flags & LCB_F_SPIN)
		return 0;
	task = bpf_get_current_task_btf();
	if (!is_tracked(task))
		return 0;
	st = state_of(task, true);
	if (st)
		st->klock = 1;
	return 0;
}

SEC("tp_btf/contention_end")
int BPF_PROG(on_contention_end, void *lock, int ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct thread_state *st = state_of(task, false);

	if (st)
		st->klock = 0;
	return 0;
}

/* Interrupt context bookkeeping, for naming wakers. */

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(on_irq_entry, int irq)
{
	struct irq_context *ic = this_irq_ctx();

	if (ic)
		ic->hardirq = irq + 1;
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(on_irq_exit)
{
	struct irq_context *ic = this_irq_ctx();

	if (ic)
		ic->hardirq = 0;
	return 0;
}

/* A softirq raised by a task in process context and run before that task
 * leaves the CPU (from its own local_bh_enable: a loopback send runs the
 * receiver's NET_RX this way) is the task's work, so the wakeups it does are
 * the task's. One raised from a hard irq, a timer, an IPI or another softirq
 * stays an interrupt; a run that serves both kinds of raise too. */
SEC("tp_btf/softirq_raise")
int BPF_PROG(on_softirq_raise, unsigned int vec)
{
	struct irq_context *ic = this_irq_ctx();
	u32 tid = (u32)bpf_get_current_pid_tgid();
	u32 *by;

	if (!ic || vec >= NR_SOFTIRQS)
		return 0;
	by = &ic->raised_by[vec & NR_SOFTIRQ_VECTORS_MASK];
	/* Raised by a softirq the task owns (NET_RX re-raising itself past
	 * its budget): still the task's. */
	if (ic->hardirq || ic->ipi || ic->timer || tid == 0 ||
	    (ic->softirq && ic->softirq_owner != tid))
		*by = RAISED_IN_IRQ;
	else if (*by != RAISED_IN_IRQ)
		*by = tid;
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(on_softirq_entry, unsigned int vec)
{
	struct irq_context *ic = this_irq_ctx();
	u32 tid = (u32)bpf_get_current_pid_tgid();
	u32 *by;

	if (!ic)
		return 0;
	ic->softirq = vec + 1;
	ic->softirq_owner = 0;
	if (vec < NR_SOFTIRQS) {
		by = &ic->raised_by[vec & NR_SOFTIRQ_VECTORS_MASK];
		if (*by == tid)
			ic->softirq_owner = tid;
		*by = 0;
	}
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(on_softirq_exit)
{
	struct irq_context *ic = this_irq_ctx();

	if (ic) {
		ic->softirq = 0;
		ic->softirq_owner = 0;
	}
	return 0;
}

/* Contexts that nest (an hrtimer expiry, the local timer, function-call
 * IPIs): a depth counter in `field` of the CPU's irq_context, kept by an
 * entry and an exit program. */
#define NESTED_CONTEXT(name, tp, field)					\
	SEC("tp_btf/" #tp "_entry")					\
	int BPF_PROG(on_##name##_entry)					\
	{								\
		struct irq_context *ic = this_irq_ctx();		\
									\
		if (ic)							\
			ic->field++;					\
		return 0;						\
	}								\
									\
	SEC("tp_btf/" #tp "_exit")					\
	int BPF_PROG(on_##name##_exit)					\
	{								\
		struct irq_context *ic = this_irq_ctx();		\
									\
		if (ic && ic->field)					\
			ic->field--;					\
		return 0;						\
	}

NESTED_CONTEXT(hrtimer, hrtimer_expire, timer)
NESTED_CONTEXT(local_timer, local_timer, timer)
NESTED_CONTEXT(ipi_single, call_function_single, ipi)
NESTED_CONTEXT(ipi, call_function, ipi)

/* Task lifecycle. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	struct fork_rec *r;
	u32 child_tgid;

	if (!is_tracked(parent))
		return 0;
	child_tgid = BPF_CORE_READ(child, tgid);
	if (!trace_all && child_tgid != BPF_CORE_READ(parent, tgid)) {
		if (!follow_children)
			return 0;
		track_tgid(child_tgid);
	}
	r = reserve(REC_FORK, sizeof(*r));
	if (!r)
		return 0;
	r->time = bpf_ktime_get_ns();
	r->parent_pid = BPF_CORE_READ(parent, tgid);
	r->parent_tid = BPF_CORE_READ(parent, pid);
	r->pid = child_tgid;
	r->tid = BPF_CORE_READ(child, pid);
	BPF_CORE_READ_STR_INTO(&r->comm, child, comm);
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct exec_rec *r;

	if (!is_tracked(p))
		return 0;
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
		take_cpu_sample(ctx, SCRATCH_TASK, p, st, 0, SF_EXIT_TAIL, steal);
	emit_task_rec(REC_EXIT, p, p->comm);
	if (group_dead && !trace_all)
		untrack_tgid(p->tgid);
	return 0;
}

/* Block requests, for the device vertices of the wait-for graph. */

static __always_inline u8 rq_op(struct request *rq)
{
	u32 op = rq->cmd_flags & REQ_OP_MASK;

	return op <= BIO_DISCARD ? op : BIO_OTHER;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(on_rq_issue, struct request *rq)
{
	struct task_struct *task;
	struct bio_rec *r;

	if (!emit_bio)
		return 0;
	r = reserve(REC_BIO_ISSUE, sizeof(*r));
	if (!r)
		return 0;
	task = bpf_get_current_task_btf();
	r->time = bpf_ktime_get_ns();
	r->sector = rq->__sector;
	r->dev = rq_dev(rq);
	r->bytes = rq->__data_len;
	r->pid = task->tgid;
	r->tid = task->pid;
	r->op = rq_op(rq);
	r->tracked = is_tracked(task);
	r->error = 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(on_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	struct bio_rec *r;

	if (!emit_bio)
		return 0;
	r = reserve(REC_BIO_DONE, sizeof(*r));
	if (!r)
		return 0;
	r->time = bpf_ktime_get_ns();
	r->sector = rq->__sector;
	r->dev = rq_dev(rq);
	r->bytes = nr_bytes;
	r->op = rq_op(rq);
	r->error = error;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

/* At the end of a recording, threads that are still off-CPU have an open
 * interval, and threads switched in but not yet back in user space have a
 * parked sample. Both are flushed by walking all tasks; the program may
 * sleep, so it can read the user stacks of other processes. */
SEC("iter.s/task")
int flush_open(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct thread_state *st;

	if (!task || !is_tracked(task))
		return 0;
	st = state_of(task, true);
	if (!st) {
		count_lost(LOST_NO_STATE, REC_SEGMENT);
		return 0;
	}
	first_sight(task, st, task->__state != TASK_RUNNING);
	if (st->pending)
		emit_pending(SCRATCH_ITER, st, task, USER_REMOTE, SF_BLOCKED_TAIL);
	if (st->out && close_interval(task, st, bpf_ktime_get_ns(), CPU_OPEN, SCRATCH_ITER,
				      USER_REMOTE, SF_BLOCKED_TAIL))
		emit_pending(SCRATCH_ITER, st, task, USER_REMOTE, SF_BLOCKED_TAIL);
	return 0;
}
