/* wPerf's Figure 1: a producer hands items to a consumer that writes each
 * one to the disk synchronously (O_DIRECT | O_DSYNC). The consumer and the
 * disk take turns, so {consumer, disk} is the knot; the producer waits
 * longest (on a full queue) but is outside it.
 * usage: wg_prodcons FILE ITEMS */
#include "common.h"
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define QCAP 4
#define BLOCKS 256

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static int queued, finished, items, fd;
static char *buf;

__attribute__((noinline)) static void produce_item(void)
{
	burn_cpu(0.0001);
}

__attribute__((noinline)) static void put_item(void)
{
	pthread_mutex_lock(&mu);
	while (queued == QCAP)
		pthread_cond_wait(&not_full, &mu);
	queued++;
	pthread_cond_signal(&not_empty);
	pthread_mutex_unlock(&mu);
}

static void *producer(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "producer");
	for (int i = 0; i < items; i++) {
		produce_item();
		put_item();
	}
	pthread_mutex_lock(&mu);
	finished = 1;
	pthread_cond_signal(&not_empty);
	pthread_mutex_unlock(&mu);
	return NULL;
}

__attribute__((noinline)) static void write_item(int i)
{
	memset(buf, i, 4096);
	if (pwrite(fd, buf, 4096, (off_t)(i % BLOCKS) * 4096) != 4096) {
		perror("pwrite");
		exit(1);
	}
}

static void *consumer(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "consumer");
	for (int i = 0;; i++) {
		pthread_mutex_lock(&mu);
		while (queued == 0 && !finished)
			pthread_cond_wait(&not_empty, &mu);
		if (queued == 0) {
			pthread_mutex_unlock(&mu);
			break;
		}
		queued--;
		pthread_cond_signal(&not_full);
		pthread_mutex_unlock(&mu);
		burn_cpu(0.0003);
		write_item(i);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t p, c;
	const char *path = argc > 1 ? argv[1] : "wg_prodcons.dat";

	items = arg_int(argc, argv, 2, 2000);
	/* Allocate the blocks first, so that the loop overwrites them and
	 * needs no journal commits. */
	fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0 || posix_memalign((void **)&buf, 4096, 4096)) {
		perror(path);
		return 1;
	}
	memset(buf, 1, 4096);
	for (int i = 0; i < BLOCKS; i++)
		if (write(fd, buf, 4096) != 4096) {
			perror("write");
			return 1;
		}
	fsync(fd);
	close(fd);
	fd = open(path, O_WRONLY | O_DIRECT | O_DSYNC);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	pthread_create(&c, NULL, consumer, NULL);
	pthread_create(&p, NULL, producer, NULL);
	pthread_join(p, NULL);
	pthread_join(c, NULL);
	close(fd);
	return 0;
}
