/* One thread reading 4 KiB blocks with O_DIRECT at random offsets of a file,
 * timing its own loop: an I/O-bound program whose every read blocks on the
 * disk, for the overhead bench. Makes the file first (MB mebibytes) unless
 * it already has that size, so that rounds time only the reads.
 * Prints "Total time: S [sec]" and "reads=N mean_us=U".
 * usage: odirect_loop FILE MB READS */
#include "../workloads/common.h"
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOCK 4096

static void make_file(const char *path, long size)
{
	struct stat st;
	unsigned long x = 88172645463325252ul, *buf;
	int fd;

	if (!stat(path, &st) && st.st_size == size)
		return;
	buf = malloc(1 << 20);
	fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0 || !buf) {
		perror(path);
		exit(1);
	}
	for (long done = 0; done < size; done += 1 << 20) {
		/* xorshift: data a compressing disk cannot shortcut, made fast */
		for (size_t i = 0; i < (1 << 20) / sizeof(*buf); i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[i] = x;
		}
		if (write(fd, buf, 1 << 20) != 1 << 20) {
			perror("write");
			exit(1);
		}
	}
	if (fsync(fd) || close(fd)) {
		perror(path);
		exit(1);
	}
	free(buf);
}

int main(int argc, char **argv)
{
	long size, blocks;
	int fd, reads;
	void *buf;
	double t0, t;

	if (argc != 4 || (size = atol(argv[2]) << 20) < BLOCK || (reads = atoi(argv[3])) <= 0) {
		fprintf(stderr, "usage: %s FILE MB READS\n", argv[0]);
		return 2;
	}
	make_file(argv[1], size);
	fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0 || posix_memalign(&buf, BLOCK, BLOCK)) {
		perror(argv[1]);
		return 1;
	}
	blocks = size / BLOCK;
	srand(1);
	t0 = now_s();
	for (int i = 0; i < reads; i++) {
		if (pread(fd, buf, BLOCK, (off_t)(rand() % blocks) * BLOCK) != BLOCK) {
			perror("pread");
			return 1;
		}
	}
	t = now_s() - t0;
	printf("Total time: %.4f [sec]\n", t);
	printf("reads=%d mean_us=%.1f\n", reads, t / reads * 1e6);
	return 0;
}
