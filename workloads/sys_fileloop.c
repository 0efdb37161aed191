/* A small file server's inner loop: open, read and close one small file
 * `n` times (three system calls each). Prints "Total time: S [sec]" like
 * perf bench, and "calls N".
 * Usage: sys_fileloop FILE [n] */
#include "common.h"
#include <fcntl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/etc/hostname";
	int n = arg_int(argc, argv, 2, 200000);
	char buf[512];
	double t0 = now_s();

	for (int i = 0; i < n; i++) {
		int fd = open(path, O_RDONLY);

		if (fd < 0 || read(fd, buf, sizeof(buf)) < 0) {
			perror(path);
			return 1;
		}
		close(fd);
	}
	printf("     Total time: %.3f [sec]\ncalls %d\n", now_s() - t0, 3 * n);
	return 0;
}
