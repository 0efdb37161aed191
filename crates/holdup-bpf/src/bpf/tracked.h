/* Which processes are recorded, shared by the recorder and the latency
 * histograms: with -a every one but the tool itself, otherwise those in
 * tracked_tgids (the target's, and with children followed what they fork). */
#ifndef HOLDUP_TRACKED_H
#define HOLDUP_TRACKED_H

/* Options, set by the loader between open and load. */
const volatile bool trace_all = false;	/* -a */
const volatile u32 self_tgid = 0;	/* the tool itself, never traced */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, u8);
} tracked_tgids SEC(".maps");

static __always_inline bool tgid_tracked(u32 tgid)
{
	if (tgid == 0 || tgid == self_tgid)
		return false;
	if (trace_all)
		return true;
	return bpf_map_lookup_elem(&tracked_tgids, &tgid) != NULL;
}
#endif
