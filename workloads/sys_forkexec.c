/* Processes that fork, exit and exec while recorded. The parent forks
 * `children` processes that each call getppid() exactly `calls` times and
 * exit; then it execs itself ("stage2"), which calls getppid() `calls` / 2
 * times. Prints "child_getppid N" per child and "stage2_getppid N".
 * Usage: sys_forkexec [children] [calls] */
#include "common.h"
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) static void ask_parent(int calls)
{
	for (int i = 0; i < calls; i++)
		getppid();
}

int main(int argc, char **argv)
{
	int children = arg_int(argc, argv, 1, 3), calls = arg_int(argc, argv, 2, 1000);
	char n[16], c[16];

	if (argc > 3 && strcmp(argv[3], "stage2") == 0) {
		ask_parent(calls / 2);
		printf("stage2_getppid %d\n", calls / 2);
		return 0;
	}
	for (int i = 0; i < children; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			ask_parent(calls);
			_exit(0);
		}
		waitpid(pid, NULL, 0);
		printf("child_getppid %d\n", calls);
	}
	fflush(stdout);
	snprintf(n, sizeof(n), "%d", children);
	snprintf(c, sizeof(c), "%d", calls);
	execl("/proc/self/exe", argv[0], n, c, "stage2", (char *)NULL);
	perror("exec");
	return 1;
}
