/*
 * Kernel stacks of blocked samples, reused where the thread (or another on
 * this CPU) blocked before: walking a sleeping thread's stack is the largest
 * fixed cost of a blocked sample, and threads block at few places. See
 * read_kstack for the key and the checks that keep reuse honest.
 */

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
