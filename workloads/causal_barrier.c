/*
 * Two threads meet at a barrier every round. The main thread computes for
 * A ms and the worker for B ms (A > B), so the main thread's line is the
 * critical one: making it x% faster speeds the program up until the worker's
 * line becomes critical; making the worker's line faster buys nothing.
 *
 * usage: causal_barrier ROUNDS [A_MS=8] [B_MS=5]
 * Prints the time per round. Run it again with a smaller A_MS to measure the
 * actual effect of making line "target: a" faster.
 */
#include "causal_common.h"
#ifdef USE_COZ_H
#include <coz.h> /* COZ's own header: the runtime speaks its ABI */
#else
#include "../include/holdup.h"
#endif
#include <pthread.h>

static pthread_barrier_t barrier;
static long rounds, a_iters, b_iters;

static void *worker(void *arg)
{
	(void)arg;
	for (long r = 0; r < rounds; r++) {
		SPIN(b_iters); /* target: b */
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	rounds = (long)arg_d(argc, argv, 1, 500);
	long per_ms = iters_per_ms();
	a_iters = (long)(arg_d(argc, argv, 2, 8) * per_ms);
	b_iters = (long)(arg_d(argc, argv, 3, 5) * per_ms);
	pthread_barrier_init(&barrier, NULL, 2);
	pthread_t t;
	pthread_create(&t, NULL, worker, NULL);
	long long t0 = now_ns();
	for (long r = 0; r < rounds; r++) {
		SPIN(a_iters); /* target: a */
		pthread_barrier_wait(&barrier);
		COZ_PROGRESS_NAMED("round");
	}
	long long dt = now_ns() - t0;
	pthread_join(t, NULL);
	printf("round_ns=%lld\n", dt / rounds);
	return 0;
}
