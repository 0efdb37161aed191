/* A function whose first instruction is one that x86-64 uprobes cannot
 * emulate (a mov): the kernel runs it out of line under a single-step
 * trap, which comes after the entry probe took its time stamp. The body
 * spins SPIN_US and times itself: the ground truth for each call.
 *
 * usage: lat_stepped [CALLS]
 * prints: calls=N body_ns=T
 */
#include "common.h"

#define SPIN_US 20

static long long body_ns;

static long long mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

__attribute__((noinline, used)) void spin_body(long us)
{
	long long t0 = mono_ns(), end = t0 + us * 1000;

	while (mono_ns() < end)
		;
	body_ns += mono_ns() - t0;
}

/* stepped(us): a mov, then on into the body. */
void stepped(long us);
__asm__(".text\n"
	".globl stepped\n"
	".type stepped, @function\n"
	"stepped:\n"
	"\tmov %rdi, %rax\n"
	"\tjmp spin_body\n"
	".size stepped, .-stepped\n");

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 5000;

	for (long i = 0; i < calls; i++)
		stepped(SPIN_US);
	printf("calls=%ld body_ns=%lld\n", calls, body_ns);
	return 0;
}
