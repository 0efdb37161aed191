/* Block requests, shared by the recorder and the latency histograms. */
#ifndef HOLDUP_BLOCK_H
#define HOLDUP_BLOCK_H

/* The request's device as major << 20 | first minor (the kernel's dev_t
 * layout), 0 when the queue has no disk. */
static __always_inline u32 rq_dev(struct request *rq)
{
	struct gendisk *disk = rq->q->disk;

	if (!disk)
		return 0;
	return (disk->major << 20) | disk->first_minor;
}
#endif
