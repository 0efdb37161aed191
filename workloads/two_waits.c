/* One thread blocks, from one call site, alternately in a read of a pipe and
 * in a read of a Unix socket: the same system call under the same user
 * stack, two kernel wait sites. A helper thread writes to the pipe PIPE_MS
 * after the reader starts waiting on it, and to the socket SOCK_MS after.
 * The reader times its own waits and prints the seconds blocked on each:
 *   pipe <s>
 *   socket <s>
 * usage: two_waits [ROUNDS] */
#include "common.h"
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#define PIPE_MS 3
#define SOCK_MS 1

static int pipe_fds[2], sock_fds[2];
static int rounds;

__attribute__((noinline)) static void wait_on(int fd)
{
	char c;

	if (read(fd, &c, 1) != 1)
		exit(1);
}

static void *writer(void *arg)
{
	char c = 1;

	(void)arg;
	for (int i = 0; i < rounds; i++) {
		usleep(PIPE_MS * 1000);
		if (write(pipe_fds[1], &c, 1) != 1)
			exit(1);
		usleep(SOCK_MS * 1000);
		if (write(sock_fds[1], &c, 1) != 1)
			exit(1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double on_pipe = 0, on_sock = 0;
	pthread_t t;

	rounds = arg_int(argc, argv, 1, 300);
	if (pipe(pipe_fds) || socketpair(AF_UNIX, SOCK_STREAM, 0, sock_fds))
		return 1;
	pthread_create(&t, NULL, writer, NULL);
	for (int i = 0; i < rounds; i++) {
		double t0 = now_s(), t1, t2;

		wait_on(pipe_fds[0]);
		t1 = now_s();
		wait_on(sock_fds[0]);
		t2 = now_s();
		on_pipe += t1 - t0;
		on_sock += t2 - t1;
	}
	pthread_join(t, NULL);
	printf("pipe %.6f\nsocket %.6f\n", on_pipe, on_sock);
	return 0;
}
