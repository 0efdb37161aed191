/* A recursive function: descend(n) calls itself until n is 0, and the
 * deepest call sleeps SLEEP_US. Timing every level would count
 * CALLS * (DEPTH + 1) calls, most of them nested in others; a latency
 * histogram of descend counts the outermost calls only. The workload
 * times those itself: the ground truth for their count and total time.
 *
 * usage: lat_recursive [CALLS]
 * prints: calls=N depth=D outer_ns=T
 */
#include "common.h"

#define DEPTH 6
#define SLEEP_US 500

static volatile long sink;

__attribute__((noinline)) void descend(int n)
{
	if (n == 0) {
		struct timespec ts = { 0, SLEEP_US * 1000 };

		nanosleep(&ts, NULL);
		return;
	}
	descend(n - 1);
	sink++; /* not a tail call */
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 400;
	long long outer = 0;

	for (long i = 0; i < calls; i++) {
		long long t = now_ns();

		descend(DEPTH);
		outer += now_ns() - t;
	}
	printf("calls=%ld depth=%d outer_ns=%lld\n", calls, DEPTH, outer);
	return 0;
}
