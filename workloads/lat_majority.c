/* A peak whose largest callee by total time is not the largest callee in
 * most of its calls (DARC's per-call decision, known by construction).
 *
 * handle() calls a() and then b(), both on the CPU. In 7 calls of 10, a()
 * spins 650 us and b() 450 us (1.1 ms in all); in 3 of 10, a() spins
 * 100 us and b() 1700 us (1.8 ms). Both kinds fall in one log2 bucket of
 * handle() ([1.05, 2.1) ms), so they make one peak. Summed over it, b()
 * takes more time (0.825 ms per call against 0.485); a() is the larger of
 * the two in 70% of the calls. The workload times both per call and counts,
 * per bucket of handle()'s own time, the calls in which each was larger:
 * the ground truth for the decision and for each callee's share.
 *
 * usage: lat_majority [CALLS]
 * prints: calls=N, then per bucket B (handle() took [2^B, 2^(B+1)) ns):
 *         bucket=B calls= handle_ns= a_ns= b_ns= a_larger= b_larger=
 */
#include "common.h"
#include <sys/resource.h>

static long long a_ns, b_ns;

__attribute__((noinline)) void a(long i)
{
	spin_us(i % 10 < 7 ? 650 : 100);
}

__attribute__((noinline)) void b(long i)
{
	spin_us(i % 10 < 7 ? 450 : 1700);
}

__attribute__((noinline)) void handle(long i)
{
	long long t = now_ns();

	a(i);
	a_ns = now_ns() - t;
	t = now_ns();
	b(i);
	b_ns = now_ns() - t;
}

struct bucket {
	long calls, a_larger, b_larger;
	long long handle, a, b;
};

static struct bucket buckets[64];

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 1000;

	setpriority(PRIO_PROCESS, 0, -15);
	for (long i = 0; i < calls; i++) {
		long long t = now_ns(), d;
		struct bucket *bk;
		int s = 0;

		handle(i);
		d = now_ns() - t;
		while (s < 63 && (d >> (s + 1)))
			s++;
		bk = &buckets[s];
		bk->calls++;
		bk->handle += d;
		bk->a += a_ns;
		bk->b += b_ns;
		bk->a_larger += a_ns > b_ns;
		bk->b_larger += b_ns >= a_ns;
	}
	printf("calls=%ld\n", calls);
	for (int s = 0; s < 64; s++) {
		struct bucket *bk = &buckets[s];

		if (bk->calls)
			printf("bucket=%d calls=%ld handle_ns=%lld a_ns=%lld b_ns=%lld "
			       "a_larger=%ld b_larger=%ld\n",
			       s, bk->calls, bk->handle, bk->a, bk->b, bk->a_larger, bk->b_larger);
	}
	return 0;
}
