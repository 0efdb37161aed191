/* A client and a server thread play ping-pong over a TCP loopback
 * connection or a Unix socket pair; the server burns CPU per request. The
 * client waits for the server: on loopback the server's send runs the
 * client's NET_RX softirq in the server's own context, so the server is the
 * client's waker, not the network.
 * usage: wg_pingpong tcp|unix ROUNDS WORK_SECONDS */
#include "common.h"
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int rounds;
static double work;

static void xfer(int fd, int out)
{
	char b = 'x';

	if ((out ? write(fd, &b, 1) : read(fd, &b, 1)) != 1) {
		perror(out ? "write" : "read");
		exit(1);
	}
}

__attribute__((noinline)) static void serve_request(void)
{
	burn_cpu(work);
}

static void *server(void *arg)
{
	int fd = *(int *)arg;

	pthread_setname_np(pthread_self(), "server");
	for (int i = 0; i < rounds; i++) {
		xfer(fd, 0);
		serve_request();
		xfer(fd, 1);
	}
	return NULL;
}

static void *client(void *arg)
{
	int fd = *(int *)arg;

	pthread_setname_np(pthread_self(), "client");
	for (int i = 0; i < rounds; i++) {
		xfer(fd, 1);
		xfer(fd, 0);
	}
	return NULL;
}

static void tcp_pair(int sv[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int one = 1;
	int l = socket(AF_INET, SOCK_STREAM, 0);

	if (l < 0 || bind(l, (void *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (void *)&a, &len)) {
		perror("listen");
		exit(1);
	}
	sv[0] = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(sv[0], (void *)&a, sizeof(a))) {
		perror("connect");
		exit(1);
	}
	sv[1] = accept(l, NULL, NULL);
	if (sv[1] < 0) {
		perror("accept");
		exit(1);
	}
	setsockopt(sv[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(sv[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	close(l);
}

int main(int argc, char **argv)
{
	pthread_t c, s;
	int sv[2];

	if (argc != 4) {
		fprintf(stderr, "usage: wg_pingpong tcp|unix ROUNDS WORK_SECONDS\n");
		return 2;
	}
	rounds = atoi(argv[2]);
	work = atof(argv[3]);
	if (!strcmp(argv[1], "tcp")) {
		tcp_pair(sv);
	} else if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		perror("socketpair");
		return 1;
	}
	pthread_create(&c, NULL, client, &sv[0]);
	pthread_create(&s, NULL, server, &sv[1]);
	pthread_join(c, NULL);
	pthread_join(s, NULL);
	return 0;
}
