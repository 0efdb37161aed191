/*
 * What every part of the recorder shares: its options, the state kept per
 * thread (in task storage, so it goes away with the task, and a lookup is a
 * pointer away rather than a hash), the per-CPU scratch a sample is built in
 * (a sample with its stack copy is far larger than the 512-byte BPF stack),
 * the ring buffer and the counts of what could not be written.
 */

#define TASK_RUNNING 0
#define TASK_DEAD 0x80
#define PF_KTHREAD 0x00200000
#define LCB_F_SPIN (1U << 0)
#define REQ_OP_MASK 0xff
/* x86-64 system call numbers of the futex waits (sleep.bpf.h, python.bpf.h). */
#define NR_futex 202
#define NR_futex_waitv 449

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
 * fire for them: unless task work serves them (sample.bpf.h), user space
 * then attaches the (system-wide, hence costlier: it runs on every system
 * call of every task) sys_exit fallback.
 * A process just exec'd has no rseq until its libc registers it, and may
 * block before that (loading its libraries): only threads that have run
 * longer than startup takes count. */
u64 late_without_rseq = 0;
#define RSEQ_STARTUP_NS 10000000ULL

/* With a stack budget the sys_exit fallback is never attached (it would
 * run at every system call on the machine, several times the cost of all
 * the rest in a context-switch storm): a parked sample that neither rseq
 * nor a task work serves is written without its user stack, counted here. */
u64 ustacks_given_up = 0;

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
	/* The waker's stacks at the wakeup (waker_stacks ids + 1, 0: none). */
	u32 waker_kstack;
	u32 waker_ustack;
	u32 waker_pid;
	/* Numbers the waker user stack records of this thread's wakeups. */
	u32 waker_seq;
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
	u64 run_start;		/* the current run's switch-in, or its return to user space */
	/* The current run has not been back in user space since its switch-in:
	 * all of it is kernel work, the rest of a system call (or a fault).
	 * Known only for threads with rseq, whose returns are traced. */
	u8 kernel_part;
	u64 cpu_credit;
	u64 steal_credit;
	/* The steal time of the thread's CPU at its last look while it ran,
	 * and that CPU + 1 (0: none yet). */
	u64 steal_mark;
	u32 steal_cpu;
	u64 off_credit;
	/* The stack budget's draw for the interval, made at its wakeup
	 * (clocks.bpf.h): its threshold (0: none yet) and the points it saw. */
	u32 b_tau;
	u32 b_points;
	u8 b_keep;
	/* A blocked sample waiting for the thread to run so that its user
	 * stack can be read. Claimed atomically: the on-CPU sample (an
	 * interrupt) may try to emit it while task context is doing so. */
	u64 pending;
	u8 p_class;
	u8 p_segment;		/* the sample stands for the interval's wait segment */
	u8 p_waker_kind;
	/* No rseq and no task work serves the parked sample: its user stack
	 * can only be read once the thread has run on (sample.bpf.h). */
	u8 p_unserved;
	u16 p_cpu;
	u32 p_waker_id;
	u32 p_waker_kstack;
	u32 p_waker_ustack;
	u32 p_waker_pid;
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
	/* The thread's CPython thread state (python.bpf.h), 0 when unknown;
	 * when none was found, not looked for again before py_retry. */
	u64 py_tstate;
	u64 py_retry;
	/* The interpreter state the thread state was found in. */
	u64 py_interp;
	/* The lowest frame its last walk found near the innermost, where the
	 * next window of its frames starts (0: none known). */
	u64 py_low;
};

/* Reads of interpreter structures land here: fields are taken at offsets
 * masked with PY_FIELD_MASK, so the buffer holds a u64 at the largest. */
#define PY_FIELD_MASK 0xff
#define PY_BUF (PY_FIELD_MASK + 1 + 8)
/* A window of a thread's interpreter frames read at once (3.11+), and the
 * code objects walks met, by their address (python.bpf.h). */
#define PY_STACK_MAX 4096
#define PY_CACHE 256

struct py_cached {
	u64 code;
	u64 counter;		/* the address of the count that proved it */
	u32 count;		/* what the count was then (0: no proof) */
	u32 serial;		/* the process's registration (py_config) */
	u32 walk;		/* the walk that met it last */
	u16 check;
	u16 _pad;
};

struct scratch {
	struct sample_rec rec;
	u64 kstack[MAX_KSTACK];
	u64 fp[MAX_FP * 2];
	u32 cut;		/* copy bytes up to the last frame record in it */
	u64 task;		/* the task whose stack this is, as a number (stack_cut) */
	/* The thread's interpreter frames (python.bpf.h), and room for what
	 * one read of a frame, a thread state or a code object brings. */
	struct py_frame py[MAX_PY_FRAMES];
	u8 py_buf[PY_BUF];
	u8 py_code_buf[PY_BUF];
	/* A frame anywhere in the window is read with the largest field
	 * offset past it. */
	u8 py_stack[PY_STACK_MAX + PY_BUF];
	struct py_cached py_cache[PY_CACHE];
	u32 py_walk;		/* walks made in this scratch */
	/* py_stack holds [py_lo, py_lo + py_len) of the thread; py_top is the
	 * end of its innermost frame, py_low the lowest frame found within
	 * PY_STACK_MAX below it. Here rather than in the walk's state on the
	 * stack, which the verifier follows from step to step. */
	u64 py_lo;
	u64 py_top;
	u64 py_low;
	u32 py_len;
	/* Twice the largest copy: its length is bounded with a mask, which
	 * the verifier follows without a branch (see submit_sample). */
	u8 copy[STACK_COPY_MAX * 2];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 << 20);
} events SEC(".maps");

/* Stacks of wakers at their wakeups (offwaketime's view), by id: ids are
 * hashes of the stack, so a stack's id stays valid and user space looks each
 * up once; a stack whose bucket another holds is counted as dropped. */
#define WAKER_STACK_DEPTH 64
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(u32));
	__uint(value_size, WAKER_STACK_DEPTH * sizeof(u64));
} waker_stacks SEC(".maps");

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
 * whose switch builds one. A waker's user stack is built in a slot of its
 * own: a wakeup in task context can come from a thread that preempted one
 * half-way through a sample. */
enum scratch_slot {
	SCRATCH_TASK,
	SCRATCH_IRQ,
	SCRATCH_ITER,
	SCRATCH_WAKER,
	SCRATCH_SLOTS,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SCRATCH_SLOTS);
	__type(key, u32);
	__type(value, struct scratch);
} scratch_map SEC(".maps");

/* What the CPU's last switch-in left for the hooks on the way back to user
 * space, which run at every return of every thread and look here before
 * looking up the thread's state (0: nothing): the thread whose blocked
 * sample was parked (a thread that leaves the CPU first has its sample
 * emitted at the switch-out), and the thread whose run is in its kernel
 * part (see on_cpu.bpf.h). */
struct switch_hints {
	u32 parked;
	u32 kernel_part;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct switch_hints);
} switch_hints SEC(".maps");

/* Records not written, per cause and record kind (see enum lost_cause). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOST_CAUSES * REC_KIND_SLOTS);
	__type(key, u32);
	__type(value, u64);
} lost SEC(".maps");

static __always_inline struct switch_hints *this_switch_hints(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&switch_hints, &zero);
}

static __always_inline u32 *this_parked_tid(void)
{
	struct switch_hints *h = this_switch_hints();

	return h ? &h->parked : NULL;
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
	return tgid_tracked(t->tgid) && task_in_cgroup(t);
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

static __always_inline struct thread_state *state_of(struct task_struct *t, bool create)
{
	return bpf_task_storage_get(&threads, t, 0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}
