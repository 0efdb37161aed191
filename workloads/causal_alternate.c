/*
 * Two threads meet at a barrier every round, and the critical path
 * alternates: in even rounds the main thread computes LONG ms and the
 * worker SHORT ms, in odd rounds the other way round. Each thread's line
 * is critical half of the time; making it faster helps only in its long
 * rounds, and only until it meets the other thread's short work.
 *
 * usage: causal_alternate ROUNDS [SCALE=1] [LONG_MS=3] [SHORT_MS=1]
 * SCALE multiplies the main thread's work (both its long and short
 * rounds). Prints the time per round; run again with a smaller SCALE to
 * measure the actual effect of a faster "target: a".
 */
#include "causal_common.h"
#ifdef USE_COZ_H
#include <coz.h> /* COZ's own header: the runtime speaks its ABI */
#else
#include "../include/holdup.h"
#endif
#include <pthread.h>

static pthread_barrier_t barrier;
static long rounds, a_iters[2], b_iters[2];

static void *worker(void *arg)
{
	(void)arg;
	for (long r = 0; r < rounds; r++) {
		SPIN(b_iters[r & 1]); /* target: b */
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	rounds = (long)arg_d(argc, argv, 1, 500);
	double scale = arg_d(argc, argv, 2, 1);
	long per_ms = iters_per_ms();
	double long_ms = arg_d(argc, argv, 3, 3), short_ms = arg_d(argc, argv, 4, 1);
	a_iters[0] = (long)(scale * long_ms * per_ms);
	a_iters[1] = (long)(scale * short_ms * per_ms);
	b_iters[0] = (long)(short_ms * per_ms);
	b_iters[1] = (long)(long_ms * per_ms);
	pthread_barrier_init(&barrier, NULL, 2);
	pthread_t w;
	pthread_create(&w, NULL, worker, NULL);
	long long t0 = now_ns();
	for (long r = 0; r < rounds; r++) {
		SPIN(a_iters[r & 1]); /* target: a */
		pthread_barrier_wait(&barrier);
		COZ_PROGRESS_NAMED("round");
	}
	long long dt = now_ns() - t0;
	pthread_join(w, NULL);
	printf("round_ns=%lld\n", dt / rounds);
	return 0;
}
