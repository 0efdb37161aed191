/*
 * Kernel-heavy, with one kernel function under several lines: THREADS
 * threads look up one file DEPTH directories deep, four ways per round
 * (stat, access, open+close, readlink of a link beside it), each on its
 * own line. Every call walks the whole path, so the kernel's path walk is
 * most of every line's work: made faster, it would speed up all four
 * lines at once, more than any one line could.
 *
 * usage: causal_lookup DIR ROUNDS [THREADS=2] [DEPTH=200]
 * Progress: round_done(), once per round (a uprobe counts it). Prints the
 * time per round.
 */
#include "causal_common.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char path[8192], link_path[8192];
static long rounds_per_thread;

__attribute__((noinline)) void round_done(void)
{
	PROBED_BODY();
}

static void *worker(void *arg)
{
	(void)arg;
	struct stat st;
	char target[64];
	for (long i = 0; i < rounds_per_thread; i++) {
		stat(path, &st);                              /* target: stat */
		access(path, R_OK);                           /* target: access */
		close(open(path, O_RDONLY));                  /* target: open */
		readlink(link_path, target, sizeof(target)); /* target: readlink */
		round_done();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: causal_lookup DIR ROUNDS [THREADS=2] [DEPTH=200]\n");
		return 2;
	}
	long rounds = (long)arg_d(argc, argv, 2, 100000);
	int threads = (int)arg_d(argc, argv, 3, 2);
	int depth = (int)arg_d(argc, argv, 4, 200);
	snprintf(path, sizeof(path), "%s", argv[1]);
	for (int i = 0; i < depth && strlen(path) + 8 < sizeof(path) - 64; i++) {
		strcat(path, "/dir");
		if (mkdir(path, 0700) != 0 && errno != EEXIST) {
			perror(path);
			return 1;
		}
	}
	snprintf(link_path, sizeof(link_path), "%s/link", path);
	strcat(path, "/file");
	close(open(path, O_CREAT | O_WRONLY, 0600));
	unlink(link_path);
	if (symlink("file", link_path) != 0) {
		perror(link_path);
		return 1;
	}
	pthread_t t[64];
	if (threads < 1 || threads > 64)
		return 2;
	rounds_per_thread = rounds / threads;
	long long t0 = now_ns();
	for (long i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	printf("round_ns=%lld\n", (now_ns() - t0) / (rounds_per_thread * threads));
	return 0;
}
