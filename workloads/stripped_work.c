/* CPU work in one named function, for a stripped copy of this binary: the
 * test keeps its debug information apart (objcopy --only-keep-debug) and
 * strips it, so only a debug file found by build-id can name `crunch` and
 * its line. Prints the CPU time the work took (seconds, this thread's).
 * Then NAPS calls of `nap`, each asleep 1.5 ms: what a uprobe on it counts
 * and times.
 * usage: stripped_work SECONDS [NAPS] */
#include "common.h"

static volatile unsigned long sink;

__attribute__((noinline)) static void crunch(double seconds)
{
	struct timespec t;
	double end = now_s() + seconds;

	while (now_s() < end)
		for (unsigned long i = 0; i < 100000; i++)
			sink += i * i; /* CRUNCH LINE */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	printf("crunch_cpu_s %.3f\n", t.tv_sec + t.tv_nsec * 1e-9);
}

__attribute__((noinline)) void nap(void)
{
	struct timespec t = { 0, 1500000 };

	nanosleep(&t, NULL);
}

int main(int argc, char **argv)
{
	int naps = argc > 2 ? atoi(argv[2]) : 0;

	crunch(argc > 1 ? atof(argv[1]) : 1.0);
	for (int i = 0; i < naps; i++)
		nap();
	printf("naps %d\n", naps);
	return 0;
}
