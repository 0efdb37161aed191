/*
 * A progress point visited too often to count with a trap: visit() is
 * called about 100 000 times a second, once per call of inner(), and
 * outer() calls inner() 1000 times in a row, so outer() is visited 1000
 * times less often than visit() and a uprobe on it costs the program
 * next to nothing.
 *
 * usage: causal_callers [SECONDS=5] [WORK_US=10]
 * Prints the visits of visit() and of outer() a second.
 */
#include "causal_common.h"

#define CALLS 1000

__attribute__((noinline)) void visit(void)
{
	PROBED_BODY();
}

__attribute__((noinline)) void inner(long n)
{
	SPIN(n);
	visit();
}

__attribute__((noinline)) void outer(long n)
{
	for (int i = 0; i < CALLS; i++)
		inner(n);
}

int main(int argc, char **argv)
{
	double seconds = arg_d(argc, argv, 1, 5);
	long n = (long)(arg_d(argc, argv, 2, 10) * iters_per_ms() / 1000);
	long long t0 = now_ns(), end = t0 + (long long)(seconds * 1e9);
	long outers = 0;
	while (now_ns() < end) {
		outer(n);
		outers++;
	}
	double dt = (now_ns() - t0) / 1e9;
	printf("visit_per_s=%.0f outer_per_s=%.0f\n", outers * CALLS / dt, outers / dt);
	return 0;
}
