/* T threads append to one file: every write takes the inode's rw-semaphore,
 * so the threads wait for each other in the kernel ([L] under append_records
 * → write, wait reason in the rwsem slow path).
 * usage: kernel_lock FILE THREADS WRITES */
#include "common.h"
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static int fd;
static int writes;

__attribute__((noinline)) void append_records(void)
{
	static __thread char buf[256 << 10];

	memset(buf, 'x', sizeof(buf));
	for (int i = 0; i < writes; i++) {
		if (write(fd, buf, sizeof(buf)) != sizeof(buf)) {
			perror("write");
			exit(1);
		}
	}
}

static void *run(void *arg)
{
	append_records();
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[16];
	int n;

	if (argc < 4) {
		fprintf(stderr, "usage: %s FILE THREADS WRITES\n", argv[0]);
		return 2;
	}
	fd = open(argv[1], O_CREAT | O_TRUNC | O_WRONLY | O_APPEND, 0644);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	n = atoi(argv[2]);
	writes = atoi(argv[3]);
	if (n > 16)
		n = 16;
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, run, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	close(fd);
	unlink(argv[1]);
	return 0;
}
