/* A CPU function of about 1 ms per call on a busy machine: spinner threads
 * (two per CPU) compete with it, so some calls are preempted and wait for a
 * CPU. Around each call the workload reads its wall clock and its thread's
 * CPU clock; their difference is the time the call spent off-CPU (here:
 * preempted), summed as the ground truth for `explain`'s "preempted".
 *
 * usage: lat_cpu [CALLS]
 * prints: calls=N offcpu_ns=X wall_ns=Y
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static volatile unsigned long sink;
static long iters_per_ms;

static long long clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void spin(long n)
{
	for (long i = 0; i < n; i++)
		sink += i * 7;
}

__attribute__((noinline)) void burn(void)
{
	spin(iters_per_ms);
}

static void *spinner(void *arg)
{
	(void)arg;
	while (!stop)
		spin(100000);
	return NULL;
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 400;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	long long c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	pthread_t t[64];
	int nt = 0;

	/* Calibrate: iterations for 1 ms of CPU. */
	spin(10000000);
	iters_per_ms = 10000000 / ((clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / 1000000 + 1);
	for (long i = 0; i < 2 * ncpu && nt < 64; i++)
		pthread_create(&t[nt++], NULL, spinner, NULL);

	long long offcpu = 0, wall0 = clock_ns(CLOCK_MONOTONIC);
	for (long i = 0; i < calls; i++) {
		long long w = clock_ns(CLOCK_MONOTONIC), c = clock_ns(CLOCK_THREAD_CPUTIME_ID);

		burn();
		offcpu += (clock_ns(CLOCK_MONOTONIC) - w) - (clock_ns(CLOCK_THREAD_CPUTIME_ID) - c);
	}
	long long wall = clock_ns(CLOCK_MONOTONIC) - wall0;
	stop = 1;
	for (int i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	printf("calls=%ld offcpu_ns=%lld wall_ns=%lld\n", calls, offcpu, wall);
	return 0;
}
