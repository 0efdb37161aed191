/* Two phases with load imbalance (wPerf §3.2.1): in phase 1 the mapper
 * works 3 units and the reducer 1, in phase 2 the other way round, with a
 * barrier after each. Each waits for the other in turn: a cycle.
 * usage: wg_imbalance ROUNDS UNIT_MS */
#include "common.h"
#include <pthread.h>

static pthread_barrier_t barrier;
static int rounds;
static double unit;

__attribute__((noinline)) static void phase(double units)
{
	burn_cpu(units * unit);
	pthread_barrier_wait(&barrier);
}

static void *mapper(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "mapper");
	for (int i = 0; i < rounds; i++) {
		phase(3);
		phase(1);
	}
	return NULL;
}

static void *reducer(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "reducer");
	for (int i = 0; i < rounds; i++) {
		phase(1);
		phase(3);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t a, b;

	rounds = arg_int(argc, argv, 1, 300);
	unit = arg_int(argc, argv, 2, 1) / 1000.0;
	pthread_barrier_init(&barrier, NULL, 2);
	pthread_create(&a, NULL, mapper, NULL);
	pthread_create(&b, NULL, reducer, NULL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	return 0;
}
