/* Two phases with load imbalance (wPerf §3.2.1): in phase 1 the mapper
 * works 3 units and the reducer 1, in phase 2 the other way round, with a
 * barrier after each. Each waits for the other in turn: a cycle.
 * Each thread also measures its own time in the barrier, the ground truth
 * when other load on the machine stretches the phases.
 * usage: wg_imbalance ROUNDS UNIT_MS [WAITS_FILE] */
#include "common.h"
#include <pthread.h>

static pthread_barrier_t barrier;
static int rounds;
static double unit;
static __thread double waited; /* seconds in the barrier, this thread */
static double mapper_waited, reducer_waited;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void phase(double units)
{
	double t;

	burn_cpu(units * unit);
	t = now();
	pthread_barrier_wait(&barrier);
	waited += now() - t;
}

static void *mapper(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "mapper");
	for (int i = 0; i < rounds; i++) {
		phase(3);
		phase(1);
	}
	mapper_waited = waited;
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
	reducer_waited = waited;
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
	if (argc > 3) {
		FILE *f = fopen(argv[3], "w");

		if (!f) {
			perror(argv[3]);
			return 1;
		}
		fprintf(f, "%.3f %.3f\n", mapper_waited * 1e3, reducer_waited * 1e3);
		fclose(f);
	}
	return 0;
}
