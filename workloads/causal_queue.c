/*
 * A producer computes P ms per item and puts it in a bounded queue (a
 * mutex and two condition variables); a consumer takes items and computes
 * C ms on each. With C > P the consumer is the bottleneck: its line is the
 * one worth making faster, the producer's line is hot but buys nothing.
 *
 * usage: causal_queue ITEMS [P_MS=1.2] [C_MS=2] [DEPTH=4]
 * Prints the time per item; run again with a smaller C_MS (or P_MS) to
 * measure the actual effect of a faster "target: consume" ("target: produce").
 */
#include "causal_common.h"
#ifdef USE_COZ_H
#include <coz.h> /* COZ's own header: the runtime speaks its ABI */
#else
#include "../include/holdup.h"
#endif
#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static long items, p_iters, c_iters, depth, queued;

static void *producer(void *arg)
{
	(void)arg;
	for (long i = 0; i < items; i++) {
		SPIN(p_iters); /* target: produce */
		pthread_mutex_lock(&lock);
		while (queued == depth)
			pthread_cond_wait(&not_full, &lock);
		queued++;
		pthread_cond_signal(&not_empty);
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	items = (long)arg_d(argc, argv, 1, 500);
	long per_ms = iters_per_ms();
	p_iters = (long)(arg_d(argc, argv, 2, 1.2) * per_ms);
	c_iters = (long)(arg_d(argc, argv, 3, 2) * per_ms);
	depth = (long)arg_d(argc, argv, 4, 4);
	pthread_t p;
	long long t0 = now_ns();
	pthread_create(&p, NULL, producer, NULL);
	for (long i = 0; i < items; i++) {
		pthread_mutex_lock(&lock);
		while (queued == 0)
			pthread_cond_wait(&not_empty, &lock);
		queued--;
		pthread_cond_signal(&not_full);
		pthread_mutex_unlock(&lock);
		SPIN(c_iters); /* target: consume */
		COZ_PROGRESS_NAMED("item");
	}
	long long dt = now_ns() - t0;
	pthread_join(p, NULL);
	printf("item_ns=%lld\n", dt / items);
	return 0;
}
