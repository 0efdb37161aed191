/*
 * Kernel functions, fentry to fexit: a fixed number of program pairs whose
 * targets the loader sets before load (a BPF program's attach target is part
 * of what the verifier checks, so one program cannot serve several).
 */

static __always_inline int kfunc_enter(u32 slot)
{
	struct thread_starts *s = traced_starts();

	if (!s)
		return 0;
	if (slot < LAT_KFUNC_SLOTS) {
		s->kfunc_snap[slot] = s->off;
		s->kfunc_start[slot] = bpf_ktime_get_ns();
	}
	return 0;
}

static __always_inline int kfunc_exit(u32 slot)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct thread_starts *s;
	u64 now, t0;

	if (slot >= LAT_KFUNC_SLOTS)
		return 0;
	s = own_starts(false);
	if (!s)
		return 0;
	t0 = s->kfunc_start[slot];
	if (!t0)
		return 0;
	s->kfunc_start[slot] = 0;
	now = bpf_ktime_get_ns();
	add(tgid, LAT_KFUNC, slot, now, now - t0, &s->off, &s->kfunc_snap[slot]);
	return 0;
}

/* The loader sets each used slot's target function; the others are not
 * loaded. A recursive call overwrites the outer call's start. */
#define KFUNC_SLOT(n)							\
	SEC("fentry")							\
	int BPF_PROG(lat_kfunc_enter##n) { return kfunc_enter(n); }	\
	SEC("fexit")							\
	int BPF_PROG(lat_kfunc_exit##n) { return kfunc_exit(n); }

KFUNC_SLOT(0)
KFUNC_SLOT(1)
KFUNC_SLOT(2)
KFUNC_SLOT(3)
KFUNC_SLOT(4)
KFUNC_SLOT(5)
KFUNC_SLOT(6)
KFUNC_SLOT(7)
