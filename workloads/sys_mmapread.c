/* Major page faults taken inside read(2). A file `dst` is mapped
 * MAP_PRIVATE after its pages were dropped from the page cache; read(2)
 * from a warm file `src` into that mapping copies to user pages that are
 * not there: the copy faults them in from disk, inside the read (DeBox
 * counts such faults for the call that took them). Then, after dropping
 * `dst` again, the program touches the mapping itself: those faults happen
 * outside any system call. It measures the major faults of each phase with
 * getrusage and prints "read_major N" and "touch_major N".
 * Usage: sys_mmapread DIR [pages] */
#include "common.h"
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static long majflt(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_majflt;
}

static int make_file(const char *p, size_t len, int c)
{
	char buf[4096];
	int fd = open(p, O_CREAT | O_RDWR | O_TRUNC, 0644);

	memset(buf, c, sizeof(buf));
	for (size_t off = 0; off < len; off += sizeof(buf))
		if (write(fd, buf, sizeof(buf)) != sizeof(buf)) {
			perror("write");
			exit(1);
		}
	fsync(fd);
	return fd;
}

static void drop_pages(int fd)
{
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}

__attribute__((noinline)) static ssize_t read_into_mapping(int fd, char *map, size_t len)
{
	return pread(fd, map, len, 0);
}

__attribute__((noinline)) static void touch_mapping(char *map, size_t len)
{
	for (size_t off = 0; off < len; off += 4096)
		map[off] = 1;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	size_t len = (size_t)arg_int(argc, argv, 2, 256) * 4096;
	char src[4096], dst[4096];
	long before, read_major, touch_major;
	int sfd, dfd;
	char *map;

	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(dst, sizeof(dst), "%s/dst", dir);
	sfd = make_file(src, len, 'a');
	dfd = make_file(dst, len, 'b');
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, dfd, 0);
	if (map == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	/* One page per fault, no read-around: every page is a major fault. */
	madvise(map, len, MADV_RANDOM);
	drop_pages(dfd);
	before = majflt();
	if (read_into_mapping(sfd, map, len) != (ssize_t)len) {
		perror("pread");
		return 1;
	}
	read_major = majflt() - before;

	munmap(map, len);
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, dfd, 0);
	madvise(map, len, MADV_RANDOM);
	drop_pages(dfd);
	before = majflt();
	touch_mapping(map, len);
	touch_major = majflt() - before;
	printf("read_major %ld\ntouch_major %ld\n", read_major, touch_major);
	return 0;
}
