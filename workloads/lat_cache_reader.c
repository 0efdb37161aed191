/* Reads a file whose blocks are alternately in the page cache and not.
 *
 * The file is written, evicted as a whole (POSIX_FADV_DONTNEED), then the
 * even blocks are read back into the cache with readahead off
 * (POSIX_FADV_RANDOM), so only the odd blocks are on disk. The measured
 * pass read()s every block once; before each read, mincore() on a mapping
 * of the file tells whether the block is cached, so the workload reports
 * how many reads were hits and misses: the ground truth for the two peaks
 * of `read`. Other passes use pread(), so they do not mix into `read`.
 *
 * usage: lat_cache_reader FILE [BLOCKS] [BLOCK_KB]
 * prints: hits=N misses=M
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE [BLOCKS] [BLOCK_KB]\n", argv[0]);
		return 2;
	}
	long blocks = argc > 2 ? atol(argv[2]) : 512;
	size_t bs = (argc > 3 ? atol(argv[3]) : 32) * 1024;
	long page = sysconf(_SC_PAGESIZE);
	char *buf = malloc(bs);
	unsigned char *vec = malloc(bs / page + 1);
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || !buf || !vec)
		die("open");
	for (long i = 0; i < blocks; i++) {
		memset(buf, (int)i, bs);
		if (pwrite(fd, buf, bs, i * bs) != (ssize_t)bs)
			die("pwrite");
	}
	if (fsync(fd))
		die("fsync");
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	for (long i = 0; i < blocks; i += 2)
		if (pread(fd, buf, bs, i * bs) != (ssize_t)bs)
			die("pread");

	unsigned char *map = mmap(NULL, blocks * bs, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		die("mmap");
	long hits = 0, misses = 0;
	if (lseek(fd, 0, SEEK_SET) != 0)
		die("lseek");
	for (long i = 0; i < blocks; i++) {
		int cached = 1;

		if (mincore(map + i * bs, bs, vec))
			die("mincore");
		for (size_t p = 0; p < bs / page; p++)
			cached &= vec[p] & 1;
		if (read(fd, buf, bs) != (ssize_t)bs)
			die("read");
		if (cached)
			hits++;
		else
			misses++;
	}
	printf("hits=%ld misses=%ld\n", hits, misses);
	unlink(argv[1]);
	return 0;
}
