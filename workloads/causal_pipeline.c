/*
 * A three-stage pipeline: stage 1 waits S1 ms for each item (a sleep, as
 * for input from a device) and hands it to stage 2 through a one-slot
 * mailbox (a mutex and a condition variable); stage 2 computes S2 ms and
 * hands it to stage 3, which computes S3 ms. The slowest stage sets the
 * pace: with S2 the largest, its line is the one worth making faster, until
 * it meets the next slowest stage. (Two stages compute: on two cores they
 * do not fight for a CPU.)
 *
 * usage: causal_pipeline ITEMS [S1_MS=1] [S2_MS=2] [S3_MS=1.2]
 * Prints the time per item; run again with a smaller S2_MS to measure the
 * actual effect of a faster "target: s2".
 */
#include "causal_common.h"
#ifdef USE_COZ_H
#include <coz.h> /* COZ's own header: the runtime speaks its ABI */
#else
#include "../include/holdup.h"
#endif
#include <pthread.h>

struct mailbox {
	pthread_mutex_t lock;
	pthread_cond_t changed;
	int full;
};

static struct mailbox box[2] = {
	{ PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 },
	{ PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 },
};
static long items, s2_iters, s3_iters;
static long long s1_ns;

static void put(struct mailbox *m)
{
	pthread_mutex_lock(&m->lock);
	while (m->full)
		pthread_cond_wait(&m->changed, &m->lock);
	m->full = 1;
	pthread_cond_broadcast(&m->changed);
	pthread_mutex_unlock(&m->lock);
}

static void take(struct mailbox *m)
{
	pthread_mutex_lock(&m->lock);
	while (!m->full)
		pthread_cond_wait(&m->changed, &m->lock);
	m->full = 0;
	pthread_cond_broadcast(&m->changed);
	pthread_mutex_unlock(&m->lock);
}

static void *stage1(void *arg)
{
	struct timespec ts = { s1_ns / 1000000000LL, s1_ns % 1000000000LL };
	(void)arg;
	for (long i = 0; i < items; i++) {
		nanosleep(&ts, NULL); /* target: s1 */
		put(&box[0]);
	}
	return NULL;
}

static void *stage2(void *arg)
{
	(void)arg;
	for (long i = 0; i < items; i++) {
		take(&box[0]);
		SPIN(s2_iters); /* target: s2 */
		put(&box[1]);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	items = (long)arg_d(argc, argv, 1, 500);
	long per_ms = iters_per_ms();
	s1_ns = (long long)(arg_d(argc, argv, 2, 1) * 1e6);
	s2_iters = (long)(arg_d(argc, argv, 3, 2) * per_ms);
	s3_iters = (long)(arg_d(argc, argv, 4, 1.2) * per_ms);
	pthread_t t1, t2;
	long long t0 = now_ns();
	pthread_create(&t1, NULL, stage1, NULL);
	pthread_create(&t2, NULL, stage2, NULL);
	for (long i = 0; i < items; i++) {
		take(&box[1]);
		SPIN(s3_iters); /* target: s3 */
		COZ_PROGRESS_NAMED("item");
	}
	long long dt = now_ns() - t0;
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	printf("item_ns=%lld\n", dt / items);
	return 0;
}
