/*
 * A loop that spends its time reading the clock: clock_gettime runs in the
 * vDSO, which has no file on disk. The recorder symbolizes and unwinds it
 * from a copy of its own vDSO.
 *
 * usage: vdso_loop [CALLS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) static long poll_clock(long n)
{
	struct timespec ts;
	long s = 0;
	for (long i = 0; i < n; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		s += ts.tv_nsec & 1;
	}
	return s;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000000;
	printf("odd=%ld\n", poll_clock(n));
	return 0;
}
