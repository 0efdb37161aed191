/*
 * CPython frames, read at the sample from the interpreter's own structures
 * (no flags, no help from the program), for the processes whose interpreter
 * user space recognised (struct py_config in py_procs).
 *
 * The thread state is found by walking the interpreter's list of them and
 * matching the sampled thread (native_thread_id, or on 3.10 thread_id, which
 * is pthread_self: the thread pointer). Thread-local and global "current
 * thread state" variables are no use here: they are NULL or the GIL holder's
 * while a thread waits, which is when blocked samples are taken. The match is
 * kept per thread and checked with the read that fetches the frame pointer.
 *
 * The frame chain is then walked, recording (code object, instruction,
 * whether the frame ends one evaluator call): from 3.11 most frames come
 * from one read of the interpreter's data stack (see py_window), the others
 * from one read each; a code object is read (its identifying fields, see
 * py_code) only when no walk before proved it is the one at its address
 * (see py_code_known: no code object of the process was freed since, or,
 * without the uprobe that counts frees, none was made). Names and line
 * tables are copied
 * once per code object and process, the first time a sample has it (an LRU
 * map remembers which were sent, and their check): at conversion time the
 * process may be gone. User space decodes lines and splices the frames
 * into the native stack.
 *
 * One global function, verified once, whatever the number of places that
 * take a user stack.
 */

#define PY_PROCS_MAX 4096
#define PY_CODES_SEEN_MAX 32768
#define PY_INTERPS_MAX 4
/* Thread states looked at per search, over every interpreter. */
#define PY_SEARCH_MAX 512
/* A thread without a thread state (a native thread, or the interpreter not
 * started yet) is searched for again after this long. */
#define PY_RETRY_NS 20000000ULL
/* Above this, an address is no user-space address (x86-64, 4-level). */
#define PY_USER_TOP 0x800000000000ULL
/* _PyInterpreterFrame.owner of the shim frame a C call pushes (3.12+). */
#define PY_OWNED_BY_CSTACK 3
/* struct _gil_runtime_state (3.10 to 3.13): its size, and where it keeps
 * the thread state that holds it or held it last. */
#define PY_GIL_SIZE 208
#define PY_GIL_LAST_HOLDER 8

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PY_PROCS_MAX);
	__type(key, u32);
	__type(value, struct py_config);
} py_procs SEC(".maps");

struct py_code_key {
	u64 code;
	u32 pid;
	u32 _pad;
};

/* A code object sent: the hash of its identifying fields (py_code_check),
 * and the check its frames carry. */
struct py_code_seen {
	u16 hash;
	u16 check;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PY_CODES_SEEN_MAX);
	__type(key, struct py_code_key);
	__type(value, struct py_code_seen);
} py_codes_seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct py_counts);
} py_counts_map SEC(".maps");

static __always_inline struct py_counts *py_counts(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&py_counts_map, &zero);
}

/* The u64 at `off` of a buffer read from the interpreter. */
static __always_inline u64 py_u64(u8 *buf, u32 off)
{
	return *(u64 *)(buf + (off & PY_FIELD_MASK));
}

static __always_inline u32 py_u32(u8 *buf, u32 off)
{
	return *(u32 *)(buf + (off & PY_FIELD_MASK));
}

static __always_inline u8 py_u8(u8 *buf, u32 off)
{
	return buf[off & PY_FIELD_MASK];
}

static __always_inline bool py_pointer_ok(u64 p)
{
	return p && !(p & 7) && p < PY_USER_TOP;
}

static __always_inline long py_read(void *dst, u32 size, u64 src)
{
	return bpf_probe_read_user(dst, size & PY_FIELD_MASK, (void *)src);
}

/* ---- the thread state ---- */

struct py_search {
	struct py_config *cfg;
	u64 want;		/* the thread's id as the interpreter has it */
	u64 interp;
	u64 ts;
	u64 found;
	u32 interps;
};

static long py_search_step(u64 i, struct py_search *q)
{
	struct py_config *c = q->cfg;
	u64 v = 0;

	if (!q->ts) {
		/* The next interpreter, and its first thread state. */
		if (q->interps >= PY_INTERPS_MAX)
			return 1;
		if (q->interps == 0)
			bpf_probe_read_user(&v, 8, (void *)(c->runtime + c->rt_interp_head));
		else
			bpf_probe_read_user(&v, 8, (void *)(q->interp + c->interp_next));
		q->interps++;
		q->interp = v;
		if (!py_pointer_ok(v))
			return 1;
		v = 0;
		bpf_probe_read_user(&v, 8, (void *)(q->interp + c->interp_threads));
		q->ts = py_pointer_ok(v) ? v : 0;
		return 0;
	}
	if (!bpf_probe_read_user(&v, 8, (void *)(q->ts + c->ts_id)) && v == q->want) {
		q->found = q->ts;
		return 1;
	}
	v = 0;
	bpf_probe_read_user(&v, 8, (void *)(q->ts + c->ts_next));
	q->ts = py_pointer_ok(v) && v != q->ts ? v : 0;
	return 0;
}

/* The thread's frame pointer from its thread state `ts`, or 0 when the
 * state is no longer the thread's (`want` is its id). Reads the state from
 * its frame field to its id field at once. */
static __always_inline u64 py_current_frame(struct scratch *s, struct py_config *c, u64 ts,
					    u64 want, bool *stale)
{
	u32 span = c->ts_id + 8 - c->ts_frame;
	u64 frame;

	*stale = false;
	if (c->ts_id < c->ts_frame || span > PY_FIELD_MASK)
		return 0;
	if (py_read(s->py_buf, span, ts + c->ts_frame)) {
		*stale = true;
		return 0;
	}
	if (py_u64(s->py_buf, c->ts_id - c->ts_frame) != want) {
		*stale = true;
		return 0;
	}
	frame = py_u64(s->py_buf, 0);
	if (c->cframe_current != PY_NO_CFRAME && frame) {
		u64 cframe = frame;

		frame = 0;
		bpf_probe_read_user(&frame, 8, (void *)(cframe + c->cframe_current));
	}
	return frame;
}

/* ---- code objects ---- */

/*
 * What tells two code objects at the same address apart: the pointers to
 * their file name, name and line table, and their first line, from a
 * buffer read at `base` of the code object, and from 3.12 the number the
 * object took at its making (co_version), which no two objects made within
 * 65536 of each other share even when their strings took the same
 * memory. Code objects are freed (a module's body once it ran, functions
 * made at run time) and their memory reused, and the recorder must not
 * name the new one with the old one's name.
 */
static __always_inline u16 py_code_check(u8 *buf, struct py_config *c, u32 base)
{
	u64 h = py_u64(buf, c->co_filename - base) * 0x9e3779b97f4a7c15ULL;
	u16 number = c->co_version ? py_u32(buf, c->co_version - base) : 0;

	h ^= py_u64(buf, c->co_name - base) * 0xc2b2ae3d27d4eb4fULL;
	h ^= py_u64(buf, c->co_linetable - base) * 0x165667b19e3779f9ULL;
	h ^= py_u32(buf, c->co_firstlineno - base);
	return ((h >> 48) ^ (h >> 32) ^ (h >> 16) ^ h ^ number) & 0xffff;
}

/* Copy the compact string object at `str` (its characters, raw) into `dst`
 * of `max` bytes; returns the bytes copied and sets the character width. */
static __always_inline u32 py_copy_string(struct scratch *s, struct py_config *c, u64 str,
					  u8 *dst, u32 max, u8 *kind)
{
	u64 len;
	u32 state, bytes;

	*kind = 1;
	if (!py_pointer_ok(str) || py_read(s->py_buf, 40, str))
		return 0;
	len = py_u64(s->py_buf, 16);
	state = py_u32(s->py_buf, 32);
	/* state: interned:2, kind:3, compact:1, ascii:1 */
	if (!((state >> 5) & 1))
		return 0;
	*kind = (state >> 2) & 7;
	if (*kind != 1 && *kind != 2 && *kind != 4)
		return 0;
	bytes = len > max ? max : len * *kind;
	if (bytes > max)
		bytes = max;
	if (bpf_probe_read_user(dst, bytes,
				(void *)(str + ((state >> 6) & 1 ? c->str_ascii_data :
								   c->str_compact_data))))
		return 0;
	return bytes;
}

/* The check of the code object at `code` (one read of the fields it
 * hashes), or -1 when it cannot be read. */
static __always_inline int py_check_of(struct scratch *s, struct py_config *c, u64 code)
{
	if (py_read(s->py_code_buf, c->code_read - c->check_from, code + c->check_from))
		return -1;
	return py_code_check(s->py_code_buf, c, c->check_from);
}

enum py_sent {
	PY_SENT,		/* now or before */
	PY_LOST,		/* the ring was full: to be sent again */
	PY_NO_CODE,		/* no code object: the walk went astray */
};

/* Send the code object `code` of process `pid`, whose fields hash to
 * `hash`, unless sent before; `*check` is what its frames carry.
 *
 * Where the process's frees are counted, a code object freed takes its
 * entry with it (py_code_freed), and the next one at its address gets a
 * check of its own, the count of frees mixed in: the hash alone may be
 * the same, the new object's name and line table having taken the memory
 * of the old one's too (3.11, which numbers no code object). Elsewhere the
 * check is the hash. */
static __always_inline enum py_sent py_send_code(struct scratch *s, struct py_config *c, u32 pid,
					 u64 code, u16 hash, u16 *check)
{
	struct py_code_key key = { .code = code, .pid = pid };
	struct py_code_seen *seen, sent = { .hash = hash, .check = hash };
	struct py_code_rec *r;
	struct py_counts *n;
	u64 table, size;

	seen = bpf_map_lookup_elem(&py_codes_seen, &key);
	if (seen && seen->hash == hash) {
		*check = seen->check;
		return PY_SENT;
	}
	if (c->frees_counted)
		sent.check ^= (u16)((*(volatile u32 *)&c->code_frees * 0x9e3779b1U) >> 16);
	*check = sent.check;
	if (py_read(s->py_code_buf, c->code_read, code))
		return PY_NO_CODE;
	if (py_u64(s->py_code_buf, 8) != c->code_type) {
		n = py_counts();
		if (n)
			n->not_code++;
		return PY_NO_CODE;
	}
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_lost(LOST_RING_FULL, REC_PY_CODE);
		return PY_LOST;
	}
	r->hdr.kind = REC_PY_CODE;
	r->hdr.size = sizeof(*r);
	r->code = code;
	r->check = sent.check;
	__builtin_memset(r->_pad2, 0, sizeof(r->_pad2));
	r->pid = pid;
	r->version = c->version;
	r->firstlineno = py_u32(s->py_code_buf, c->co_firstlineno);
	/* 3.11+: a code object is sized in code units; 3.10's is not sized. */
	r->units = c->layout == PY_FRAME_OBJECT ? 0 : py_u64(s->py_code_buf, 16);
	r->name_len = py_copy_string(s, c, py_u64(s->py_code_buf, c->co_name), r->name,
				     PY_NAME_MAX, &r->name_kind);
	r->file_len = py_copy_string(s, c, py_u64(s->py_code_buf, c->co_filename), r->file,
				     PY_FILE_MAX, &r->file_kind);
	table = py_u64(s->py_code_buf, c->co_linetable);
	size = 0;
	r->table_len = 0;
	r->cut = 0;
	r->_pad = 0;
	if (py_pointer_ok(table) && !bpf_probe_read_user(&size, 8, (void *)(table + 16))) {
		if (size > PY_TABLE_MAX) {
			size = PY_TABLE_MAX;
			r->cut = 1;
		}
		if (!bpf_probe_read_user(r->table, size, (void *)(table + 32)))
			r->table_len = size;
	}
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	bpf_map_update_elem(&py_codes_seen, &key, &sent, BPF_ANY);
	n = py_counts();
	if (n)
		n->codes++;
	return PY_SENT;
}

/* The `counter` of a walk whose proof is the count of code objects freed
 * (py_config.code_frees): no user-space address. */
#define PY_FREES_PROOF 1

/* code_dealloc(co), the code type's deallocator, in a process whose frames
 * are walked: a code object is about to be freed, and its memory may then
 * hold another one. Runs before the free, so a walk that reads the count
 * unchanged afterwards knows that no code object it met was replaced. */
SEC("uprobe")
int py_code_freed(struct pt_regs *ctx)
{
	u32 pid = bpf_get_current_pid_tgid() >> 32;
	struct py_config *c = bpf_map_lookup_elem(&py_procs, &pid);
	struct py_code_key key = { .code = ctx->di, .pid = pid };
	struct py_counts *n;

	if (!c)
		return 0;
	__sync_fetch_and_add(&c->code_frees, 1);
	/* The next object at this address is sent as a new one. */
	bpf_map_delete_elem(&py_codes_seen, &key);
	n = py_counts();
	if (n)
		n->frees++;
	return 0;
}

/* ---- the frame chain ---- */

enum py_walk_end {
	PY_END_CHAIN,		/* the first frame of the thread */
	PY_END_TRUNCATED,
	PY_END_BAD_POINTER,
	PY_END_LOOP,
	PY_END_NOT_CODE,
};

/* What a walk knows of its process's code objects (py_code). */
struct py_codes {
	u64 counter;		/* where the count of code objects was read (0:
				 * none; PY_FREES_PROOF: the count of frees) */
	u32 count;		/* what it was */
	u32 serial;
	u32 walk;
	u32 pid;
	u32 cached;		/* frames whose code object an earlier walk proved */
	u32 count_wrong;
};

struct py_walk {
	struct scratch *s;
	struct py_config *cfg;
	u64 frame;
	u64 last;		/* the frame before, to see a chain point back */
	struct py_codes codes;
	u32 n;
	u32 end;		/* enum py_walk_end */
};

/*
 * From 3.11 a thread's frames lie one after the other in the interpreter's
 * data stack, the caller's below the callee's: one read of the stack below
 * the innermost frame `f` brings most of the chain, where a read per frame
 * cost about as much as the rest of the sample (a user read's cost is
 * mostly fixed). Frames elsewhere (a generator's, the shim a C call pushes
 * on the C stack, a new chunk of the data stack) are read one by one.
 *
 * The window starts at the lowest frame the thread's last walk found
 * (`low`, its outermost in the data stack, mostly), so that it is no longer
 * than the chain and never reaches below the data stack, whose first page
 * may have nothing mapped below it: a read that faults costs more than the
 * walk. Without one, or when that read fails, it starts PY_STACK_MAX below,
 * then at f's page.
 */
static __always_inline void py_window(struct scratch *s, struct py_config *c,
				      struct thread_state *st, u64 f)
{
	u64 top = f + c->frame_read, low = st->py_low;
	u32 len = PY_STACK_MAX;

	s->py_len = 0;
	s->py_top = top;
	s->py_low = 0;
	if (c->layout == PY_FRAME_OBJECT || !py_pointer_ok(f) || top < len)
		return;
	if (low && low <= f && top - low < len)
		len = top - low;
	if (bpf_probe_read_user(s->py_stack, len, (void *)(top - len))) {
		len = PY_STACK_MAX;
		if (top - (f & ~4095ULL) < len)
			len = top - (f & ~4095ULL);
		if (bpf_probe_read_user(s->py_stack, len, (void *)(top - len)))
			return;
	}
	s->py_lo = top - len;
	s->py_len = len;
}

/* The frame at `f`: from the window when it lies in it, else read into
 * s->py_buf; NULL when it cannot be read. */
static __always_inline u8 *py_frame_at(struct scratch *s, struct py_config *c, u64 f)
{
	u64 off = f - s->py_lo, top = s->py_top;
	u8 *buf;

	if (f >= s->py_lo && off + c->frame_read <= s->py_len)
		buf = s->py_stack + (off & (PY_STACK_MAX - 1));
	else if (py_read(s->py_buf, c->frame_read, f))
		return NULL;
	else
		buf = s->py_buf;
	if (f <= top - c->frame_read && top - f <= PY_STACK_MAX && (!s->py_low || f < s->py_low))
		s->py_low = f;
	return buf;
}

/* py_code_read's answer, besides the check: not to be cached (its record
 * was lost, to be sent again), or a code object newer than the count of
 * them read before it (the count is not what it was taken for). */
#define PY_NO_CACHE (1 << 16)
#define PY_COUNT_WRONG (1 << 17)

/* The check of code object `code` of process `pid`, read from it, and the
 * object sent to user space unless it was before; -1 when it is no code
 * object. `count`: the interpreter's count of code objects, read before
 * (0: none). */
static __always_inline int py_code_read(struct scratch *s, struct py_config *c, u32 pid, u64 code,
					u32 count)
{
	int hash, flags = 0;
	u16 check = 0;

	hash = py_check_of(s, c, code);
	if (hash < 0)
		return -1;
	/* The code objects on the thread's frames were made before the count
	 * was read, so each has a lower number. */
	if (count && c->co_version && py_u32(s->py_code_buf, c->co_version - c->check_from) >= count)
		flags |= PY_COUNT_WRONG;
	switch (py_send_code(s, c, pid, code, hash, &check)) {
	case PY_SENT:
		return check | flags;
	case PY_LOST:
		return check | flags | PY_NO_CACHE;
	default:
		return -1;
	}
}

/*
 * Whether the cache entry `e` is code object `code` of the walk's process.
 * The thread's frames hold references to their code objects and the thread
 * does not run during the walk, so an entry the same walk made is right.
 * One an earlier walk made is right when the count that proves it is what
 * it was then, at the same place: the process's count of freed code
 * objects (py_code_freed; an object freed since, whose memory another may
 * hold now, bumped it), or else the interpreter's count of the code
 * objects it made (a code object that took the memory of a freed one since
 * was made after, and bumped the count). (The count was read before the
 * object, so a change in between is refused too.) Without either (the
 * uprobe not attached, and 3.10, 3.11, a build whose count is not found, a
 * count run out to 0) entries hold for one walk only, and a recursion's
 * code is read once per walk. What remains: a walk gone
 * astray onto an address that held a code object is not caught by the
 * object's type (it was checked when the entry was made), and the count's
 * place in 3.13 comes from a table, refuted once (py_code_read) if a code
 * object has a number the count has not reached.
 */
static __always_inline bool py_code_known(struct py_codes *k, struct py_cached *e, u64 code)
{
	if (e->code != code || e->serial != k->serial)
		return false;
	if (e->walk == k->walk)
		return true;
	return k->counter && e->count == k->count && e->counter == k->counter;
}

/*
 * The check of code object `code` (see py_code_read), from the scratch's
 * cache when an earlier frame or walk proved it (py_code_known). A global
 * function, verified once, by itself: the verifier goes through the walk's
 * step (a bpf_loop callback) once for each count of frames it can reach,
 * and this function's branches inlined there multiplied that to half a
 * million instructions in each of the five programs that walk, over a
 * second of start-up each.
 */
__noinline int py_code(struct scratch *s, struct py_config *c, struct py_codes *k, u64 code)
{
	struct py_cached *e;
	int check;

	if (!s || !c || !k || !py_pointer_ok(code))
		return -1;
	e = &s->py_cache[((code >> 4) ^ (code >> 12) ^ k->serial) & (PY_CACHE - 1)];
	if (py_code_known(k, e, code)) {
		k->cached += e->walk != k->walk;
		return e->check;
	}
	check = py_code_read(s, c, k->pid, code, k->counter == PY_FREES_PROOF ? 0 : k->count);
	if (check < 0)
		return check;
	if (check & PY_COUNT_WRONG) {
		/* The count is not where it was taken to be: no more proofs
		 * for this process. */
		c->code_counter = 0;
		k->counter = 0;
		k->count = 0;
		k->count_wrong = 1;
	}
	e->code = code;
	e->counter = k->counter;
	e->count = k->count;
	e->serial = k->serial;
	e->walk = k->walk;
	e->check = check;
	if (check & PY_NO_CACHE)
		e->code = 0;
	return check & 0xffff;
}

static long py_frame_step(u64 i, struct py_walk *w)
{
	struct py_config *c = w->cfg;
	struct scratch *s = w->s;
	u64 f = w->frame, code, back, instr;
	u32 n = w->n, flags = 0, idx;
	int check;
	u8 mark, *buf;

	if (!f)
		return 1;
	if (n >= MAX_PY_FRAMES) {
		w->end = PY_END_TRUNCATED;
		return 1;
	}
	buf = py_pointer_ok(f) ? py_frame_at(s, c, f) : NULL;
	if (!buf) {
		w->end = PY_END_BAD_POINTER;
		return 1;
	}
	code = py_u64(buf, c->f_code);
	back = py_u64(buf, c->f_back);
	if (back == f || (back && back == w->last)) {
		w->end = PY_END_LOOP;
		back = 0;
	}
	w->last = f;
	w->frame = back;
	if (c->layout == PY_FRAME_OBJECT) {
		flags = PYF_GROUP_END;
		idx = py_u32(buf, c->f_instr);
	} else {
		mark = py_u8(buf, c->f_entry);
		if (c->layout == PY_SHIM_OWNER && mark == PY_OWNED_BY_CSTACK) {
			/* The frame a C call pushes: it ends the group of the
			 * frames inside it, and is none of the program's. */
			if (n > 0)
				s->py[(n - 1) & (MAX_PY_FRAMES - 1)].flags |= PYF_GROUP_END;
			return w->frame ? 0 : 1;
		}
		if (c->layout == PY_ENTRY_FLAG && mark)
			flags = PYF_GROUP_END;
		instr = py_u64(buf, c->f_instr);
		idx = instr >= code + c->co_adaptive ? (instr - code - c->co_adaptive) / 2 : ~0U;
	}
	check = py_code(s, c, &w->codes, code);
	if (check < 0) {
		w->end = PY_END_NOT_CODE;
		return 1;
	}
	s->py[n & (MAX_PY_FRAMES - 1)].code = code;
	s->py[n & (MAX_PY_FRAMES - 1)].instr = idx;
	s->py[n & (MAX_PY_FRAMES - 1)].flags = flags;
	s->py[n & (MAX_PY_FRAMES - 1)].check = check;
	w->n = n + 1;
	return w->frame ? 0 : 1;
}

/* The count that proves what earlier walks learnt (see py_code_known):
 * the process's count of freed code objects, in the recorder's memory,
 * or the interpreter's count of the code objects it made, one read per
 * walk where each code object not met in it would have one. */
static __always_inline void py_code_count(struct py_codes *k, struct py_config *c,
					  struct thread_state *st)
{
	u64 at = c->code_counter;
	u32 count = 0;

	k->counter = 0;
	k->count = 0;
	if (c->frees_counted) {
		k->counter = PY_FREES_PROOF;
		k->count = *(volatile u32 *)&c->code_frees;
		return;
	}
	if (!at)
		return;
	if (c->counter_in_interp) {
		if (!py_pointer_ok(st->py_interp))
			return;
		at += st->py_interp;
	}
	/* 0: none read, or the count ran out (the interpreter stops it at 0). */
	if (bpf_probe_read_user(&count, 4, (void *)at) || !count)
		return;
	k->counter = at;
	k->count = count;
}

/* The interpreter frames of the task at `task_addr` (current, whose memory
 * is loaded), into s->py; its thread state is cached in `st`. Returns the
 * frames found. */
__noinline int py_capture(struct scratch *s, struct thread_state *st, u64 task_addr)
{
	struct task_struct *task = (struct task_struct *)task_addr;
	struct py_walk w = {};
	struct py_config *c;
	struct py_counts *n;
	u32 pid = BPF_CORE_READ(task, tgid);
	u64 want, ts, now, frame;
	bool stale;

	if (!s || !st)
		return 0;
	c = bpf_map_lookup_elem(&py_procs, &pid);
	if (!c)
		return 0;
	n = py_counts();
	want = c->id_is_fsbase ? BPF_CORE_READ(task, thread.fsbase) : BPF_CORE_READ(task, pid);
	ts = st->py_tstate;
	frame = ts ? py_current_frame(s, c, ts, want, &stale) : 0;
	if (ts && stale) {
		if (n)
			n->stale_tstate++;
		ts = 0;
		st->py_tstate = 0;
		st->py_interp = 0;
		st->py_low = 0;
	}
	if (!ts) {
		struct py_search q = { .cfg = c, .want = want };

		now = bpf_ktime_get_ns();
		if (now < st->py_retry)
			return 0;
		bpf_loop(PY_SEARCH_MAX, py_search_step, &q, 0);
		if (!q.found) {
			st->py_retry = now + PY_RETRY_NS;
			if (n)
				n->no_tstate++;
			return 0;
		}
		ts = q.found;
		st->py_tstate = ts;
		st->py_interp = q.interp;
		frame = py_current_frame(s, c, ts, want, &stale);
	}
	if (n)
		n->samples++;
	w.s = s;
	w.cfg = c;
	w.frame = frame;
	w.codes.pid = pid;
	w.codes.serial = c->serial;
	w.codes.walk = ++s->py_walk;
	py_code_count(&w.codes, c, st);
	py_window(s, c, st, frame);
	bpf_loop(MAX_PY_FRAMES + 1, py_frame_step, &w, 0);
	st->py_low = s->py_low;
	s->rec.py_len = w.n;
	if (n) {
		n->frames += w.n;
		n->cached += w.codes.cached;
		n->counter_wrong += w.codes.count_wrong;
		if (w.end == PY_END_TRUNCATED)
			n->truncated++;
		else if (w.end == PY_END_BAD_POINTER)
			n->bad_pointer++;
		else if (w.end == PY_END_LOOP)
			n->loops++;
	}
	return w.n;
}

/* The interpreter frames of `task`, whose memory is loaded, for the sample
 * in `s`. The task goes to the global function as a number, through the
 * map value (see stack_cut). */
static __always_inline void capture_python(struct scratch *s, struct thread_state *st,
					   struct task_struct *task)
{
	if (task->flags & PF_KTHREAD)
		return;
	s->task = (u64)task;
	py_capture(s, st, *(volatile u64 *)&s->task);
}

/* A lock wait of `task` in the GIL's futex that no thread ended: the GIL's
 * waits are timed (the interpreter's switch interval), and the holder drops
 * it on the request the timeout makes, often with no one asleep to wake.
 * The thread that held the GIL meanwhile kept the waiter from running: it
 * becomes the waker. Called on the way back from the futex call, whose
 * address is still in the saved registers; the GIL's last holder is still
 * the thread that held it (the waiter sets itself only once it has it). */
static __always_inline void py_gil_holder(struct scratch *s, struct task_struct *task)
{
	u32 pid = task->tgid;
	struct py_config *c = bpf_map_lookup_elem(&py_procs, &pid);
	struct pt_regs *regs;
	u64 gil, uaddr, ts = 0, tid = 0, interp = 0;

	if (!c || !c->gil || s->rec.class != CLASS_LOCK || s->rec.waker_kind != WAKER_TIMER)
		return;
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs || (regs->orig_ax != NR_futex && regs->orig_ax != NR_futex_waitv))
		return;
	uaddr = regs->di;
	gil = c->runtime + c->gil;
	if (c->gil_in_interp) {
		bpf_probe_read_user(&interp, 8, (void *)(c->runtime + c->rt_interp_head));
		gil = 0;
		if (!py_pointer_ok(interp) || bpf_probe_read_user(&gil, 8, (void *)(interp + c->gil)))
			return;
	}
	if (!py_pointer_ok(gil) || uaddr < gil || uaddr >= gil + PY_GIL_SIZE)
		return;
	if (bpf_probe_read_user(&ts, 8, (void *)(gil + PY_GIL_LAST_HOLDER)) || !py_pointer_ok(ts))
		return;
	if (bpf_probe_read_user(&tid, 8, (void *)(ts + c->ts_id)) || !tid || tid > 0x7fffffff ||
	    tid == task->pid)
		return;
	s->rec.waker_kind = WAKER_THREAD;
	s->rec.waker_id = tid;
	s->rec.waker_pid = pid;
}

/* Process `tgid` is gone, or replaced its image: its interpreter with it. */
static __always_inline void forget_python(u32 tgid)
{
	bpf_map_delete_elem(&py_procs, &tgid);
}

/* The serials of the registrations forks make (py_inherit), apart from
 * those user space gives, which count up from 1: the CPU, and its count of
 * forks so far. */
#define PY_FORK_SERIAL 0x80000000u
#define PY_FORK_CPU_SHIFT 23

/* Process `child` was forked from `parent`: if the parent's frames are
 * walked, so are the child's, from its first sample, with a copy of the
 * parent's registration (the same interpreter at the same addresses).
 * User space learns of the fork only when it next drains the ring, up to
 * a second later: a worker forked to compute had shown native frames for
 * that long. The copy gets a serial of its own: what the parent learnt of
 * a code object stops holding for the child once either frees one. The
 * count of frees goes on from the parent's; the code-free uprobe is the
 * file's, so it counts the child's from its start. */
static __always_inline bool py_inherit(u32 parent, u32 child)
{
	struct py_config *c = bpf_map_lookup_elem(&py_procs, &parent);
	struct py_counts *n = py_counts();
	struct py_config copy;

	if (!c || !n)
		return false;
	copy = *c;
	copy.serial = PY_FORK_SERIAL | (bpf_get_smp_processor_id() << PY_FORK_CPU_SHIFT) |
		      (n->forks & ((1u << PY_FORK_CPU_SHIFT) - 1));
	if (bpf_map_update_elem(&py_procs, &child, &copy, BPF_ANY))
		return false;
	n->forks++;
	return true;
}
