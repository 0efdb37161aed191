/*
 * System calls, sys_enter to sys_exit. Below a call's causes, DARC's next
 * level for system calls: where in the kernel it waited. Each wait of an
 * open call is added to a few per-thread sites (kernel stack, cause) and
 * moved to the call's bucket at its exit, so a slow peak names the kernel
 * stacks it blocked at without a map update per wait.
 */

/* Kernel stacks where system calls blocked, and their time per bucket. */
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 4096);
	__uint(key_size, sizeof(u32));
	__uint(value_size, 127 * sizeof(u64));
} wait_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct lat_site_key);
	__type(value, struct lat_site_time);
} wait_sites SEC(".maps");

SEC("tp_btf/sys_enter")
int BPF_PROG(lat_sys_enter, struct pt_regs *regs, long id)
{
	struct thread_starts *s = traced_starts();

	if (!s)
		return 0;
	s->sys_nr = id;
	s->sys_snap = s->off;
	if (s->nsites) {
		__builtin_memset(s->sites, 0, sizeof(s->sites));
		s->nsites = 0;
	}
	s->sys_start = bpf_ktime_get_ns();
	return 0;
}

/* Move the open system call's wait sites into its bucket. */
static __always_inline void flush_sites(struct thread_starts *s, u32 tgid, u32 slot)
{
	for (int i = 0; i < LAT_SITES; i++) {
		struct lat_site_key key = {
			.tgid = tgid,
			.nr = s->sys_nr,
			.slot = slot,
			.stack = s->sites[i].stack,
			.cause = s->sites[i].cause,
		};
		struct lat_site_time *t, one = { 1, s->sites[i].ns };

		if (!s->sites[i].ns)
			continue;
		t = bpf_map_lookup_elem(&wait_sites, &key);
		if (t) {
			__sync_fetch_and_add(&t->count, 1);
			__sync_fetch_and_add(&t->ns, s->sites[i].ns);
		} else if (bpf_map_update_elem(&wait_sites, &key, &one, BPF_NOEXIST)) {
			count_lost(LAT_LOST_HIST_FULL);
		}
	}
	__builtin_memset(s->sites, 0, sizeof(s->sites));
	s->nsites = 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(lat_sys_exit, struct pt_regs *regs, long ret)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct thread_starts *s = own_starts(false);
	u64 now;

	if (!s || !s->sys_start || s->sys_nr < 0)
		return 0;
	now = bpf_ktime_get_ns();
	add(tgid, LAT_SYSCALL, s->sys_nr, now, now - s->sys_start, &s->off, &s->sys_snap);
	if (s->nsites)
		flush_sites(s, tgid, log2_slot(now - s->sys_start, LAT_SLOTS));
	s->sys_start = 0;
	return 0;
}

/* Add a wait of the open system call to its wait site. */
static __always_inline void add_site(struct thread_starts *s, u64 ns)
{
	for (int i = 0; i < LAT_SITES; i++) {
		struct site *w = &s->sites[i];

		if (w->ns && (w->stack != s->out_stack || w->cause != s->out_cause))
			continue;
		if (!w->ns) {
			w->stack = s->out_stack;
			w->cause = s->out_cause;
			s->nsites++;
		}
		w->ns += ns;
		return;
	}
	count_lost(LAT_LOST_SITES_FULL);
}
