/* A thread blocks, from one call site, alternately in a read of a pipe and
 * in a read of a Unix socket: the same system call under the same user
 * stack, two kernel wait sites. A helper thread writes to the pipe PIPE_MS
 * after the reader starts waiting on it, and to the socket SOCK_MS after.
 * With READERS > 1 the rounds are read by that many threads, one after
 * another, each a new thread blocking where the one before did. The
 * readers time their own waits and print the seconds blocked on each:
 *   pipe <s>
 *   socket <s>
 * usage: two_waits [ROUNDS] [READERS] */
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

struct share {
	int rounds;
	double on_pipe, on_sock;
};

static void *reader(void *arg)
{
	struct share *sh = arg;

	for (int i = 0; i < sh->rounds; i++) {
		double t0 = now_s(), t1, t2;

		wait_on(pipe_fds[0]);
		t1 = now_s();
		wait_on(sock_fds[0]);
		t2 = now_s();
		sh->on_pipe += t1 - t0;
		sh->on_sock += t2 - t1;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double on_pipe = 0, on_sock = 0;
	pthread_t t, r;
	int readers;

	rounds = arg_int(argc, argv, 1, 300);
	readers = arg_int(argc, argv, 2, 1);
	if (pipe(pipe_fds) || socketpair(AF_UNIX, SOCK_STREAM, 0, sock_fds))
		return 1;
	pthread_create(&t, NULL, writer, NULL);
	for (int i = 0; i < readers; i++) {
		struct share sh = { rounds / readers + (i < rounds % readers), 0, 0 };

		pthread_create(&r, NULL, reader, &sh);
		pthread_join(r, NULL);
		on_pipe += sh.on_pipe;
		on_sock += sh.on_sock;
	}
	pthread_join(t, NULL);
	printf("pipe %.6f\nsocket %.6f\n", on_pipe, on_sock);
	return 0;
}
