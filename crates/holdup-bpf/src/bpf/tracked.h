/* Which processes are recorded, shared by the recorder and the latency
 * histograms: with -a every one but the tool itself, otherwise those whose
 * bit is set in tracked_tgids (the target's, and with children followed
 * what they fork). */
#ifndef HOLDUP_TRACKED_H
#define HOLDUP_TRACKED_H

/* Options, set by the loader between open and load. */
const volatile bool trace_all = false;	/* -a */
const volatile u32 self_tgid = 0;	/* the tool itself, never traced */
/* --cgroup: only tasks in the cgroup (v2) of this id or below it; it is
 * `cgroup_level` components below the root. 0: every cgroup. */
const volatile u64 cgroup_id = 0;
const volatile u32 cgroup_level = 0;

/* One bit per possible process id (PID_MAX_LIMIT): the test runs twice at
 * every context switch of every task, and an array word is a plain load
 * where a hash lookup was a fifth of a switch-in. User space sets bits
 * through a shared mapping, with atomic operations like the kernel side. */
#define TRACKED_PID_LIMIT (4 * 1024 * 1024)
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, TRACKED_PID_LIMIT / 64);
	__type(key, u32);
	__type(value, u64);
} tracked_tgids SEC(".maps");

static __always_inline u64 *tracked_word(u32 tgid)
{
	u32 word = tgid / 64;

	return bpf_map_lookup_elem(&tracked_tgids, &word);
}

static __always_inline bool tgid_tracked(u32 tgid)
{
	u64 *w;

	if (tgid == 0 || tgid == self_tgid)
		return false;
	if (trace_all)
		return true;
	w = tracked_word(tgid);
	return w && (*w >> (tgid & 63)) & 1;
}

/* Whether task `t` is in the --cgroup cgroup or below it. The kernel keeps
 * each cgroup's ancestors by level, so this is four reads whatever the
 * depth; the task need not be current (the switch's next, a wakee). */
static __always_inline bool task_in_cgroup(struct task_struct *t)
{
	struct cgroup *cg, *anc;
	u32 level = cgroup_level;

	if (!cgroup_id)
		return true;
	cg = BPF_CORE_READ(t, cgroups, dfl_cgrp);
	if (!cg || BPF_CORE_READ(cg, level) < (int)level)
		return false;
	if (bpf_core_read(&anc, sizeof(anc), &cg->ancestors[level]) || !anc)
		return false;
	return BPF_CORE_READ(anc, kn, id) == cgroup_id;
}

static __always_inline void track_tgid(u32 tgid)
{
	u64 *w = tracked_word(tgid);

	if (w)
		__sync_fetch_and_or(w, 1ULL << (tgid & 63));
}

static __always_inline void untrack_tgid(u32 tgid)
{
	u64 *w = tracked_word(tgid);

	if (w)
		__sync_fetch_and_and(w, ~(1ULL << (tgid & 63)));
}
#endif
