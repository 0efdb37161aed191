/*
 * Goroutines' blocked time (record --goroutines). A goroutine that waits
 * parks in the Go scheduler (runtime.gopark) while its OS thread runs other
 * goroutines or idles, so no OS wait shows it. Uprobes on the scheduler,
 * attached per process by user space, follow each park: gopark (the wait
 * reason, the parking goroutine in R14), ready (the goroutine made runnable
 * in RAX; ready runs on the M's g0, so the readier is g0.m.curg) and execute
 * (the goroutine about to run again, in RAX). Go passes arguments in
 * registers (ABIInternal, amd64) and keeps the running g in R14.
 *
 * Each goroutine has an off-CPU clock of its own, paid out in sampling
 * points like a thread's (clocks.bpf.h): [park, ready) is blocked, [ready,
 * run) runnable. Only a park that passed a point becomes a record, with the
 * goroutine's stack read at execute from where it parked (g.sched: Go code
 * keeps frame pointers). The probes sit past each function's stack-check
 * prologue: a uprobe on that first instruction (cmp against g.stackguard)
 * is single-stepped, ten times the cost of one on the `push %rbp` after it.
 */

/* One goroutine as the probes follow it. g structs are reused by the
 * runtime after a goroutine exits: the goid tells them apart. */
struct go_key {
	u32 pid;
	u32 _pad;
	u64 g;
};

struct go_g {
	u64 goid;
	u64 park;
	u64 ready;
	u64 credit;		/* its off-CPU clock: time not yet paid out */
	u64 waker_goid;
	u32 park_tid;
	u32 waker_tid;
	s32 fd;			/* netpollblock's descriptor + 1, 0: none */
	u8 reason;
	u8 parked;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct go_key);
	__type(value, struct go_g);
} go_gs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, u32);
	__type(value, struct go_config);
} go_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct go_counts);
} go_counts_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct go_wait_rec);
} go_scratch SEC(".maps");

static __always_inline struct go_counts *go_counts(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&go_counts_map, &zero);
}

static __always_inline u64 go_read(u64 addr)
{
	u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

/* The goroutine the M of `g` runs (g may be the M's g0). */
static __always_inline u64 go_curg(const struct go_config *cfg, u64 g)
{
	u64 m = go_read(g + cfg->g_m);

	return m ? go_read(m + cfg->m_curg) : 0;
}

SEC("uprobe")
int go_park(struct pt_regs *ctx)
{
	u32 pid = bpf_get_current_pid_tgid() >> 32;
	struct go_config *cfg = bpf_map_lookup_elem(&go_procs, &pid);
	struct go_counts *n = go_counts();
	struct go_key key = { .pid = pid, .g = ctx->r14 };
	struct go_g *e, fresh = {};
	u64 goid;

	if (!cfg || !n)
		return 0;
	n->parks++;
	/* The offsets are checked where the answer is known: the parking
	 * goroutine is the one its M runs. */
	if (go_curg(cfg, key.g) != key.g) {
		n->bad_layout++;
		return 0;
	}
	goid = go_read(key.g + cfg->g_goid);
	e = bpf_map_lookup_elem(&go_gs, &key);
	if (!e) {
		if (bpf_map_update_elem(&go_gs, &key, &fresh, BPF_NOEXIST) &&
		    bpf_map_update_elem(&go_gs, &key, &fresh, BPF_ANY)) {
			n->no_slot++;
			return 0;
		}
		e = bpf_map_lookup_elem(&go_gs, &key);
		if (!e)
			return 0;
	}
	if (e->goid != goid) {
		/* Another goroutine in a reused g: a clock of its own. */
		e->goid = goid;
		e->credit = 0;
		e->fd = 0;
	}
	e->park = bpf_ktime_get_ns();
	e->ready = 0;
	e->waker_goid = 0;
	e->waker_tid = 0;
	e->park_tid = (u32)bpf_get_current_pid_tgid();
	/* gopark(unlockf, lock, reason waitReason, ...): reason in CX. */
	e->reason = (u8)ctx->cx;
	e->parked = 1;
	return 0;
}

SEC("uprobe")
int go_ready(struct pt_regs *ctx)
{
	u32 pid = bpf_get_current_pid_tgid() >> 32;
	struct go_config *cfg = bpf_map_lookup_elem(&go_procs, &pid);
	struct go_key key = { .pid = pid, .g = ctx->ax };
	struct go_counts *n = go_counts();
	struct go_g *e;
	u64 readier;

	if (!cfg || !n)
		return 0;
	e = bpf_map_lookup_elem(&go_gs, &key);
	if (!e || !e->parked || e->ready)
		return 0;
	n->readies++;
	e->ready = bpf_ktime_get_ns();
	readier = go_curg(cfg, ctx->r14);
	e->waker_goid = readier ? go_read(readier + cfg->g_goid) : 0;
	e->waker_tid = (u32)bpf_get_current_pid_tgid();
	return 0;
}

/* netpollblock(pd, mode, waitio): the descriptor a goroutine is about to
 * wait on in the network poller (it parks inside with reason IO wait). */
SEC("uprobe")
int go_netpoll(struct pt_regs *ctx)
{
	u32 pid = bpf_get_current_pid_tgid() >> 32;
	struct go_config *cfg = bpf_map_lookup_elem(&go_procs, &pid);
	struct go_key key = { .pid = pid, .g = ctx->r14 };
	struct go_g *e;

	if (!cfg)
		return 0;
	e = bpf_map_lookup_elem(&go_gs, &key);
	if (e)
		e->fd = (s32)go_read(ctx->ax + cfg->pd_fd) + 1;
	return 0;
}

/* The goroutine's stack where it parked: its saved pc, then the frame
 * pointer chain from its saved bp ([bp] the caller's bp, [bp+8] the return
 * address), which only goes up the goroutine's stack. */
static __always_inline u16 go_stack(const struct go_config *cfg, u64 g, u64 *pc,
				    struct go_counts *n)
{
	u64 bp = go_read(g + cfg->g_sched_bp), link[2];
	u16 len = 0;

	pc[len++] = go_read(g + cfg->g_sched_pc);
	for (int i = 1; i < MAX_GO_FRAMES; i++) {
		if (!bp || bpf_probe_read_user(link, sizeof(link), (void *)bp) || !link[1])
			return len;
		pc[i] = link[1];
		len = i + 1;
		if (link[0] <= bp)
			return len;
		bp = link[0];
	}
	if (bp && go_read(bp + 8))
		n->truncated++;
	return len;
}

SEC("uprobe")
int go_execute(struct pt_regs *ctx)
{
	u32 pid = bpf_get_current_pid_tgid() >> 32;
	struct go_config *cfg = bpf_map_lookup_elem(&go_procs, &pid);
	struct go_key key = { .pid = pid, .g = ctx->ax };
	struct go_counts *n = go_counts();
	struct go_wait_rec *r;
	struct go_g *e;
	u32 zero = 0, w, ws, size;
	u64 now, start;

	if (!cfg || !n)
		return 0;
	e = bpf_map_lookup_elem(&go_gs, &key);
	if (!e || !e->parked)
		return 0;
	e->parked = 0;
	n->runs++;
	now = bpf_ktime_get_ns();
	/* Parks that began before the recording are cut at its start. */
	start = e->park < start_ns ? start_ns : e->park;
	split_points(&e->credit, start, e->ready > start ? e->ready : 0, now, CLASS_LOCK, &w,
		     &ws);
	if (!w && !ws)
		goto done;
	r = bpf_map_lookup_elem(&go_scratch, &zero);
	if (!r)
		goto done;
	r->hdr.kind = REC_GO_WAIT;
	r->pid = pid;
	r->tid = e->park_tid;
	r->goid = e->goid;
	r->start = start;
	r->wake = e->ready > start ? e->ready : 0;
	r->end = now;
	r->waker_goid = e->waker_goid;
	r->waker_tid = e->waker_tid;
	r->weight = w;
	r->sched_weight = ws;
	r->reason = e->reason;
	r->fd = e->fd - 1;
	r->flags = e->fd ? GOW_IO_FD : 0;
	r->frames = go_stack(cfg, key.g, r->pc, n);
	size = offsetof(struct go_wait_rec, pc) + (r->frames & 63) * 8;
	if (size > sizeof(*r))
		size = sizeof(*r);
	r->hdr.size = size;
	if (bpf_ringbuf_output(&events, r, size, BPF_RB_NO_WAKEUP))
		count_lost(LOST_RING_FULL, REC_GO_WAIT);
	else
		n->records++;
done:
	e->fd = 0;
	return 0;
}
