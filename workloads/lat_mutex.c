/* A function that takes an intermittently contended mutex.
 *
 * take_lock() is called CALLS times with a short pause between calls; a
 * holder thread takes the mutex for HOLD_US, lets it go for GAP_US, and so
 * on. take_lock() first tries the lock: when that fails, the call is
 * contended and will wait, so the workload counts the slow calls itself:
 * the ground truth for the two peaks of `func:take_lock`. With
 * --no-contention the holder does not run (the "fixed" program).
 * never_called() exists for the "function never called" test.
 *
 * usage: lat_mutex [--no-contention] [CALLS]
 * prints: calls=N contended=M
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HOLD_US 2000
#define GAP_US 3000
#define PAUSE_US 200

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static volatile int stop;
static volatile long counter;
static long contended;

__attribute__((noinline)) void take_lock(void)
{
	if (pthread_mutex_trylock(&mu) != 0) {
		contended++;
		pthread_mutex_lock(&mu);
	}
	counter++;
	pthread_mutex_unlock(&mu);
}

__attribute__((noinline)) void never_called(void)
{
	counter--;
}

static void *holder(void *arg)
{
	(void)arg;
	while (!stop) {
		pthread_mutex_lock(&mu);
		usleep(HOLD_US);
		pthread_mutex_unlock(&mu);
		usleep(GAP_US);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int contention = 1;
	long calls = 2000;
	pthread_t t;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--no-contention"))
			contention = 0;
		else
			calls = atol(argv[i]);
	}
	if (contention)
		pthread_create(&t, NULL, holder, NULL);
	for (long i = 0; i < calls; i++) {
		take_lock();
		usleep(PAUSE_US);
	}
	stop = 1;
	if (contention)
		pthread_join(t, NULL);
	if (argc > 99)
		never_called();
	printf("calls=%ld contended=%ld\n", calls, contended);
	return 0;
}
