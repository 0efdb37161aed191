/* A short-lived process for the agent's test of what it keeps: DEPTH
 * nested calls of level, then 20 ms on the CPU and 20 ms asleep at the
 * deepest, then it exits. Copies of it at many paths are many binaries.
 * usage: short_task DEPTH */
#include "common.h"
#include <unistd.h>

__attribute__((noinline)) void level(int n)
{
	if (n > 0) {
		level(n - 1);
		/* Not a tail call: each level stays a frame. */
		__asm__ volatile("" ::: "memory");
		return;
	}
	spin_us(20000);
	usleep(20000);
}

int main(int argc, char **argv)
{
	level(argc > 1 ? atoi(argv[1]) : 0);
	return 0;
}
