/* THREADS threads for SECONDS, each in a loop of 0.5 ms of work, a 1 ms
 * nap (nap_short), 0.5 ms of work and a 3 ms nap (nap_long): about 400
 * blocked intervals a second per thread, in two places whose shares of the
 * blocked time are known. Prints the time each place slept, measured by
 * itself, summed over the threads.
 * usage: two_naps [THREADS [SECONDS]] */
#include "common.h"
#include <pthread.h>
#include <unistd.h>

static double seconds;
static long long short_ns, long_ns;

__attribute__((noinline)) void nap_short(long long *ns)
{
	long long t = now_ns();

	usleep(1000);
	*ns += now_ns() - t;
}

__attribute__((noinline)) void nap_long(long long *ns)
{
	long long t = now_ns();

	usleep(3000);
	*ns += now_ns() - t;
}

static void *run(void *arg)
{
	long long s = 0, l = 0;
	double t0 = now_s();

	(void)arg;
	while (now_s() - t0 < seconds) {
		spin_us(500);
		nap_short(&s);
		spin_us(500);
		nap_long(&l);
	}
	__sync_fetch_and_add(&short_ns, s);
	__sync_fetch_and_add(&long_ns, l);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4;
	pthread_t t[64];

	seconds = argc > 2 ? atof(argv[2]) : 2;
	if (n < 1 || n > 64)
		n = 4;
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, run, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("short_ns %lld\nlong_ns %lld\n", short_ns, long_ns);
	return 0;
}
