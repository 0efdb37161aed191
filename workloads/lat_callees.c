/* A function whose slow calls are made by one callee among several, two
 * levels down (DARC's root-cause path, known by construction).
 *
 * handle() calls parse() (300 us on the CPU, every call), lookup() (20 us)
 * and store() (10 us); in one call of sixteen, store() also calls flush(),
 * which spins 10 us and calls write_out(), which sleeps 6 ms. So handle() has a fast peak made by parse() and a
 * slow one made by store() → flush() → write_out() → a sleep. Each caller
 * times its callees with the wall clock, and the workload sums them per
 * log2 bucket of handle()'s own time (a call preempted for long lands in
 * a slower bucket, whatever its path): the ground truth for each level's
 * share of each peak, once the peak's buckets are known. It raises its own
 * priority (when allowed) so that a busy machine preempts it less: the
 * fast calls then stay one peak.
 *
 * lat_indirect is this program with handle() calling store() through a
 * function pointer, which a scan of the binary's call instructions cannot
 * follow.
 *
 * usage: lat_callees [CALLS]
 * prints: calls=N slow=M, then per bucket B (handle() took [2^B, 2^(B+1)) ns):
 *         bucket=B calls= handle_ns= parse_ns= store_ns= flush_ns= write_ns=
 */
#include "common.h"
#include <sys/resource.h>

static long long store_ns, flush_ns, write_ns, parse_ns;

__attribute__((noinline)) void write_out(void)
{
	struct timespec ts = { 0, 6000000 };

	nanosleep(&ts, NULL);
}

__attribute__((noinline)) void flush(void)
{
	long long t;

	spin_us(10);
	t = now_ns();
	write_out();
	write_ns += now_ns() - t;
}

__attribute__((noinline)) void store(long i)
{
	long long t;

	spin_us(10);
	if (i % 16 == 15) {
		t = now_ns();
		flush();
		flush_ns += now_ns() - t;
	}
}

__attribute__((noinline)) void lookup(void)
{
	spin_us(20);
}

__attribute__((noinline)) void parse(void)
{
	spin_us(300);
}

#ifdef STORE_BY_POINTER
static void (*volatile store_fn)(long) = store;
#define STORE store_fn
#else
#define STORE store
#endif

__attribute__((noinline)) void handle(long i)
{
	long long t = now_ns();

	parse();
	parse_ns += now_ns() - t;
	lookup();
	t = now_ns();
	STORE(i);
	store_ns += now_ns() - t;
}

struct bucket {
	long calls;
	long long handle, parse, store, flush, write;
};

static struct bucket buckets[64];

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 1600;
	long slow = 0;

	setpriority(PRIO_PROCESS, 0, -15);
	for (long i = 0; i < calls; i++) {
		long long t = now_ns(), d;
		struct bucket *b;
		int s = 0;

		store_ns = flush_ns = write_ns = parse_ns = 0;
		handle(i);
		d = now_ns() - t;
		while (s < 63 && (d >> (s + 1)))
			s++;
		b = &buckets[s];
		b->calls++;
		b->handle += d;
		b->parse += parse_ns;
		b->store += store_ns;
		b->flush += flush_ns;
		b->write += write_ns;
		slow += i % 16 == 15;
	}
	printf("calls=%ld slow=%ld\n", calls, slow);
	for (int s = 0; s < 64; s++) {
		struct bucket *b = &buckets[s];

		if (b->calls)
			printf("bucket=%d calls=%ld handle_ns=%lld parse_ns=%lld store_ns=%lld "
			       "flush_ns=%lld write_ns=%lld\n",
			       s, b->calls, b->handle, b->parse, b->store, b->flush, b->write);
	}
	return 0;
}
