/*
 * Two threads meet at a barrier every round. Thread A (main) computes for
 * A_MS ms: the critical path. Thread B computes B_MS ms, writes one 4 KiB
 * block and reads READS 512 B blocks with O_DIRECT, so its round is close to
 * A's but mostly spent blocked on the disk.
 *
 * usage: causal_mixed DIR ROUNDS [A_MS=4] [B_MS=0.5] [READS=8]
 * Creates DIR/causal_mixed.dat (16 MiB) first, every block written: a read
 * of a hole returns zeros without the disk, and a sparse file filled by the
 * rounds' writes made B's reads slower the longer the program ran (its time
 * per round grew by half over 2400 rounds), so that no two runs measured
 * the same program. Prints the time per round, B's time per round and the
 * part of it in the reads; run again with a smaller A_MS (or READS) to
 * measure the actual effect of a faster line "target: a" ("target: read").
 */
#include "causal_common.h"
#ifdef USE_COZ_H
#include <coz.h>
#else
#include "../include/holdup.h"
#endif
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define FILE_SIZE (16L << 20)

static pthread_barrier_t barrier;
static long rounds, reads, a_iters, b_iters;
static int fd;
static long long b_ns, read_ns;
static char *buf;

static void *worker(void *arg)
{
	unsigned seed = 4242;
	(void)arg;
	for (long r = 0; r < rounds; r++) {
		long long t0 = now_ns();
		SPIN(b_iters); /* target: b */
		seed = seed * 1103515245u + 12345u;
		off_t w = (off_t)((seed >> 8) % (FILE_SIZE / 4096)) * 4096;
		if (pwrite(fd, buf, 4096, w) != 4096) { /* target: write */
			perror("pwrite");
			exit(1);
		}
		long long r0 = now_ns();
		for (long i = 0; i < reads; i++) {
			seed = seed * 1103515245u + 12345u;
			off_t off = (off_t)((seed >> 8) % (FILE_SIZE / 512)) * 512;
			if (pread(fd, buf, 512, off) != 512) { /* target: read */
				perror("pread");
				exit(1);
			}
		}
		long long t1 = now_ns();
		read_ns += t1 - r0;
		b_ns += t1 - t0;
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s DIR ROUNDS [A_MS] [B_MS] [READS]\n", argv[0]);
		return 2;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/causal_mixed.dat", argv[1]);
	rounds = (long)arg_d(argc, argv, 2, 300);
	long per_ms = iters_per_ms();
	a_iters = (long)(arg_d(argc, argv, 3, 4) * per_ms);
	b_iters = (long)(arg_d(argc, argv, 4, 0.5) * per_ms);
	reads = (long)arg_d(argc, argv, 5, 8);
	data_file(path, FILE_SIZE);
	fd = open(path, O_RDWR | O_DIRECT);
	if (fd < 0 || posix_memalign((void **)&buf, 4096, 4096)) {
		perror(path);
		return 1;
	}
	memset(buf, 0x5a, 4096);
	pthread_barrier_init(&barrier, NULL, 2);
	pthread_t t;
	pthread_create(&t, NULL, worker, NULL);
	long long t0 = now_ns();
	for (long r = 0; r < rounds; r++) {
		SPIN(a_iters); /* target: a */
		pthread_barrier_wait(&barrier);
		COZ_PROGRESS_NAMED("round");
	}
	long long dt = now_ns() - t0;
	pthread_join(t, NULL);
	printf("round_ns=%lld b_ns=%lld read_ns=%lld\n", dt / rounds, b_ns / rounds,
	       read_ns / rounds);
	return 0;
}
