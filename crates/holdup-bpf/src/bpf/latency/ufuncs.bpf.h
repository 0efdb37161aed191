/*
 * User functions, uprobe to uretprobe, and DARC's descent below them. A
 * root's call opens a per-thread accumulator; a callee is timed only while
 * a root call is open and only on a call path of the ftree the loader gave
 * (call-path filtering keeps callees called from elsewhere out), and its time
 * goes to its path's node. At the root's return the nodes' times go to the
 * bucket of the root call, with DARC's per-call decision of which path
 * contributed most, so a peak can be followed down to what made it.
 */

struct ufunc_start {
	u64 time;
	u32 depth;		/* recursive calls open inside this one */
	u16 fnode;		/* a callee's call path */
	u16 saved;		/* the caller's call path, restored at return */
	struct causes snap;
};

/* The open root call of a thread: the current call path (DARC's
 * current_fnode) and the time of each call path in this root call. */
struct callee_acc {
	u32 open;
	u32 root;
	u32 cur;
	u32 root_node;
	struct lat_callee_time fnode[LAT_FNODES];
	/* Scratch of the root's return, per node: its timed callees' time,
	 * the largest of them and which, and whether the node was the
	 * largest contributor below its parent (bit 0) and its own time the
	 * largest below itself (bit 1). */
	u64 kids_ns[LAT_FNODES];
	u64 best_ns[LAT_FNODES];
	u8 best[LAT_FNODES];
	u8 won[LAT_FNODES];
};

/* The ftree: (parent node, function) → child node. A callee called on
 * any other path is not timed (DARC's call-path filtering). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LAT_FNODES);
	__type(key, struct lat_fnode_key);
	__type(value, u32);
} fnode_children SEC(".maps");

/* Each root's node, by the root's operation id. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LAT_UFUNCS);
	__type(key, u32);
	__type(value, u32);
} root_fnodes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct callee_acc);
} callee_accs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct lat_callee_key);
	__type(value, struct lat_callee_time);
} callee_times SEC(".maps");

/* Open user-function calls: (tid << 32 | op) → start. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct ufunc_start);
} ufunc_starts SEC(".maps");

/* Calls this long or longer are said in slow_call (0: none is watched). */
const volatile u64 slow_ns = 0;
struct lat_slow slow_call = {};

/* The first call at least slow_ns long, for a trigger to find. */
static __always_inline void note_slow(u64 id, u32 op, u64 now, u64 delta)
{
	if (!slow_ns || delta < slow_ns || slow_call.ns)
		return;
	slow_call.tgid = id >> 32;
	slow_call.tid = (u32)id;
	slow_call.id = op;
	slow_call.end = now;
	/* ns last: a reader that sees it sees the rest (stores stay in
	 * order on x86; this keeps the compiler from moving them). */
	asm volatile("" ::: "memory");
	slow_call.ns = delta;
}

/* Open user-function calls; a recursive call only counts its depth, so
 * the outermost call keeps its start. */
SEC("uprobe")
int lat_ufunc_enter(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 cookie = bpf_get_attach_cookie(ctx);
	u32 op = cookie & LAT_UFUNC_ID_MASK;
	struct ufunc_start start = {}, *open;
	struct callee_acc *acc = NULL;
	struct thread_starts *s;
	u32 *child = NULL;
	u64 key;

	if (!tgid_tracked(id >> 32))
		return 0;
	key = (id << 32) | op;
	open = bpf_map_lookup_elem(&ufunc_starts, &key);
	if (open) {
		open->depth++;
		return 0;
	}
	if (cookie & LAT_UFUNC_CALLEE) {
		/* Call-path filtering: only inside a call of a root, on a
		 * path of the ftree. */
		struct lat_fnode_key fk = { .func = op };

		acc = bpf_task_storage_get(&callee_accs, bpf_get_current_task_btf(), 0, 0);
		if (!acc || !acc->open)
			return 0;
		fk.parent = acc->cur;
		child = bpf_map_lookup_elem(&fnode_children, &fk);
		if (!child || *child >= LAT_FNODES)
			return 0;
		start.fnode = *child;
		start.saved = acc->cur;
	}
	s = own_starts(true);
	if (s)
		start.snap = s->off;
	start.time = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&ufunc_starts, &key, &start, BPF_ANY)) {
		count_lost(LAT_LOST_START_FULL);
		return 0;
	}
	if (acc && child) {
		acc->cur = *child;
	} else if (cookie & LAT_UFUNC_ROOT) {
		u32 *root = bpf_map_lookup_elem(&root_fnodes, &op);

		acc = bpf_task_storage_get(&callee_accs, bpf_get_current_task_btf(), 0,
					   BPF_LOCAL_STORAGE_GET_F_CREATE);
		/* Without it, the call's callees go untimed. */
		if (!acc)
			count_lost(LAT_LOST_START_FULL);
		if (root && acc && !acc->open) {
			acc->open = 1;
			acc->root = op;
			acc->cur = *root;
			acc->root_node = *root;
		}
	}
	return 0;
}

/* DARC's per-call decision: which path below each node contributed most
 * to this root call (the largest of its timed callees, if larger than the
 * node's own time), marked in acc->won. The root's node took the whole
 * call. bpf_loop keeps the verifier from walking all nodes' branches. */
static long sum_kids(u32 i, void *ctx)
{
	struct callee_acc *acc = *(struct callee_acc **)ctx;
	u32 p;
	u64 ns;

	if (i >= LAT_FNODES)
		return 1;
	p = fnode_parent[i];
	ns = acc->fnode[i].ns;
	if (!acc->fnode[i].calls || p >= LAT_FNODES)
		return 0;
	barrier_var(p);
	p &= LAT_FNODES - 1;
	acc->kids_ns[p] += ns;
	if (ns > acc->best_ns[p]) {
		acc->best_ns[p] = ns;
		acc->best[p] = i;
	}
	return 0;
}

static long mark_won(u32 i, void *ctx)
{
	struct callee_acc *acc = *(struct callee_acc **)ctx;
	u64 ns, own;
	u8 won = 0;
	u32 p;

	if (i >= LAT_FNODES)
		return 1;
	if (!acc->fnode[i].calls)
		return 0;
	ns = acc->fnode[i].ns;
	p = fnode_parent[i];
	if (p < LAT_FNODES) {
		barrier_var(p);	/* keep the mask: the verifier lost the bound */
		p &= LAT_FNODES - 1;
		own = acc->fnode[p].ns > acc->kids_ns[p] ? acc->fnode[p].ns - acc->kids_ns[p] : 0;
		if (acc->best[p] == i && ns > own)
			won |= 1;
	}
	own = ns > acc->kids_ns[i] ? ns - acc->kids_ns[i] : 0;
	if (own >= acc->best_ns[i])
		won |= 2;
	acc->won[i] = won;
	return 0;
}

static __always_inline void mark_largest(struct callee_acc *acc, u64 delta)
{
	u32 r = acc->root_node & (LAT_FNODES - 1);

	acc->fnode[r].calls = 1;
	acc->fnode[r].ns = delta;
	bpf_loop(LAT_FNODES, sum_kids, &acc, 0);
	bpf_loop(LAT_FNODES, mark_won, &acc, 0);
}

/* Move the callee times a root call collected into its bucket. */
static __always_inline void flush_callees(struct callee_acc *acc, u32 tgid, u32 slot, u64 delta)
{
	mark_largest(acc, delta);
#pragma clang loop unroll(disable)
	for (u32 i = 0; i < LAT_FNODES; i++) {
		struct lat_callee_time *c = &acc->fnode[i], *t;
		struct lat_callee_key key = {
			.tgid = tgid,
			.root = acc->root,
			.fnode = i,
			.slot = slot,
		};
		u8 won = acc->won[i];

		if (!c->calls)
			continue;
		acc->kids_ns[i] = 0;
		acc->best_ns[i] = 0;
		acc->best[i] = 0;
		acc->won[i] = 0;
		t = bpf_map_lookup_elem(&callee_times, &key);
		if (!t) {
			struct lat_callee_time zero = {};

			bpf_map_update_elem(&callee_times, &key, &zero, BPF_NOEXIST);
			t = bpf_map_lookup_elem(&callee_times, &key);
		}
		if (t) {
			__sync_fetch_and_add(&t->calls, c->calls);
			__sync_fetch_and_add(&t->ns, c->ns);
			for (int k = 0; k < LAT_CAUSES; k++)
				if (c->cause_ns[k])
					__sync_fetch_and_add(&t->cause_ns[k], c->cause_ns[k]);
			if (won & 1)
				__sync_fetch_and_add(&t->largest, 1);
			if (won & 2)
				__sync_fetch_and_add(&t->own_largest, 1);
		} else {
			count_lost(LAT_LOST_HIST_FULL);
		}
		__builtin_memset(c, 0, sizeof(*c));
	}
	acc->open = 0;
}

SEC("uretprobe")
int lat_ufunc_exit(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	u32 cookie = bpf_get_attach_cookie(ctx);
	u32 op = cookie & LAT_UFUNC_ID_MASK;
	u64 key = (id << 32) | op;
	struct ufunc_start *t0;
	struct thread_starts *s;
	struct callee_acc *acc;
	u64 now, delta;

	t0 = bpf_map_lookup_elem(&ufunc_starts, &key);
	if (!t0)
		return 0;
	if (t0->depth) {
		t0->depth--;
		return 0;
	}
	now = bpf_ktime_get_ns();
	delta = now - t0->time;
	s = own_starts(false);
	if (cookie & (LAT_UFUNC_ROOT | LAT_UFUNC_CALLEE))
		acc = bpf_task_storage_get(&callee_accs, bpf_get_current_task_btf(), 0, 0);
	else
		acc = NULL;
	if (cookie & LAT_UFUNC_CALLEE) {
		if (acc && acc->open && t0->fnode < LAT_FNODES) {
			struct lat_callee_time *c = &acc->fnode[t0->fnode];

			acc->cur = t0->saved;
			c->calls++;
			c->ns += delta;
			if (s && s->off.any != t0->snap.any)
				for (int k = 0; k < LAT_CAUSES; k++)
					c->cause_ns[k] += s->off.ns[k] - t0->snap.ns[k];
		}
	} else {
		add(tgid, LAT_UFUNC, op, now, delta, s ? &s->off : NULL, &t0->snap);
		note_slow(id, op, now, delta);
		if (acc && acc->open && acc->root == op)
			flush_callees(acc, tgid, log2_slot(delta, LAT_SLOTS), delta);
	}
	bpf_map_delete_elem(&ufunc_starts, &key);
	return 0;
}
