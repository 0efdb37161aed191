/*
 * Block requests, issue to completion, per device. The start is kept per
 * request (by address), since completion runs in interrupt context on
 * whatever task was interrupted.
 */

struct rq_start {
	u64 time;
	u32 tgid;
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct rq_start);
} rq_starts SEC(".maps");

/* A request is charged to the process that issued it (with -a, whatever
 * task that was: often a kernel worker for writeback). */
SEC("tp_btf/block_rq_issue")
int BPF_PROG(lat_rq_issue, struct request *rq)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct rq_start s = {};
	u64 key = (u64)rq;

	if (!tgid_tracked(tgid))
		return 0;
	s.time = bpf_ktime_get_ns();
	s.tgid = tgid;
	if (bpf_map_update_elem(&rq_starts, &key, &s, BPF_ANY))
		count_lost(LAT_LOST_START_FULL);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(lat_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	u64 key = (u64)rq;
	struct rq_start *s = bpf_map_lookup_elem(&rq_starts, &key);
	u64 now;

	if (!s)
		return 0;
	now = bpf_ktime_get_ns();
	add(s->tgid, LAT_BLOCK, rq_dev(rq), now, now - s->time, NULL, NULL);
	bpf_map_delete_elem(&rq_starts, &key);
	return 0;
}
