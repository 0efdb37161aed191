/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * The one header shared by the BPF recorder and its Rust loader: constants and
 * the ring-buffer records. Every record starts with `struct rec_hdr`. build.rs
 * turns it into Rust (bindgen), which src/records.rs wraps; strings are u8
 * arrays so that Rust sees bytes.
 */
#ifndef HOLDUP_INTF_H
#define HOLDUP_INTF_H

#ifndef __KERNEL__
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
#endif

enum consts {
	MAX_KSTACK = 64,	/* kernel frames per sample */
	MAX_FP = 64,		/* frame-pointer links walked in the user stack */
	STACK_COPY_MAX = 4096,	/* bytes of user stack copied for CFI unwinding */
	COMM_LEN = 16,
	PATH_LEN = 256,
	MAX_CPUS = 1024,
	MAX_PY_FRAMES = 64,	/* interpreter frames walked per sample (python.bpf.h) */
	PY_NAME_MAX = 128,	/* bytes of a code object's qualified name copied */
	PY_FILE_MAX = 256,	/* bytes of its file name */
	PY_TABLE_MAX = 2048,	/* bytes of its line table */
	MAX_GO_FRAMES = 48,	/* frames of a parked goroutine's stack (goroutines.bpf.h) */
};

enum rec_kind {
	REC_SAMPLE = 1,		/* on-CPU sample or blocked sample, with stacks */
	REC_SEGMENT = 2,	/* one off-CPU interval, no stacks */
	REC_FORK = 3,
	REC_EXEC = 4,
	REC_COMM = 5,
	REC_EXIT = 6,
	REC_BIO_ISSUE = 7,
	REC_BIO_DONE = 8,
	REC_PY_CODE = 9,	/* a Python code object seen for the first time */
	REC_WAKER_USTACK = 10,	/* a waker's user stack at a wakeup (struct sample_rec) */
	REC_GO_WAIT = 11,	/* a goroutine's park that passed a sampling point */
};

/* Sample classes. CLASS_CPU is an on-CPU sample, the rest are blocked subclasses. */
enum sample_class {
	CLASS_CPU = 0,
	CLASS_IO = 1,
	CLASS_LOCK = 2,
	CLASS_SCHED = 3,
	CLASS_OTHER = 4,
};

/* Who made a thread runnable. */
enum waker_kind {
	WAKER_NONE = 0,		/* preempted: never slept, nobody woke it */
	WAKER_THREAD = 1,	/* waker_id = tid */
	WAKER_IRQ = 2,		/* waker_id = irq number, IRQ_IPI, or IRQ_UNKNOWN */
	WAKER_SOFTIRQ = 3,	/* waker_id = softirq vector */
	WAKER_TIMER = 4,	/* an hrtimer or the tick, in hard-irq context */
};

/* waker_id of WAKER_IRQ for wakeups from inter-processor interrupts (a
 * completion handed to the submitting CPU) and from unknown vectors. */
#define IRQ_IPI 0xfffffffeU
#define IRQ_UNKNOWN 0xffffffffU

/* The cpu of a segment or blocked sample whose interval was still open at
 * the end of the recording (never switched in). */
#define CPU_OPEN 0xffff

enum sample_flags {
	SF_KSTACK_LEAF_IS_IP = 1 << 0,	/* kstack[0] is the interrupted IP, not a return address */
	SF_USER_REGS = 1 << 1,		/* ip/sp/bp are the thread's user registers */
	SF_BLOCKED_TAIL = 1 << 2,	/* emitted at end of recording: interval still open */
	SF_LATE_USTACK = 1 << 3,	/* user stack captured after the thread had run again */
	SF_EXIT_TAIL = 1 << 4,		/* on-CPU points a thread had not been sampled for at its exit */
	SF_SEGMENT = 1 << 5,		/* also the wait segment of its interval (none is written) */
};

enum bio_op {
	BIO_READ = 0,
	BIO_WRITE = 1,
	BIO_FLUSH = 2,
	BIO_DISCARD = 3,
	BIO_OTHER = 4,
};

struct rec_hdr {
	u32 kind;
	u32 size;	/* bytes of the whole record */
};

/*
 * On-CPU sample (class CLASS_CPU, `weight` points of the thread's on-CPU
 * clock since its previous sample) or blocked sample. A blocked sample
 * covers one off-CPU interval: [start, wake) in `class` with `weight` sampling
 * points, then [wake, end) runnable with `sched_weight` points. A preempted
 * thread (class CLASS_SCHED) is runnable throughout: weight 0, all points in
 * sched_weight. wake == 0 means no wakeup was seen (the interval is open).
 * Variable tail: kstack[kstack_len], then fp[fp_len] (pairs: frame address,
 * return address), then copy_len bytes of user stack starting at sp, then
 * py[py_len] (struct py_frame): the CPython frames of the thread, innermost
 * first, when its process runs an interpreter the recorder knows.
 */
struct sample_rec {
	struct rec_hdr hdr;
	u32 pid;
	u32 tid;
	u64 start;
	u64 wake;
	u64 end;
	u64 ip;
	u64 sp;
	u64 bp;
	u32 weight;
	u32 sched_weight;
	u32 waker_id;
	u16 cpu;
	u8 class;
	u8 waker_kind;
	u16 flags;
	u16 kstack_len;
	u16 fp_len;
	u16 copy_len;
	u16 py_len;
	u16 _pad;
	/* The waker's kernel and user stacks at the wakeup (ids in the
	 * waker_stacks map plus one, 0: none) and its process, for a wait a
	 * thread ended in task context. A waker_ustack with WAKER_USTACK_REC
	 * set is no id: its user stack is the REC_WAKER_USTACK record of the
	 * same number (the rest of the bits) for this thread. */
	u32 waker_kstack;
	u32 waker_ustack;
	u32 waker_pid;
};

/* waker_ustack of a sample whose waker's user stack came as a record. */
#define WAKER_USTACK_REC 0x80000000U

/*
 * REC_WAKER_USTACK: the user stack of a thread (pid, tid) at its wakeup of
 * thread `waker_id`, as a sample carries one (registers, frame-pointer walk,
 * copy of the stack top: unwound with CFI in user space). `waker_ustack` is
 * the number the wakee's blocked sample names it by (WAKER_USTACK_REC
 * set), `end` the time of the wakeup; no kernel stack.
 */

/* One off-CPU interval of a thread: [start, wake) waiting, [wake, end) runnable. */
struct segment_rec {
	struct rec_hdr hdr;
	u32 pid;
	u32 tid;
	u64 start;
	u64 wake;	/* 0 when preempted */
	u64 end;
	u32 waker_id;
	u16 cpu;	/* CPU it was switched in on */
	u8 class;
	u8 waker_kind;
};

struct fork_rec {
	struct rec_hdr hdr;
	u64 time;
	u32 parent_pid;
	u32 parent_tid;
	u32 pid;
	u32 tid;
	u8 comm[COMM_LEN];
	/* The recorder walks the child's Python frames from its fork, with a
	 * copy of its parent's registration (py_inherit). */
	u8 py_inherited;
	u8 _pad[7];
};

struct exec_rec {
	struct rec_hdr hdr;
	u64 time;
	u32 pid;
	u32 tid;
	u8 comm[COMM_LEN];
	u8 filename[PATH_LEN];
};

/* REC_COMM (thread renamed) and REC_EXIT share this layout. */
struct task_rec {
	struct rec_hdr hdr;
	u64 time;
	u32 pid;
	u32 tid;
	u8 comm[COMM_LEN];
};

struct bio_rec {
	struct rec_hdr hdr;
	u64 time;
	u64 sector;
	u32 dev;	/* kernel dev_t: major << 20 | minor */
	u32 bytes;
	u32 pid;	/* issuing thread (REC_BIO_ISSUE), 0 for completions */
	u32 tid;
	u8 op;
	u8 tracked;	/* issuer belongs to the recorded target */
	u16 error;
	u32 _pad;
};

/* ---- CPython frames (python.bpf.h) ---- */

/* What each recorded interpreter frame says. */
enum py_frame_flags {
	PYF_GROUP_END = 1 << 0,	/* the last frame one evaluator call runs: the
				 * next is run by another _PyEval_EvalFrameDefault */
};

/* One interpreter frame: its code object and the instruction it is at
 * (3.10: f_lasti, in code units; 3.11+: units from co_code_adaptive).
 * `check` tells code objects apart that had the same address one after
 * the other (see py_code_check). */
struct py_frame {
	u64 code;
	u32 instr;
	u16 flags;
	u16 check;
};

/* How a frame chain is laid out, per interpreter version. */
enum py_layout {
	PY_FRAME_OBJECT = 0,	/* 3.10: PyFrameObject, f_lasti, a group per frame */
	PY_ENTRY_FLAG = 1,	/* 3.11: _PyInterpreterFrame, is_entry ends a group */
	PY_SHIM_OWNER = 2,	/* 3.12+: a frame owned by the C stack ends a group */
};

/*
 * Where the recorder finds one process's interpreter state, set by user
 * space (crates/holdup-record python.rs) from the interpreter's binary:
 * `_PyRuntime`'s address in the process and the offsets of its version.
 */
struct py_config {
	u64 runtime;		/* &_PyRuntime */
	u64 code_type;		/* &PyCode_Type: what a code object's ob_type is */
	u16 version;		/* major << 8 | minor */
	u8 layout;		/* enum py_layout */
	u8 id_is_fsbase;	/* 3.10: thread_id (pthread_self) is matched, not the tid */
	u16 rt_interp_head;	/* _PyRuntime.interpreters.head */
	u16 interp_next;
	u16 interp_threads;	/* PyInterpreterState's first thread state */
	u16 ts_next;
	u16 ts_frame;		/* frame / cframe / current_frame */
	u16 ts_id;		/* native_thread_id, or thread_id on 3.10 */
	u16 cframe_current;	/* current_frame in _PyCFrame; PY_NO_CFRAME: none */
	u16 f_code;
	u16 f_back;
	u16 f_instr;		/* f_lasti (int) or prev_instr / instr_ptr */
	u16 f_entry;		/* is_entry (3.11) or owner (3.12+) */
	u16 co_adaptive;	/* co_code_adaptive (3.11+) */
	u16 co_firstlineno;
	u16 co_filename;
	u16 co_name;		/* co_qualname where there is one */
	u16 co_linetable;
	u16 str_ascii_data;	/* where a compact ASCII string's bytes start */
	u16 str_compact_data;	/* where other compact strings' bytes start */
	u16 frame_read;		/* bytes of a frame that hold every field used */
	u16 code_read;		/* bytes of a code object that hold every field used */
	u16 check_from;		/* the first of them, where a frame's check reads */
	/* Where the GIL is: at this offset of _PyRuntime, or (gil_in_interp)
	 * at the pointer at this offset of the interpreter state; 0: unknown
	 * (its holder is then not looked for). */
	u16 gil;
	u8 gil_in_interp;
	/* The interpreter's count of the code objects it made (3.12+: each
	 * takes its co_version from it and bumps it), which proves a code
	 * object cached across samples is still the one at its address: at
	 * code_counter, or (counter_in_interp) at that offset of the thread's
	 * interpreter state; 0: none, code objects are checked at every
	 * sample. co_version: where a code object keeps its number. */
	u8 counter_in_interp;
	u16 co_version;
	/* This process's registration, unique in the recording: what its
	 * cached code objects are kept under (a pid can be reused, a forked
	 * child shares its parent's addresses). */
	u32 serial;
	u64 code_counter;
	/* The code objects of this process freed since it was set, counted by
	 * a uprobe on the code type's deallocator (py_code_freed) when
	 * frees_counted: while it stays the same, no code object's memory was
	 * given to another, so what a walk learnt of one still holds. Proves
	 * what the count above does, for every version, without a read of the
	 * process's memory; preferred to it. */
	u32 code_frees;
	u8 frees_counted;
	u8 _pad[3];
};

#define PY_NO_CFRAME 0xffff

/* Counts of the frame walks, per CPU (python.bpf.h). */
struct py_counts {
	u64 samples;		/* samples of threads with a thread state */
	u64 frames;
	u64 no_tstate;		/* thread state searches that found none */
	u64 stale_tstate;	/* a cached thread state that was another thread's */
	u64 truncated;		/* walks that reached MAX_PY_FRAMES */
	u64 bad_pointer;	/* walks ended by an unreadable or misaligned frame */
	u64 loops;		/* walks ended by a frame that points back */
	u64 codes;		/* code records written */
	u64 not_code;		/* frames whose code is no code object */
	u64 cached;		/* frames whose code object was known from a sample before */
	u64 counter_wrong;	/* a code object newer than its interpreter's count of them */
	u64 frees;		/* code objects freed in walked processes (py_code_freed) */
	u64 forks;		/* registrations copied to a forked child (py_inherit) */
};

/*
 * REC_PY_CODE: a code object of process pid, the first time a sample had it
 * (again if its address was reused, as far as the recorder can tell).
 * Strings are copied raw: `*_kind` is the width of a character (1, 2, 4),
 * their lengths are bytes copied; the line table is copied up to
 * PY_TABLE_MAX (`cut` when longer). `units`: the code's length in code units.
 */
struct py_code_rec {
	struct rec_hdr hdr;
	u64 code;
	u32 pid;
	s32 firstlineno;
	u32 units;
	u16 version;
	u16 name_len;
	u16 file_len;
	u16 table_len;
	u8 name_kind;
	u8 file_kind;
	u8 cut;
	u8 _pad;
	u16 check;
	u16 _pad2[3];
	u8 name[PY_NAME_MAX];
	u8 file[PY_FILE_MAX];
	u8 table[PY_TABLE_MAX];
};

/* ---- Go goroutines (record --goroutines, goroutines.bpf.h) ---- */

/*
 * Where the recorder finds what it reads of one Go process's goroutines,
 * set by user space (crates/holdup-record goroutines.rs) from the binary's
 * version: offsets in the runtime's `g` (goroutine) and `m` (OS thread).
 */
struct go_config {
	u16 g_m;		/* g.m: the M it runs on */
	u16 g_sched_sp;		/* g.sched.sp / pc / bp: where it parked */
	u16 g_sched_pc;
	u16 g_sched_bp;
	u16 g_goid;
	u16 m_curg;		/* m.curg: the goroutine the M runs */
	u16 pd_fd;		/* runtime.pollDesc.fd */
	u16 _pad;
};

/* Counts of the goroutine probes, per CPU. */
struct go_counts {
	u64 parks;		/* gopark hits */
	u64 readies;		/* ready hits for a goroutine seen parking */
	u64 runs;		/* execute hits for a goroutine seen parking */
	u64 records;		/* go_wait records written */
	u64 bad_layout;		/* parks whose g.m.curg was not the g: offsets wrong */
	u64 no_slot;		/* parks not followed: the goroutine table was full */
	u64 truncated;		/* stacks cut at MAX_GO_FRAMES */
};

/* Flags of a goroutine wait. */
enum go_wait_flags {
	GOW_IO_FD = 1 << 0,	/* fd is what the network poller waited on */
};

/*
 * REC_GO_WAIT: goroutine goid of process pid parked on OS thread tid at
 * `start` for wait reason `reason` (the runtime's waitReason number), was
 * made ready at `wake` by goroutine waker_goid (0: none known, as for the
 * network poller and timers run by the scheduler) on thread waker_tid,
 * and ran again at `end`. Sampling points as a blocked sample's: `weight`
 * before the wakeup, `sched_weight` after. pc[frames]: where it parked,
 * then return addresses, innermost first (variable tail).
 */
struct go_wait_rec {
	struct rec_hdr hdr;
	u32 pid;
	u32 tid;
	u64 goid;
	u64 start;
	u64 wake;
	u64 end;
	u64 waker_goid;
	u32 waker_tid;
	u32 weight;
	u32 sched_weight;
	s32 fd;
	u8 reason;
	u8 flags;
	u16 frames;
	u32 _pad;
	u64 pc[MAX_GO_FRAMES];
};

/* ---- System calls (record --syscalls), DeBox-style ---- */

/* Record kinds 16..19 belong to the system-call recorder. */
enum syscall_rec_kind {
	REC_SYSCALL_STACK = 16,	/* a struct sample_rec: the stack of the next REC_SYSCALL */
	REC_SYSCALL = 17,	/* one invocation, struct syscall_rec */
	REC_WAKER_STACK = 18,	/* no record: the slot of waker stacks in the lost counts */
	REC_KIND_SLOTS = 32,	/* record kinds are below this */
};

/*
 * Why a record the recorder saw was not written. The `lost` map counts per
 * cause and record kind, at cause * REC_KIND_SLOTS + kind: a sample lost to
 * a full ring buffer is (LOST_RING_FULL, REC_SAMPLE); a context switch of a
 * thread whose state could not be allocated loses its interval's wait
 * segment and blocked sample, (LOST_NO_STATE, REC_SEGMENT).
 */
enum lost_cause {
	LOST_RING_FULL = 0,	/* the ring buffer was full */
	LOST_NO_STATE = 1,	/* the kernel could not allocate the thread's state */
	LOST_TABLE_FULL = 2,	/* a kernel table (system-call totals) was full */
	LOST_STACK_TABLE = 3,	/* the waker stacks table had no room for a stack */
	LOST_CAUSES = 4,
};

enum syscall_consts {
	SYS_KSTACK = 32,	/* kernel frames kept of an invocation's longest sleep */
	SYS_HIST = 48,		/* log2 buckets of wall time: [2^k, 2^(k+1)) ns */
};

/*
 * One system call invocation: [start, end) of thread tid. blocked[] is its
 * off-CPU time by subclass (index = class - 1: io, lock, sched, other); the
 * rest of the wall time was on a CPU. The waker and the kernel stack (in
 * the REC_SYSCALL_STACK record before this one, with the user stack at
 * sys_exit) are those of its longest sleep. `sampled`: kept as one of every
 * N ordinary invocations rather than for being slow, blocked or faulting.
 */
struct syscall_rec {
	struct rec_hdr hdr;
	u32 pid;
	u32 tid;
	u64 start;
	u64 end;
	u64 blocked[4];
	u32 nr;
	u32 sleeps;
	u32 min_flt;
	u32 maj_flt;
	u32 waker_id;
	u8 waker_kind;
	u8 sampled;
	u16 _pad;
};

/*
 * In-band results (record --syscalls --inband): the last system call of a
 * thread, written at its sys_exit into slot `tid % DEBOX_SLOTS` of a map
 * that the program maps read-only (include/holdup_debox.h, which mirrors
 * this layout). blocked_ns[] as in struct syscall_rec; seq counts the calls
 * written to the slot.
 */
#define DEBOX_SLOTS 32768
struct debox_info {
	u64 seq;
	u64 start_ns;
	u64 wall_ns;
	u64 blocked_ns[4];
	u32 tid;
	u32 nr;
	u32 sleeps;
	u32 min_flt;
	u32 maj_flt;
	u32 _pad;
};

/* Exact per-process per-call totals, kept in a per-CPU hash map. */
struct syscall_key {
	u32 pid;
	u32 nr;
};

struct syscall_totals {
	u64 count;
	u64 total_ns;
	u64 blocked[4];
	u64 min_flt;
	u64 maj_flt;
	u64 hist[SYS_HIST];
};

/* How the kernel stacks of blocked samples were taken, per CPU. */
struct kstack_counts {
	u64 walked;
	u64 reused;
	u64 checked;		/* reuses walked anyway, to compare */
	u64 differed;		/* checks that found the reused stack wrong */
	u64 shared;		/* taken from another thread's walk */
};

/* Blocked-sample stacks under a stack budget, per CPU: the intervals that
 * passed a sampling point, those whose stacks were taken, and their points
 * by class (index: CLASS_*): of every interval (exact), and of the samples
 * written (scaled by the ratio they were taken at). */
struct stack_budget_counts {
	u64 intervals;
	u64 stacks;
	u64 waker_stacks;
	u64 points[8];
	u64 scaled[8];
};

#endif /* HOLDUP_INTF_H */
