/* Threads contending on one pipe. `readers` threads ("reader") read one
 * byte at a time from one pipe; one thread ("writer") writes `n` bytes, one
 * every `gap_us` microseconds, so readers sleep in read(2) until the writer
 * wakes one. Every reader measures the wall time of its reads and prints
 * "read_wall_ns TOTAL" once for all; "reads N" is the number of reads.
 * Usage: sys_pipe [readers] [n] [gap_us] */
#include "common.h"
#include <pthread.h>
#include <unistd.h>

static int fds[2];
static long total_ns, reads;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static long ns_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

__attribute__((noinline)) static int read_one(char *c)
{
	return read(fds[0], c, 1);
}

static void *reader(void *arg)
{
	long mine = 0, n = 0, t;
	char c;

	(void)arg;
	pthread_setname_np(pthread_self(), "reader");
	for (;;) {
		t = ns_now();
		if (read_one(&c) != 1)
			break;
		mine += ns_now() - t;
		n++;
		if (c == 'q')
			break;
	}
	pthread_mutex_lock(&mu);
	total_ns += mine;
	reads += n;
	pthread_mutex_unlock(&mu);
	return NULL;
}

__attribute__((noinline)) static void write_one(char c)
{
	if (write(fds[1], &c, 1) != 1)
		exit(1);
}

int main(int argc, char **argv)
{
	int readers = arg_int(argc, argv, 1, 2), n = arg_int(argc, argv, 2, 200);
	int gap_us = arg_int(argc, argv, 3, 2000);
	pthread_t th[64];

	if (readers > 64)
		readers = 64;
	if (pipe(fds))
		return 1;
	for (int i = 0; i < readers; i++)
		pthread_create(&th[i], NULL, reader, NULL);
	pthread_setname_np(pthread_self(), "writer");
	for (int i = 0; i < n; i++) {
		usleep(gap_us);
		write_one('x');
	}
	for (int i = 0; i < readers; i++)
		write_one('q');
	for (int i = 0; i < readers; i++)
		pthread_join(th[i], NULL);
	printf("read_wall_ns %ld\nreads %ld\n", total_ns, reads);
	return 0;
}
