/* The demo workload: one program that is held up in every way holdup can
 * tell apart. A thread computes, a thread reads a file with O_DIRECT, two
 * threads take turns on one mutex, a thread sleeps between ticks.
 * usage: demo DATAFILE */
#include "common.h"
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static const char *path;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long shared_total;

__attribute__((noinline)) void crunch_numbers(void)
{
	burn_cpu(0.8);
}

__attribute__((noinline)) void load_records(int fd, char *buf, long blocks)
{
	for (int i = 0; i < 30000; i++) {
		if (pread(fd, buf, 4096, (off_t)(rand() % blocks) * 4096) != 4096) {
			perror("pread");
			exit(1);
		}
	}
}

__attribute__((noinline)) void update_shared(void)
{
	for (int i = 0; i < 120; i++) {
		pthread_mutex_lock(&lock);
		burn_cpu(0.003);
		shared_total++;
		pthread_mutex_unlock(&lock);
	}
}

__attribute__((noinline)) void wait_for_tick(void)
{
	for (int i = 0; i < 40; i++)
		usleep(25000);
}

static void *computer(void *a) { pthread_setname_np(pthread_self(), "compute"); crunch_numbers(); return NULL; }
static void *ticker(void *a) { pthread_setname_np(pthread_self(), "ticker"); wait_for_tick(); return NULL; }
static void *worker(void *a) { pthread_setname_np(pthread_self(), "worker"); update_shared(); return NULL; }

static void *reader(void *a)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	void *buf;

	pthread_setname_np(pthread_self(), "reader");
	if (fd < 0 || posix_memalign(&buf, 4096, 4096)) {
		perror(path);
		exit(1);
	}
	load_records(fd, buf, (32L << 20) / 4096);
	close(fd);
	return NULL;
}

static void make_file(void)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	static char buf[1 << 20];

	if (fd < 0) {
		perror(path);
		exit(1);
	}
	for (int i = 0; i < 32; i++) {
		for (size_t j = 0; j < sizeof(buf); j++)
			buf[j] = (char)(j * 31 + i);
		if (write(fd, buf, sizeof(buf)) != sizeof(buf)) {
			perror("write");
			exit(1);
		}
	}
	fsync(fd);
	close(fd);
}

int main(int argc, char **argv)
{
	pthread_t t[5];
	void *(*fn[5])(void *) = { computer, reader, worker, worker, ticker };

	if (argc < 2) {
		fprintf(stderr, "usage: %s DATAFILE\n", argv[0]);
		return 2;
	}
	path = argv[1];
	make_file();
	double t0 = now_s();
	for (int i = 0; i < 5; i++)
		pthread_create(&t[i], NULL, fn[i], NULL);
	for (int i = 0; i < 5; i++)
		pthread_join(t[i], NULL);
	printf("demo: done (%lu updates)\n", shared_total);
	printf("Total time: %.3f [sec]\n", now_s() - t0);
	return 0;
}
