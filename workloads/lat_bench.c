/* Per-call cost of latency instrumentation: calls one operation N times in
 * a tight loop and prints the mean time per call, measured by the program
 * itself (CLOCK_MONOTONIC around the loop).
 *
 * usage: lat_bench syscall|read|func N
 *   syscall: getppid(), a system call that does almost nothing
 *   read:    read() of one byte from /dev/zero (vfs_read, for fentry)
 *   func:    bench_func(), an empty user function (uprobe target)
 * prints: ns_per_call=X
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile long sink;

__attribute__((noinline)) void bench_func(long i)
{
	sink += i;
	__asm__ volatile("" ::: "memory");
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s syscall|read|func N\n", argv[0]);
		return 2;
	}
	long n = atol(argv[2]);
	int sys = !strcmp(argv[1], "syscall");
	int fd = !strcmp(argv[1], "read") ? open("/dev/zero", O_RDONLY) : -1;
	char c;
	double t0 = now();

	for (long i = 0; i < n; i++) {
		if (sys)
			syscall(SYS_getppid);
		else if (fd >= 0)
			sink += read(fd, &c, 1);
		else
			bench_func(i);
	}
	printf("ns_per_call=%.1f\n", (now() - t0) / n);
	return 0;
}
