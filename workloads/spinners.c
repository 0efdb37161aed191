/* T threads spin for S seconds of CPU each, all pinned to CPU 0: each is
 * runnable but not running for about 1 - 1/T of its life ([S]).
 * usage: spinners THREADS SECONDS */
#include "common.h"
#include <pthread.h>

static double seconds;

__attribute__((noinline)) void spin(void)
{
	burn_cpu(seconds);
}

static void *run(void *arg)
{
	spin();
	return NULL;
}

int main(int argc, char **argv)
{
	int n = arg_int(argc, argv, 1, 4);
	pthread_t t[64];

	seconds = argc > 2 ? atof(argv[2]) : 0.25;
	if (n > 64)
		n = 64;
	pin_to_cpu(0);	/* threads inherit the affinity */
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, run, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}
