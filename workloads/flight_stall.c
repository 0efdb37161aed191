/* A steady loop of requests (handle_request: 1 ms of work, then 1 ms
 * asleep) for SECONDS, with one stall of 50 ms in the middle of it, at
 * STALL_AT seconds: a poll(2) with no file descriptors, in stall_once,
 * called by that one request. Prints, as soon as the stall is over, when it
 * began (CLOCK_MONOTONIC, ns) and how long it took, measured by itself.
 * usage: flight_stall [SECONDS [STALL_AT]] */
#include "common.h"
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((noinline)) void stall_once(long long *began, long long *took)
{
	*began = now_ns();
	syscall(SYS_poll, NULL, 0, 50);
	*took = now_ns() - *began;
}

/* About 1 ms, and once about 51 ms: the request that stalls. */
__attribute__((noinline)) void handle_request(int stall, long long *began, long long *took)
{
	spin_us(1000);
	if (stall)
		stall_once(began, took);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 20, stall_at = argc > 2 ? atof(argv[2]) : seconds / 2;
	double t0 = now_s();
	long long began = 0, took = 0;

	while (now_s() - t0 < seconds) {
		int stall = !began && now_s() - t0 >= stall_at;

		handle_request(stall, &began, &took);
		if (stall) {
			/* Said at once: a test may ask for the trace after it. */
			printf("stall_start_ns %lld\nstall_ns %lld\n", began, took);
			fflush(stdout);
		}
		usleep(1000);
	}
	return 0;
}
