/* A steady loop (1 ms of work, 1 ms asleep) for SECONDS, with one stall of
 * 50 ms in the middle of it, at STALL_AT seconds: a poll(2) with no file
 * descriptors, in stall_once. Prints when the stall began (CLOCK_MONOTONIC,
 * ns) and how long it took, measured by itself.
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

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 20, stall_at = argc > 2 ? atof(argv[2]) : seconds / 2;
	double t0 = now_s();
	long long began = 0, took = 0;

	while (now_s() - t0 < seconds) {
		if (!began && now_s() - t0 >= stall_at)
			stall_once(&began, &took);
		spin_us(1000);
		usleep(1000);
	}
	printf("stall_start_ns %lld\nstall_ns %lld\n", began, took);
	return 0;
}
