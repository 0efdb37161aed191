/*
 * What the lock calls return under the causal runtime, which wraps them:
 * the wrappers take a free lock at once and wait only for a held one, and
 * every answer of the C library must reach the program as it is:
 *   - a robust mutex whose owner died: EOWNERDEAD, and it is ours;
 *   - an error-checking mutex locked again by its owner: EDEADLK;
 *   - a recursive mutex locked again by its owner: 0;
 *   - a read lock taken twice by one thread: 0 both times.
 * Then ROUNDS rounds of a contended critical section, so that experiments
 * run while the wrappers are in use.
 *
 * usage: causal_lockresults ROUNDS
 * prints: robust=EOWNERDEAD errorcheck=EDEADLK recursive=0 rdlock=0 rounds=N
 */
#include "causal_common.h"
#ifdef USE_COZ_H
#include <coz.h>
#else
#include "../include/holdup.h"
#endif
#include <errno.h>
#include <pthread.h>
#include <string.h>

static pthread_mutex_t robust, shared = PTHREAD_MUTEX_INITIALIZER;
static long rounds, cs_iters;

static void *die_holding(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&robust);
	return NULL;
}

static const char *name(int r)
{
	switch (r) {
	case 0: return "0";
	case EOWNERDEAD: return "EOWNERDEAD";
	case EDEADLK: return "EDEADLK";
	case EBUSY: return "EBUSY";
	default: return strerror(r);
	}
}

static void *contend(void *arg)
{
	(void)arg;
	for (long i = 0; i < rounds; i++) {
		pthread_mutex_lock(&shared);
		SPIN(cs_iters);
		pthread_mutex_unlock(&shared);
		SPIN(cs_iters / 2);
		COZ_PROGRESS_NAMED("round");
	}
	return NULL;
}

static void init_kind(pthread_mutex_t *m, int kind)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, kind);
	pthread_mutex_init(m, &a);
}

int main(int argc, char **argv)
{
	rounds = (long)arg_d(argc, argv, 1, 2000);
	cs_iters = iters_per_ms() / 4;

	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&robust, &a);
	pthread_t t;
	pthread_create(&t, NULL, die_holding, NULL);
	pthread_join(t, NULL);
	int r_robust = pthread_mutex_lock(&robust);
	if (r_robust == EOWNERDEAD)
		pthread_mutex_consistent(&robust);
	pthread_mutex_unlock(&robust);

	pthread_mutex_t check, rec;
	init_kind(&check, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_lock(&check);
	int r_check = pthread_mutex_lock(&check);
	pthread_mutex_unlock(&check);

	init_kind(&rec, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_lock(&rec);
	int r_rec = pthread_mutex_lock(&rec);
	pthread_mutex_unlock(&rec);
	pthread_mutex_unlock(&rec);

	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	int r_rd = pthread_rwlock_rdlock(&rw) | pthread_rwlock_rdlock(&rw);
	pthread_rwlock_unlock(&rw);
	pthread_rwlock_unlock(&rw);

	pthread_t w[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&w[i], NULL, contend, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(w[i], NULL);
	printf("robust=%s errorcheck=%s recursive=%s rdlock=%s rounds=%ld\n", name(r_robust),
	       name(r_check), name(r_rec), name(r_rd), rounds);
	return 0;
}
