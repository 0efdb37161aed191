/*
 * USDT probes (<sys/sdt.h>) whose visits are known: two threads each run
 * ITERATIONS iterations of MS ms of computation. Every iteration passes the
 * probe holdup_test:tick once and COZ_PROGRESS "iteration" once, and, while
 * a tracer has raised its semaphore, the probe holdup_test:guarded twice
 * (as the *_ENABLED() checks that `dtrace -G` generates guard costly probe
 * arguments). Prints how many guarded visits were made.
 *
 * usage: causal_usdt ITERATIONS [MS=0.2]
 */
#include "causal_common.h"
#include "../include/holdup.h"
#include <pthread.h>

/* Every probe of this file has a semaphore, in the section tracers know. */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

#define WORKERS 2

__extension__ unsigned short holdup_test_tick_semaphore __attribute__((section(".probes"), used));
__extension__ unsigned short holdup_test_guarded_semaphore __attribute__((section(".probes"), used));

static long iterations, work_iters;
static long guarded_visits;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg)
{
	long guarded = 0;
	(void)arg;
	for (long i = 0; i < iterations; i++) {
		SPIN(work_iters);
		STAP_PROBE1(holdup_test, tick, i);
		if (*(volatile unsigned short *)&holdup_test_guarded_semaphore) {
			STAP_PROBE1(holdup_test, guarded, i);
			STAP_PROBE1(holdup_test, guarded, i + 1);
			guarded += 2;
		}
		COZ_PROGRESS_NAMED("iteration");
	}
	pthread_mutex_lock(&count_lock);
	guarded_visits += guarded;
	pthread_mutex_unlock(&count_lock);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s ITERATIONS [MS=0.2]\n", argv[0]);
		return 2;
	}
	iterations = atol(argv[1]);
	work_iters = (long)(arg_d(argc, argv, 2, 0.2) * iters_per_ms());
	pthread_t t[WORKERS];
	for (int k = 0; k < WORKERS; k++)
		pthread_create(&t[k], NULL, worker, NULL);
	for (int k = 0; k < WORKERS; k++)
		pthread_join(t[k], NULL);
	printf("guarded visits: %ld of %ld iterations\n", guarded_visits, WORKERS * iterations);
	return 0;
}
