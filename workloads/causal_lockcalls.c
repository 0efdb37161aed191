/*
 * One thread takes and releases a mutex as fast as it can, with nobody
 * else wanting it: the work of each call is libc's own (an atomic
 * exchange, the owner's bookkeeping). take() and give() are the only
 * callers of pthread_mutex_lock and pthread_mutex_unlock, so a sample
 * inside libc's lock is take()'s and one inside its unlock is give()'s:
 * in a causal profile the two have samples of the same order.
 * usage: causal_lockcalls SECONDS
 */
#include "common.h"
#include "../include/holdup.h"
#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long shared;

/* Checked, as wrappers do (which also keeps them on the stack: no tail
 * call into libc). */
__attribute__((noinline)) void take(void)
{
	if (pthread_mutex_lock(&lock) != 0)
		abort();
}

__attribute__((noinline)) void give(void)
{
	if (pthread_mutex_unlock(&lock) != 0)
		abort();
}

int main(int argc, char **argv)
{
	double until = now_s() + arg_int(argc, argv, 1, 3);

	while (now_s() < until) {
		for (int i = 0; i < 10000; i++) {
			take();
			shared++;
			give();
		}
		COZ_PROGRESS_NAMED("ten thousand");
	}
	printf("rounds %lu\n", shared);
	return 0;
}
