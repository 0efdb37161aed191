/*
 * Three threads meet at a barrier every round: the main thread computes
 * A ms (the critical path), a worker computes B ms, and a timer-paced
 * thread sleeps T ms (nanosleep). A faster A helps until it meets the
 * longer of B and T; the sleeper must not be mistaken for work, nor its
 * sleep for a wait that a faster A would shorten.
 *
 * usage: causal_timer ROUNDS [A_MS=3] [B_MS=1] [T_MS=2]
 * Prints the time per round; run again with a smaller A_MS to measure the
 * actual effect of a faster line "target: a".
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
static long long sleep_ns;

static void *worker(void *arg)
{
	(void)arg;
	for (long r = 0; r < rounds; r++) {
		SPIN(b_iters); /* target: b */
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

static void *ticker(void *arg)
{
	struct timespec ts = { sleep_ns / 1000000000LL, sleep_ns % 1000000000LL };
	(void)arg;
	for (long r = 0; r < rounds; r++) {
		nanosleep(&ts, NULL); /* target: tick */
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	rounds = (long)arg_d(argc, argv, 1, 500);
	long per_ms = iters_per_ms();
	a_iters = (long)(arg_d(argc, argv, 2, 3) * per_ms);
	b_iters = (long)(arg_d(argc, argv, 3, 1) * per_ms);
	sleep_ns = (long long)(arg_d(argc, argv, 4, 2) * 1e6);
	pthread_barrier_init(&barrier, NULL, 3);
	pthread_t w, t;
	pthread_create(&w, NULL, worker, NULL);
	pthread_create(&t, NULL, ticker, NULL);
	long long t0 = now_ns();
	for (long r = 0; r < rounds; r++) {
		SPIN(a_iters); /* target: a */
		pthread_barrier_wait(&barrier);
		COZ_PROGRESS_NAMED("round");
	}
	long long dt = now_ns() - t0;
	pthread_join(w, NULL);
	pthread_join(t, NULL);
	printf("round_ns=%lld\n", dt / rounds);
	return 0;
}
