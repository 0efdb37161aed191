/*
 * A cache whose shards serialize their callers, as RocksDB's block cache
 * with one shard: THREADS workers each do WORK_US of work outside the
 * cache, then lookup() and release(), each of which takes a shard's mutex
 * (a random shard) and works LOOKUP_US / RELEASE_US holding it. With more
 * workers than cores, a waiter that is woken still waits for a CPU.
 *
 * usage: causal_shards OPS [LOOKUP_US=1] [RELEASE_US=0.5] [WORK_US=8] [SHARDS=1] [THREADS=4]
 * OPS per worker. Prints op_ns=, the wall time per op.
 */
#include "causal_common.h"
#ifdef USE_COZ_H
#include <coz.h> /* COZ's own header: the runtime speaks its ABI */
#else
#include "../include/holdup.h"
#endif
#include <pthread.h>

#define MAX_SHARDS 64

static pthread_mutex_t shard[MAX_SHARDS];
static long ops, lookup_iters, release_iters, work_iters, shards;

__attribute__((noinline)) void lookup(unsigned s)
{
	pthread_mutex_lock(&shard[s]);
	SPIN(lookup_iters); /* target: lookup */
	pthread_mutex_unlock(&shard[s]);
}

__attribute__((noinline)) void release(unsigned s)
{
	pthread_mutex_lock(&shard[s]);
	SPIN(release_iters); /* target: release */
	pthread_mutex_unlock(&shard[s]);
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(long)arg;
	for (long i = 0; i < ops; i++) {
		SPIN(work_iters); /* target: work */
		unsigned s = (unsigned)rand_r(&seed) % shards;
		lookup(s);
		release(s);
		COZ_PROGRESS_NAMED("op");
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: causal_shards OPS [LOOKUP_US] [RELEASE_US] [WORK_US] [SHARDS] [THREADS]\n");
		return 2;
	}
	long per_ms = iters_per_ms();
	ops = atol(argv[1]);
	lookup_iters = (long)((argc > 2 ? atof(argv[2]) : 1.0) * per_ms / 1000);
	release_iters = (long)((argc > 3 ? atof(argv[3]) : 0.5) * per_ms / 1000);
	work_iters = (long)((argc > 4 ? atof(argv[4]) : 8.0) * per_ms / 1000);
	shards = argc > 5 ? atol(argv[5]) : 1;
	long threads = argc > 6 ? atol(argv[6]) : 4;
	if (shards < 1 || shards > MAX_SHARDS || threads < 1 || threads > 64) {
		fprintf(stderr, "causal_shards: 1..64 shards and threads\n");
		return 2;
	}
	for (int i = 0; i < MAX_SHARDS; i++)
		pthread_mutex_init(&shard[i], NULL);
	pthread_t t[64];
	long long t0 = now_ns();
	for (long i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(i + 1));
	for (long i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	printf("op_ns=%.1f\n", (double)(now_ns() - t0) / (double)(ops * threads));
	return 0;
}
