/* Cold and warm opens. Creates `n` files in a fresh directory, syncs and
 * drops the kernel's caches (dentries, inodes and pages: needs root), then
 * opens every file twice: first cold (the lookup reads the directory and
 * the inodes from disk), then warm. Each phase has its own function, so its
 * opens have their own call site. Also calls getppid() exactly `calls`
 * times. Prints what it did: "cold_opens N", "warm_opens N", "getppid N".
 * Usage: sys_open DIR [n] [calls] */
#include "common.h"
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char path[4096];

static const char *name_of(const char *dir, int i)
{
	snprintf(path, sizeof(path), "%s/f%05d", dir, i);
	return path;
}

__attribute__((noinline)) static int cold_open(const char *p)
{
	return open(p, O_RDONLY);
}

__attribute__((noinline)) static int warm_open(const char *p)
{
	return open(p, O_RDONLY);
}

__attribute__((noinline)) static void ask_parent(int calls)
{
	for (int i = 0; i < calls; i++)
		getppid();
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "sys_open.d";
	int n = arg_int(argc, argv, 2, 200), calls = arg_int(argc, argv, 3, 10000);
	int cold = 0, warm = 0, fd, drop;

	mkdir(dir, 0755);
	for (int i = 0; i < n; i++) {
		fd = open(name_of(dir, i), O_CREAT | O_WRONLY | O_TRUNC, 0644);
		if (fd < 0 || write(fd, "x", 1) != 1) {
			perror("create");
			return 1;
		}
		close(fd);
	}
	sync();
	drop = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (drop < 0 || write(drop, "3", 1) != 1) {
		perror("drop_caches");
		return 1;
	}
	close(drop);
	for (int i = 0; i < n; i++) {
		fd = cold_open(name_of(dir, i));
		if (fd >= 0) {
			cold++;
			close(fd);
		}
	}
	for (int i = 0; i < n; i++) {
		fd = warm_open(name_of(dir, i));
		if (fd >= 0) {
			warm++;
			close(fd);
		}
	}
	ask_parent(calls);
	printf("cold_opens %d\nwarm_opens %d\ngetppid %d\n", cold, warm, calls);
	return 0;
}
