/* Shared helpers of the causal_* workloads (holdup causal's end-to-end tests). */
#ifndef CAUSAL_COMMON_H
#define CAUSAL_COMMON_H
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* CPU time of the calling thread, kernel time included. */
static inline long long thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The body of a function that a uprobe counts: clobbering a callee-saved
 * register makes the function start with a push, as most functions do,
 * which the kernel emulates. A bare `ret` it would single-step, ~20 µs a
 * visit on some virtual machines: longer than some rounds here. */
#define PROBED_BODY() __asm__ volatile("" ::: "rbx", "memory")

static volatile double spin_sink;

/* n steps of a dependent floating-point chain. A macro, so that the loop's
 * code belongs to the line that invokes it: each target is one line. */
#define SPIN(n) do { double x_ = 1.0; for (long i_ = 0; i_ < (long)(n); i_++) x_ = x_ * 1.0000001 + 0.5; spin_sink = x_; } while (0)

__attribute__((noinline)) static double spin(long n)
{
	SPIN(n);
	return spin_sink;
}

/* Iterations of SPIN per millisecond, measured once. */
__attribute__((unused)) static long iters_per_ms(void)
{
	/* Runs that are compared must do the same work: the tests measure
	 * once and pass the result to every run. */
	const char *fixed = getenv("CAUSAL_ITERS_PER_MS");
	if (fixed && atol(fixed) > 0)
		return atol(fixed);
	long n = 200000;
	long long best = -1;
	for (int k = 0; k < 5; k++) {
		long long t0 = now_ns();
		spin(n);
		long long dt = now_ns() - t0;
		if (best < 0 || dt < best)
			best = dt;
	}
	return (long)((double)n * 1e6 / (double)best);
}

/* The data file of an I/O workload, `size` bytes, made once with every
 * block written: a read of a hole returns zeros without the disk. Made
 * under another name and renamed, so that a run starting on the same
 * directory never sees it half written. */
__attribute__((unused)) static void data_file(const char *path, long size)
{
	if (access(path, R_OK) == 0)
		return;
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int w = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char *chunk = malloc(1 << 20);
	if (w < 0 || !chunk) {
		perror(tmp);
		exit(1);
	}
	memset(chunk, 0x5a, 1 << 20);
	for (long off = 0; off < size; off += 1 << 20)
		if (write(w, chunk, 1 << 20) != 1 << 20) {
			perror("write");
			exit(1);
		}
	if (fsync(w) != 0 || close(w) != 0 || rename(tmp, path) != 0) {
		perror(path);
		exit(1);
	}
	free(chunk);
}

static double arg_d(int argc, char **argv, int i, double dflt)
{
	return argc > i ? atof(argv[i]) : dflt;
}
#endif
