/*
 * Two processes connected by a pipe: the parent (the writer) produces an
 * item every W ms and writes it to the pipe; the child (the reader) reads
 * each item and works on it for R ms (line "target: r") and then O ms
 * (line "target: o"). The reader is the bottleneck, so making its line r
 * x% faster speeds the program up by x·R/(R+O) until the writer becomes
 * the bottleneck. A profiler that delays only the threads of one process
 * cannot see this: the line is in a process the command forks. Items are
 * a page each and the pipe holds 32: the writer stays at most ~0.1 s ahead
 * (it waits for the reader all along), which absorbs the delays it pays.
 *
 * The processes are named "reader" and "writer" (process targets).
 *
 * usage: causal_procpipe ITEMS [R_MS=2] [O_MS=1] [W_MS=0.5]
 * The reader prints the time per item; run again with a smaller R_MS to
 * measure the effect of a faster line r.
 */
#include "causal_common.h"
#ifdef USE_COZ_H
#include <coz.h>
#else
#include "../include/holdup.h"
#endif
#include <fcntl.h>
#include <sys/prctl.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#define ITEM_BYTES 4096

static char item[ITEM_BYTES];

static void read_item(int fd)
{
	size_t got = 0;
	while (got < ITEM_BYTES) {
		ssize_t n = read(fd, item + got, ITEM_BYTES - got);
		if (n <= 0)
			exit(1);
		got += (size_t)n;
	}
}

/* Progress without recompiling: a uprobe on it counts the items. */
__attribute__((noinline)) void item_done(void)
{
	PROBED_BODY();
}

int main(int argc, char **argv)
{
	long items = (long)arg_d(argc, argv, 1, 500);
	long per_ms = iters_per_ms();
	long r_iters = (long)(arg_d(argc, argv, 2, 2) * per_ms);
	long o_iters = (long)(arg_d(argc, argv, 3, 1) * per_ms);
	long w_iters = (long)(arg_d(argc, argv, 4, 0.5) * per_ms);
	int p[2];
	if (pipe(p) != 0)
		return 1;
	fcntl(p[1], F_SETPIPE_SZ, 32 * ITEM_BYTES);
	pid_t child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		prctl(PR_SET_NAME, "reader");
		close(p[1]);
		read_item(p[0]);
		long long t0 = now_ns();
		for (long i = 1; i < items; i++) {
			read_item(p[0]);
			SPIN(r_iters); /* target: r */
			SPIN(o_iters); /* target: o */
			COZ_PROGRESS_NAMED("item");
			item_done();
		}
		printf("item_ns=%lld\n", (now_ns() - t0) / (items - 1));
		return 0;
	}
	prctl(PR_SET_NAME, "writer");
	close(p[0]);
	for (long i = 0; i < items; i++) {
		SPIN(w_iters); /* target: w */
		if (write(p[1], item, ITEM_BYTES) != ITEM_BYTES)
			return 1;
	}
	close(p[1]);
	int status;
	waitpid(child, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
