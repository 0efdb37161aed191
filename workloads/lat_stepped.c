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

static double body_s;

__attribute__((noinline, used)) void spin_body(long us)
{
	double t0 = now_s(), end = t0 + us * 1e-6;

	while (now_s() < end)
		;
	body_s += now_s() - t0;
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
	printf("calls=%ld body_ns=%.0f\n", calls, body_s * 1e9);
	return 0;
}
