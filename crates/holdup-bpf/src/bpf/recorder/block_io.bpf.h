/*
 * Block requests, issue and completion: the device vertices of the wait-for
 * graph (a thread waiting for I/O waits for the disk it issued to).
 */

static __always_inline u8 rq_op(struct request *rq)
{
	u32 op = rq->cmd_flags & REQ_OP_MASK;

	return op <= BIO_DISCARD ? op : BIO_OTHER;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(on_rq_issue, struct request *rq)
{
	struct task_struct *task;
	struct bio_rec *r;

	if (!emit_bio)
		return 0;
	r = reserve(REC_BIO_ISSUE, sizeof(*r));
	if (!r)
		return 0;
	task = bpf_get_current_task_btf();
	r->time = bpf_ktime_get_ns();
	r->sector = rq->__sector;
	r->dev = rq_dev(rq);
	r->bytes = rq->__data_len;
	r->pid = task->tgid;
	r->tid = task->pid;
	r->op = rq_op(rq);
	r->tracked = is_tracked(task);
	r->error = 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(on_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	struct bio_rec *r;

	if (!emit_bio)
		return 0;
	r = reserve(REC_BIO_DONE, sizeof(*r));
	if (!r)
		return 0;
	r->time = bpf_ktime_get_ns();
	r->sector = rq->__sector;
	r->dev = rq_dev(rq);
	r->bytes = nr_bytes;
	r->op = rq_op(rq);
	r->error = error;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}
