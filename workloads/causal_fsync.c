/*
 * Two threads log under one mutex: each iteration writes a 4 KiB record and
 * makes it durable with SYNCS fdatasync calls while holding the mutex, then
 * computes NC ms outside it. The synchronous writes inside the critical
 * section are the bottleneck, and they are off-CPU: only blocked samples
 * see them. The other thread's wait for the mutex is no target.
 *
 * usage: causal_fsync DIR ITERATIONS [SYNCS=2] [NC_MS=1]
 * SYNCS may be fractional: 1.5 is one sync on odd iterations, two on even.
 * Prints the time per iteration, the time spent syncing per iteration and
 * the part of it the thread was on a CPU (the system calls' own work); run
 * again with fewer SYNCS to measure the actual effect of a faster "target:
 * sync".
 */
#include "causal_common.h"
#ifdef USE_COZ_H
#include <coz.h> /* COZ's own header: the runtime speaks its ABI */
#else
#include "../include/holdup.h"
#endif
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define WORKERS 2

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long iterations, nc_iters;
static double syncs;
static int fd;
static long long sync_ns, sync_cpu_ns;
static char block[4096];

static void log_record(long i)
{
	/* The first i·syncs syncs, rounded down, are done by iteration i. */
	long n = (long)((i + 1) * syncs) - (long)(i * syncs);
	for (long k = 0; k < n; k++) {
		if (pwrite(fd, block, sizeof(block), (i % 256) * 4096) != sizeof(block)) {
			perror("pwrite");
			exit(1);
		}
		if (fdatasync(fd) != 0) { /* target: sync */
			perror("fdatasync");
			exit(1);
		}
	}
}

static void *worker(void *arg)
{
	(void)arg;
	for (long i = 0; i < iterations; i++) {
		pthread_mutex_lock(&lock);
		long long t0 = now_ns(), c0 = thread_cpu_ns();
		log_record(i);
		sync_ns += now_ns() - t0;
		sync_cpu_ns += thread_cpu_ns() - c0;
		pthread_mutex_unlock(&lock);
		SPIN(nc_iters); /* target: nc */
		COZ_PROGRESS_NAMED("iteration");
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s DIR ITERATIONS [SYNCS] [NC_MS]\n", argv[0]);
		return 2;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/causal_fsync.log", argv[1]);
	iterations = (long)arg_d(argc, argv, 2, 300);
	syncs = arg_d(argc, argv, 3, 2);
	nc_iters = (long)(arg_d(argc, argv, 4, 1) * iters_per_ms());
	memset(block, 'x', sizeof(block));
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	pthread_t t[WORKERS];
	long long t0 = now_ns();
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(t[i], NULL);
	long long dt = now_ns() - t0;
	printf("iteration_ns=%lld sync_ns=%lld sync_cpu_ns=%lld\n", dt / (iterations * WORKERS),
	       sync_ns / (iterations * WORKERS), sync_cpu_ns / (iterations * WORKERS));
	return 0;
}
