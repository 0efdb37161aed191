/* N processes pass a token round a ring of pipes, ROUNDS times: every hop
 * is one read that blocks until the process before wrote, about N hops
 * long, so nearly every block spans a sampling point and makes a blocked
 * sample: a known count of them, far steadier from run to run than a
 * context-switch storm's. Prints its own run time like perf bench:
 *   Total time: <s> [sec]
 * usage: token_ring [N] [ROUNDS] */
#include "common.h"
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) static void pass_token(int in, int out, int rounds, int first)
{
	char c;

	for (int k = 0; k < rounds; k++) {
		if (!(first && k == 0) && read(in, &c, 1) != 1)
			_exit(1);
		if (write(out, "x", 1) != 1)
			_exit(1);
	}
	/* The first one takes the token back after the last round. */
	if (first && read(in, &c, 1) != 1)
		_exit(1);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;
	int rounds = argc > 2 ? atoi(argv[2]) : 1000;
	int (*fds)[2] = calloc(n, sizeof(*fds));
	double t0;

	if (n < 2 || rounds < 1 || !fds)
		return 2;
	for (int i = 0; i < n; i++)
		if (pipe(fds[i]))
			return 1;
	t0 = now_s();
	for (int i = 0; i < n; i++) {
		if (fork() == 0) {
			pass_token(fds[i][0], fds[(i + 1) % n][1], rounds, i == 0);
			_exit(0);
		}
	}
	for (int i = 0; i < n; i++)
		wait(NULL);
	printf("Total time: %.3f [sec]\n", now_s() - t0);
	return 0;
}
