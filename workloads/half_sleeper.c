/* One thread that computes 10 ms then sleeps 10 ms, N times: half on-CPU,
 * half blocked in nanosleep ([B] other), under `half_sleeper`. */
#include "common.h"
#include <pthread.h>
#include <unistd.h>

__attribute__((noinline)) void half_sleeper(int n)
{
	for (int i = 0; i < n; i++) {
		burn_cpu(0.010);
		usleep(10000);
	}
}

static void *run(void *arg)
{
	half_sleeper(*(int *)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = arg_int(argc, argv, 1, 100);
	pthread_t t;

	pthread_create(&t, NULL, run, &n);
	pthread_join(t, NULL);
	return 0;
}
