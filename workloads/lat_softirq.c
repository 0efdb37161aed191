/* System calls whose time is partly softirq work: UDP datagrams sent over
 * loopback are delivered by the NET_RX softirq, which the kernel runs
 * inside the sending sendto() (when it re-enables bottom halves), on the
 * sender's CPU time. A receiver thread drains the socket. For contrast, the
 * sender also calls getppid(), which does no softirq work.
 *
 * usage: lat_softirq [DATAGRAMS]
 * prints: sent=N
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int rx;
static volatile int stop;

static void *receiver(void *arg)
{
	char buf[2048];

	(void)arg;
	while (!stop)
		recv(rx, buf, sizeof(buf), 0);
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000, sent = 0;
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	struct timeval tv = { 0, 100000 };
	char msg[1400];
	pthread_t t;
	int tx;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	rx = socket(AF_INET, SOCK_DGRAM, 0);
	tx = socket(AF_INET, SOCK_DGRAM, 0);
	if (rx < 0 || tx < 0 || bind(rx, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(rx, (struct sockaddr *)&a, &len)) {
		perror("socket");
		return 1;
	}
	setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	memset(msg, 'x', sizeof(msg));
	pthread_create(&t, NULL, receiver, NULL);
	for (long i = 0; i < n; i++) {
		sent += sendto(tx, msg, sizeof(msg), 0, (struct sockaddr *)&a, sizeof(a)) > 0;
		getppid();
	}
	stop = 1;
	pthread_join(t, NULL);
	printf("sent=%ld\n", sent);
	return 0;
}
