/*
 * Kernel-heavy: THREADS threads create, write and unlink small files in
 * one directory. Almost all of the time is in the kernel: path lookup,
 * inode and directory-entry allocation, the directory's lock, the
 * journal. With SYNC=1 each file is made durable (fdatasync) before it
 * is unlinked, and the disk holds the program up instead.
 *
 * With DEPTH > 0 the files are DEPTH directories below DIR, and both the
 * create and the unlink walk that path: the kernel's path walk is then most
 * of both lines' work, one function under two lines.
 *
 * usage: causal_files DIR ITEMS [THREADS=4] [SYNC=0] [DEPTH=0]
 * Progress: file_done(), once per file (a uprobe counts it). Prints the
 * time per file and, with SYNC=1, the time per file spent in fdatasync:
 * a disk that synced in no time would save that much per file.
 */
#include "causal_common.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[4096];
static long items_per_thread;
static int do_sync;
static long long sync_ns_total;

__attribute__((noinline)) void file_done(void)
{
	PROBED_BODY();
}

static void *worker(void *arg)
{
	long id = (long)arg;
	char path[4096], data[512] = { 1 };
	long long synced = 0;
	for (long i = 0; i < items_per_thread; i++) {
		snprintf(path, sizeof(path), "%s/f%ld-%ld", dir, id, i);
		int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
		if (fd < 0 || write(fd, data, sizeof(data)) != sizeof(data)) {
			perror(path);
			exit(1);
		}
		if (do_sync) {
			long long t0 = now_ns();
			fdatasync(fd);
			synced += now_ns() - t0;
		}
		close(fd);
		unlink(path);
		file_done();
	}
	__atomic_fetch_add(&sync_ns_total, synced, __ATOMIC_RELAXED);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: causal_files DIR ITEMS [THREADS=4] [SYNC=0]\n");
		return 2;
	}
	long items = (long)arg_d(argc, argv, 2, 20000);
	int threads = (int)arg_d(argc, argv, 3, 4);
	do_sync = (int)arg_d(argc, argv, 4, 0);
	int depth = (int)arg_d(argc, argv, 5, 0);
	snprintf(dir, sizeof(dir), "%s", argv[1]);
	for (int i = 0; i < depth && strlen(dir) + 3 < sizeof(dir) - 64; i++) {
		strcat(dir, "/d");
		if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
			perror(dir);
			return 1;
		}
	}
	items_per_thread = items / threads;
	pthread_t t[64];
	if (threads < 1 || threads > 64)
		return 2;
	long long t0 = now_ns();
	for (long i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	long done = items_per_thread * threads;
	printf("file_ns=%lld\n", (now_ns() - t0) / done);
	/* Per file of the program: the threads sync in parallel, so the
	 * summed sync time is divided by the threads too. */
	printf("sync_ns=%lld\n", sync_ns_total / done / threads);
	return 0;
}
