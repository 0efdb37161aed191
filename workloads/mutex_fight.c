/* T threads take one mutex N times each and hold it for 2 ms of CPU, with
 * 0.5 ms of work outside it (so that a releasing thread does not take the
 * lock straight back): the critical sections are serialized, and most of
 * each thread's time is waiting on the lock ([L] under worker →
 * pthread_mutex_lock). Each thread burns N × 2.5 ms of CPU.
 * usage: mutex_fight THREADS ITERATIONS */
#include "common.h"
#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int iterations;

__attribute__((noinline)) void critical_section(void)
{
	burn_cpu(0.002);
}

__attribute__((noinline)) void worker(void)
{
	for (int i = 0; i < iterations; i++) {
		pthread_mutex_lock(&lock);
		critical_section();
		pthread_mutex_unlock(&lock);
		burn_cpu(0.0005);
	}
}

static void *run(void *arg)
{
	worker();
	return NULL;
}

int main(int argc, char **argv)
{
	int n = arg_int(argc, argv, 1, 4);
	pthread_t t[64];

	iterations = arg_int(argc, argv, 2, 100);
	if (n > 64)
		n = 64;
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, run, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}
