/*
 * Two threads meet at a barrier every round: the main thread computes for
 * A ms, the worker reads N random 256 KiB blocks with O_DIRECT (about
 * 0.5 ms each on a virtio disk). The reads are the critical path, and they
 * are off-CPU: only blocked samples see them (COZ cannot).
 *
 * usage: causal_odirect DIR ROUNDS [READS=20] [A_MS=5] [CPU_READS=READS]
 * Creates DIR/causal_odirect.dat (64 MiB) first. Prints the time per round,
 * the reading time per round and the part of it the reader spent off the
 * CPU (a faster disk shortens only that part); run again with fewer READS to
 * measure the actual effect of faster reads on line "target: read".
 * A disk twice as fast is READS=10 CPU_READS=20: the reader waits for ten
 * reads but burns the CPU time of twenty (the CPU its reads take, on
 * average, in the same round), so only the waiting changes.
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

#define BLOCK (256 << 10)
#define FILE_SIZE (64L << 20)

static pthread_barrier_t barrier;
static long rounds, reads, cpu_reads, a_iters;
static int fd;
static long long read_ns, read_cpu_ns;
static char *buf;

static void do_reads(unsigned *seed)
{
	for (long i = 0; i < reads; i++) {
		*seed = *seed * 1103515245u + 12345u;
		off_t off = (off_t)((*seed >> 8) % (FILE_SIZE / BLOCK)) * BLOCK;
		if (pread(fd, buf, BLOCK, off) != BLOCK) { /* target: read */
			perror("pread");
			exit(1);
		}
	}
}

static void *reader(void *arg)
{
	unsigned seed = 12345;
	(void)arg;
	for (long r = 0; r < rounds; r++) {
		long long t0 = now_ns(), c0 = thread_cpu_ns();
		do_reads(&seed);
		if (cpu_reads > reads) {
			long long now = thread_cpu_ns();
			long long until = now + (now - c0) * (cpu_reads - reads) / reads;
			while (thread_cpu_ns() < until)
				SPIN(1000); /* the CPU of reads a faster disk still does */
		}
		read_ns += now_ns() - t0;
		read_cpu_ns += thread_cpu_ns() - c0;
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

/* Progress without recompiling: a uprobe on it counts the rounds. */
__attribute__((noinline)) void round_done(void)
{
	PROBED_BODY();
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s DIR ROUNDS [READS] [A_MS]\n", argv[0]);
		return 2;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/causal_odirect.dat", argv[1]);
	rounds = (long)arg_d(argc, argv, 2, 200);
	reads = (long)arg_d(argc, argv, 3, 20);
	cpu_reads = (long)arg_d(argc, argv, 5, (double)reads);
	long per_ms = iters_per_ms();
	a_iters = (long)(arg_d(argc, argv, 4, 5) * per_ms);
	data_file(path, FILE_SIZE);
	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0 || posix_memalign((void **)&buf, 4096, BLOCK)) {
		perror(path);
		return 1;
	}
	pthread_barrier_init(&barrier, NULL, 2);
	pthread_t t;
	pthread_create(&t, NULL, reader, NULL);
	long long t0 = now_ns();
	for (long r = 0; r < rounds; r++) {
		SPIN(a_iters); /* target: compute */
		pthread_barrier_wait(&barrier);
		COZ_PROGRESS_NAMED("round");
		round_done();
	}
	long long dt = now_ns() - t0;
	pthread_join(t, NULL);
	printf("round_ns=%lld read_ns=%lld read_wait_ns=%lld\n", dt / rounds,
	       read_ns / rounds, (read_ns - read_cpu_ns) / rounds);
	return 0;
}
