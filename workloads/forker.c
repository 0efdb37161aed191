/* Forks a child that computes, then execs PROGRAM ARGS; the parent waits.
 * Both the forked child and the exec'd program must be recorded.
 * usage: forker PROGRAM [ARGS...] */
#include "common.h"
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) void child_work(void)
{
	burn_cpu(0.1);
}

int main(int argc, char **argv)
{
	pid_t pid;
	int status;

	if (argc < 2) {
		fprintf(stderr, "usage: %s PROGRAM [ARGS...]\n", argv[0]);
		return 2;
	}
	pid = fork();
	if (pid == 0) {
		child_work();
		execv(argv[1], argv + 1);
		perror("execv");
		_exit(127);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
