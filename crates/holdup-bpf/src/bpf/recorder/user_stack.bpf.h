/*
 * The user half of a stack, read while the kernel lets us: a frame-pointer
 * walk (cheap, and right for code built with frame pointers) plus a copy of
 * the top of the stack, which user space unwinds with CFI for code without
 * them (Debian's libc). The copy is cut at the last frame record it holds,
 * so that a shallow stack does not ship bytes nobody will unwind.
 */

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
