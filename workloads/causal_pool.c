/*
 * A pool of 4 workers pinned to NCPU cores works in rounds; each round every
 * worker computes W ms split evenly over four lines, then all meet at a
 * barrier. Pinned to one core the pool is oversubscribed: most of a worker's
 * time is spent runnable, waiting for the core (subclass sched). More cores
 * ("subclass:sched" sped up) buy far more than any one line can.
 *
 * usage: causal_pool ROUNDS [NCPU=1] [W_MS=2]
 * Prints the time per round and the workers' total runqueue time
 * (/proc/thread-self/schedstat); run with NCPU=2 to measure the actual
 * effect of more cores and how much runqueue time it removed.
 */
#include "causal_common.h"
#ifdef USE_COZ_H
#include <coz.h> /* COZ's own header: the runtime speaks its ABI */
#else
#include "../include/holdup.h"
#endif
#include <pthread.h>
#include <sched.h>

#define WORKERS 4

static pthread_barrier_t barrier;
static long rounds, quarter;
static int ncpu;
static long long runq_ns[WORKERS];

static long long my_runq_ns(void)
{
	long long run = 0, wait = 0;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");
	if (f) {
		if (fscanf(f, "%lld %lld", &run, &wait) != 2)
			wait = 0;
		fclose(f);
	}
	return wait;
}

static void *worker(void *arg)
{
	long id = (long)arg;
	cpu_set_t set;
	CPU_ZERO(&set);
	for (int c = 0; c < ncpu; c++)
		CPU_SET(c, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	pthread_barrier_wait(&barrier);
	long long q0 = my_runq_ns();
	for (long r = 0; r < rounds; r++) {
		SPIN(quarter); /* target: w1 */
		SPIN(quarter); /* target: w2 */
		SPIN(quarter); /* target: w3 */
		SPIN(quarter); /* target: w4 */
		pthread_barrier_wait(&barrier);
	}
	runq_ns[id] = my_runq_ns() - q0;
	return NULL;
}

int main(int argc, char **argv)
{
	rounds = (long)arg_d(argc, argv, 1, 300);
	ncpu = (int)arg_d(argc, argv, 2, 1);
	long per_ms = iters_per_ms();
	quarter = (long)(arg_d(argc, argv, 3, 2) * per_ms / 4);
	pthread_barrier_init(&barrier, NULL, WORKERS + 1);
	pthread_t t[WORKERS];
	for (long i = 0; i < WORKERS; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	pthread_barrier_wait(&barrier);
	long long t0 = now_ns();
	for (long r = 0; r < rounds; r++) {
		pthread_barrier_wait(&barrier);
		COZ_PROGRESS_NAMED("round");
	}
	long long dt = now_ns() - t0;
	long long q = 0;
	for (int i = 0; i < WORKERS; i++) {
		pthread_join(t[i], NULL);
		q += runq_ns[i];
	}
	printf("round_ns=%lld runq_ns=%lld\n", dt / rounds, q / rounds);
	return 0;
}
