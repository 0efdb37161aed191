/* A thread that reads a file of random data with O_DIRECT at random
 * offsets: nearly all of its time is I/O wait ([I]) under do_reads → pread.
 * Larger blocks make the device's share larger against the CPU cost of
 * each request. usage: direct_reads FILE MB READS [BLOCK_KB] */
#include "common.h"
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static const char *path;
static long size;
static int reads;
static long block = 4096;
static unsigned long checksum;

static void make_file(void)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	char *buf = malloc(1 << 20);

	if (fd < 0 || !buf) {
		perror(path);
		exit(1);
	}
	srand(42);
	for (long done = 0; done < size; done += 1 << 20) {
		for (int i = 0; i < (1 << 20); i++)
			buf[i] = rand();
		if (write(fd, buf, 1 << 20) != 1 << 20) {
			perror("write");
			exit(1);
		}
	}
	fsync(fd);
	close(fd);
	free(buf);
}

__attribute__((noinline)) void do_reads(int fd, char *buf)
{
	long blocks = size / block;

	for (int i = 0; i < reads; i++) {
		off_t off = (off_t)(rand() % blocks) * block;

		if (pread(fd, buf, block, off) != block) {
			perror("pread");
			exit(1);
		}
		checksum += buf[i % 4096];
	}
}

static void *reader(void *arg)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	void *buf;

	if (fd < 0 || posix_memalign(&buf, 4096, block)) {
		perror(path);
		exit(1);
	}
	do_reads(fd, buf);
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;

	if (argc < 4) {
		fprintf(stderr, "usage: %s FILE MB READS [BLOCK_KB]\n", argv[0]);
		return 2;
	}
	path = argv[1];
	size = atol(argv[2]) << 20;
	reads = atoi(argv[3]);
	if (argc > 4)
		block = atol(argv[4]) << 10;
	make_file();
	pthread_create(&t, NULL, reader, NULL);
	pthread_join(t, NULL);
	printf("%lu\n", checksum);
	return 0;
}
