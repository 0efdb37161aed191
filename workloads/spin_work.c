/* CPU only: one thread does a fixed amount of arithmetic (about 1.5 s here)
 * and prints its own run time. No system calls while it works, and the
 * other core is left to the profiler: what slows it down is only the
 * profiler's interrupts on its core and what they evict.
 * usage: spin_work [ITERATIONS] */
#include "common.h"

int main(int argc, char **argv)
{
	unsigned long iterations = argc > 1 ? strtoul(argv[1], NULL, 10) : 5000000000UL;
	volatile unsigned long x = 0;
	double t0 = now_s();

	for (unsigned long i = 0; i < iterations; i++)
		x += i;
	printf("Total time: %.3f [sec]\n", now_s() - t0);
	return 0;
}
