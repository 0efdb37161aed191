/* A program that reads its own system-call results in band
 * (include/holdup_debox.h), as DeBox's web server did: it reads a file
 * through a mapping that is not in memory (so the reads take major faults
 * and wait for the disk) and prints, for each of its reads, what the
 * recorder says it cost: "inband WALL_NS IO_NS MAJ_FLT". Ends with
 * "inband_reads N" (N = reads for which a result was available).
 * Usage: sys_inband DIR [pages] */
#include "common.h"
#include "../include/holdup_debox.h"
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>

#define CHUNK (16 * 4096)

struct result {
	unsigned long long wall, io;
	unsigned maj;
};

__attribute__((noinline)) static ssize_t read_chunk(int fd, char *to, off_t off)
{
	return pread(fd, to, CHUNK, off);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	size_t len = (size_t)arg_int(argc, argv, 2, 256) * 4096;
	static struct result res[4096];
	char src[4096], dst[4096], buf[4096];
	int sfd, dfd, n = 0;
	char *map;

	if (holdup_debox_open()) {
		fprintf(stderr, "no in-band results (run under holdup record --syscalls --inband)\n");
		return 1;
	}
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(dst, sizeof(dst), "%s/dst", dir);
	sfd = open(src, O_CREAT | O_RDWR | O_TRUNC, 0644);
	dfd = open(dst, O_CREAT | O_RDWR | O_TRUNC, 0644);
	memset(buf, 'a', sizeof(buf));
	for (size_t off = 0; off < len; off += sizeof(buf))
		if (write(sfd, buf, sizeof(buf)) != sizeof(buf) ||
		    write(dfd, buf, sizeof(buf)) != sizeof(buf))
			return 1;
	fsync(sfd);
	fsync(dfd);
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, dfd, 0);
	madvise(map, len, MADV_RANDOM);
	posix_fadvise(dfd, 0, 0, POSIX_FADV_DONTNEED);
	for (size_t off = 0; off + CHUNK <= len && n < 4096; off += CHUNK) {
		const volatile struct holdup_debox *d;

		if (read_chunk(sfd, map + off, off) != CHUNK)
			return 1;
		d = holdup_debox_last();
		if (d) {
			res[n].wall = d->wall_ns;
			res[n].io = d->blocked_ns[HOLDUP_DEBOX_IO];
			res[n].maj = d->maj_flt;
			n++;
		}
	}
	for (int i = 0; i < n; i++)
		printf("inband %llu %llu %u\n", res[i].wall, res[i].io, res[i].maj);
	printf("inband_reads %d\n", n);
	return 0;
}
