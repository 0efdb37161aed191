/* A reader thread does O_DIRECT reads while two workers compute; all three
 * meet at a barrier every round. The reader is always last, so the knot is
 * {reader, disk}; the workers (one merged group) wait on the reader from
 * outside it. The file is created only if it is missing, so that a first
 * run with 0 rounds can make it outside the recording (a thread writing to
 * the same disk would join the knot).
 * usage: wg_dioread FILE ROUNDS READS_PER_ROUND */
#include "common.h"
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_MB 64
/* Large enough that the device, not the CPU cost of a request, dominates:
 * every read puts the reader to sleep. */
#define BLOCK (1 << 20)

static pthread_barrier_t barrier;
static int rounds, reads, fd;
static unsigned long checksum;

__attribute__((noinline)) static void read_blocks(char *buf, unsigned *seed)
{
	long blocks = ((long)FILE_MB << 20) / BLOCK;

	for (int i = 0; i < reads; i++) {
		off_t off = (off_t)(rand_r(seed) % blocks) * BLOCK;

		if (pread(fd, buf, BLOCK, off) != BLOCK) {
			perror("pread");
			exit(1);
		}
		checksum += buf[i % 4096];
	}
}

static void *reader(void *arg)
{
	char *buf;
	unsigned seed = 7;

	(void)arg;
	pthread_setname_np(pthread_self(), "reader");
	if (posix_memalign((void **)&buf, 4096, BLOCK))
		exit(1);
	for (int r = 0; r < rounds; r++) {
		read_blocks(buf, &seed);
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

__attribute__((noinline)) static void compute(void)
{
	burn_cpu(0.0003);
}

static void *worker(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "cruncher");
	for (int r = 0; r < rounds; r++) {
		compute();
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

static void make_file(const char *path)
{
	int out = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	char *buf = malloc(1 << 20);

	if (out < 0 || !buf) {
		perror(path);
		exit(1);
	}
	memset(buf, 3, 1 << 20);
	for (int i = 0; i < FILE_MB; i++)
		if (write(out, buf, 1 << 20) != 1 << 20) {
			perror("write");
			exit(1);
		}
	fsync(out);
	close(out);
	free(buf);
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "wg_dioread.dat";
	pthread_t t[3];
	struct stat st;

	rounds = arg_int(argc, argv, 2, 200);
	reads = arg_int(argc, argv, 3, 30);
	if (stat(path, &st) != 0 || st.st_size != (off_t)FILE_MB << 20)
		make_file(path);
	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	pthread_barrier_init(&barrier, NULL, 3);
	pthread_create(&t[0], NULL, reader, NULL);
	pthread_create(&t[1], NULL, worker, NULL);
	pthread_create(&t[2], NULL, worker, NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	printf("%lu\n", checksum);
	return 0;
}
