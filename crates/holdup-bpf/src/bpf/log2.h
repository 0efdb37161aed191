/* Log2 histogram buckets, shared by the recorder and the latency histograms. */
#ifndef HOLDUP_LOG2_H
#define HOLDUP_LOG2_H

/* floor(log2(v)) (0 for v = 0), capped at slots - 1: bucket k holds
 * [2^k, 2^(k+1)), bucket 0 also 0. */
static __always_inline u32 log2_slot(u64 v, u32 slots)
{
	u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) r += 1;
	return r < slots ? r : slots - 1;
}
#endif
