/* Helpers shared by the ground-truth workloads. */
#ifndef WORKLOADS_COMMON_H
#define WORKLOADS_COMMON_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static volatile unsigned long burn_sink;

/* CLOCK_MONOTONIC in ns, for workloads that time their own calls. */
__attribute__((unused)) static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Busy for `us` microseconds of wall time (on the CPU, unless preempted). */
__attribute__((unused)) static void spin_us(long us)
{
	long long end = now_ns() + us * 1000;

	while (now_ns() < end)
		burn_sink++;
}

/* Burn CPU for `s` seconds of thread CPU time (not wall time), so that the
 * amount of work is fixed even when the thread has to wait for a core. */
__attribute__((noinline, unused)) static void burn_cpu(double s)
{
	struct timespec t;
	double end;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	end = t.tv_sec + t.tv_nsec * 1e-9 + s;
	for (;;) {
		for (int i = 0; i < 20000; i++)
			burn_sink += i;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
		if (t.tv_sec + t.tv_nsec * 1e-9 >= end)
			break;
	}
}

static inline void pin_to_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static inline int arg_int(int argc, char **argv, int i, int dflt)
{
	return argc > i ? atoi(argv[i]) : dflt;
}
#endif
