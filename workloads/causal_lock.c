/*
 * Two workers take turns in a critical section: each iteration computes
 * CS ms holding a mutex, then NC ms outside it. With CS > NC the mutex is
 * the bottleneck, so the line inside the critical section is the one worth
 * making faster; the line outside it buys little, and the waits for the
 * mutex (lock-wait samples) are the holder's time, not the lock line's.
 *
 * usage: causal_lock ITERATIONS [CS_MS=2] [NC_MS=1]
 * ITERATIONS per worker. Prints the time per iteration; run again with a
 * smaller CS_MS to measure the actual effect of a faster "target: cs".
 */
#include "causal_common.h"
#ifdef USE_COZ_H
#include <coz.h> /* COZ's own header: the runtime speaks its ABI */
#else
#include "../include/holdup.h"
#endif
#include <pthread.h>

#define WORKERS 2

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long iterations, cs_iters, nc_iters;

/* Progress without recompiling: a uprobe on it counts the iterations. */
__attribute__((noinline)) void iteration_done(void)
{
	PROBED_BODY();
}

static void *worker(void *arg)
{
	(void)arg;
	for (long i = 0; i < iterations; i++) {
		pthread_mutex_lock(&lock);
		SPIN(cs_iters); /* target: cs */
		pthread_mutex_unlock(&lock);
		SPIN(nc_iters); /* target: nc */
		COZ_PROGRESS_NAMED("iteration");
		iteration_done();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	iterations = (long)arg_d(argc, argv, 1, 500);
	long per_ms = iters_per_ms();
	cs_iters = (long)(arg_d(argc, argv, 2, 2) * per_ms);
	nc_iters = (long)(arg_d(argc, argv, 3, 1) * per_ms);
	pthread_t t[WORKERS];
	long long t0 = now_ns();
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(t[i], NULL);
	long long dt = now_ns() - t0;
	printf("iteration_ns=%lld\n", dt / (iterations * WORKERS));
	return 0;
}
