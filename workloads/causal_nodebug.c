/*
 * Built without debug information (no line table, symbols kept), as most
 * distribution binaries are: a causal profiler can only name functions.
 * Two threads run rounds of one_round(), which does OUTER_MS of work of its
 * own and calls hot() (HOT_MS of work) then cool() (COOL_MS), each round a
 * visit of progress point "round". hot() is about two thirds of a round by
 * default, so halving it should speed the program up by a third.
 * one_round() is the outer frame of nearly all the work, little of it its
 * own: a target whose speedup is everything's.
 *
 * usage: causal_nodebug ROUNDS [HOT_MS=6] [COOL_MS=3] [OUTER_MS=0.3]
 * Prints the time per round; with ROUNDS 0, the spin iterations per ms
 * (for CAUSAL_ITERS_PER_MS, so that compared runs do the same work). Built with -DHALF_HOT, hot() does half its
 * work: the measured effect of making that function twice as fast.
 */
#include "causal_common.h"
#include "../include/holdup.h"
#include <pthread.h>

#ifdef HALF_HOT
#define HOT_SHARE 0.5
#else
#define HOT_SHARE 1.0
#endif

static long rounds, hot_iters, cool_iters, outer_iters;

__attribute__((noinline)) static void hot(void)
{
	SPIN(hot_iters * HOT_SHARE);
}

__attribute__((noinline)) static void cool(void)
{
	SPIN(cool_iters);
}

__attribute__((noinline)) static void one_round(void)
{
	SPIN(outer_iters);
	hot();
	cool();
}

static void *worker(void *arg)
{
	(void)arg;
	for (long r = 0; r < rounds; r++) {
		one_round();
		COZ_PROGRESS_NAMED("round");
	}
	return NULL;
}

int main(int argc, char **argv)
{
	rounds = (long)arg_d(argc, argv, 1, 500);
	long per_ms = iters_per_ms();
	if (rounds == 0) {
		printf("%ld\n", per_ms);
		return 0;
	}
	hot_iters = (long)(arg_d(argc, argv, 2, 6) * per_ms);
	cool_iters = (long)(arg_d(argc, argv, 3, 3) * per_ms);
	outer_iters = (long)(arg_d(argc, argv, 4, 0.3) * per_ms);
	pthread_t t[2];
	long long t0 = now_ns();
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("round_ns %lld\n", (now_ns() - t0) / rounds);
	return 0;
}
