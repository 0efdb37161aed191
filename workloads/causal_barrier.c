/*
 * Two threads meet at a barrier every round. The main thread computes for
 * A ms and the worker for B ms (A > B), so the main thread's line is the
 * critical one: making it x% faster speeds the program up until the worker's
 * line becomes critical; making the worker's line faster buys nothing.
 *
 * usage: causal_barrier ROUNDS [A_MS=8] [B_MS=5]
 * Prints the time per round. Run it again with a smaller A_MS to measure the
 * actual effect of making line "target: a" faster.
 *
 * Built with -DNO_PROGRESS it has no progress macro: a profiler must count
 * the visits of round_start / round_done (or of line "progress: round")
 * itself, with uprobes.
 */
#include "causal_common.h"
#ifdef USE_COZ_H
#include <coz.h> /* COZ's own header: the runtime speaks its ABI */
#else
#include "../include/holdup.h"
#endif
#include <pthread.h>

#ifdef NO_PROGRESS
#undef COZ_PROGRESS_NAMED
#define COZ_PROGRESS_NAMED(name)
#endif

static pthread_barrier_t barrier;

/* A round begins and ends: functions a uprobe can count. round_start is a
 * bare `ret`, a probe the kernel single-steps (holdup says so). */
__attribute__((noinline)) static void round_start(void)
{
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void round_done(void)
{
	PROBED_BODY();
	COZ_PROGRESS_NAMED("round");
}
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
		round_start();
		SPIN(a_iters); /* target: a */
		pthread_barrier_wait(&barrier);
		round_done(); /* progress: round */
	}
	long long dt = now_ns() - t0;
	pthread_join(t, NULL);
	printf("round_ns=%lld\n", dt / rounds);
	return 0;
}
