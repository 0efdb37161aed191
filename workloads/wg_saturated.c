/* A single-threaded epoll server that burns fixed CPU per request, driven
 * over TCP loopback by more closed-loop clients than it can serve: the
 * server is saturated (on CPU or runnable nearly all the time) and every
 * client waits for it. At the end the server prints what it measured of
 * itself from /proc (schedstat: time on CPU and time runnable):
 *   server tid T life_ns L cpu_ns C runnable_ns R
 * usage: wg_saturated CLIENTS SECONDS WORK_SECONDS */
#include "common.h"
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static double seconds, work;
static atomic_int stop;
static struct sockaddr_in addr = { .sin_family = AF_INET };
static int listener;

static void schedstat(pid_t tid, unsigned long long *cpu, unsigned long long *delay)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
	f = fopen(path, "r");
	if (!f || fscanf(f, "%llu %llu", cpu, delay) != 2) {
		perror("schedstat");
		exit(1);
	}
	fclose(f);
}

__attribute__((noinline)) static void handle_request(void)
{
	burn_cpu(work);
}

static void *server(void *arg)
{
	int clients = *(int *)arg, ep = epoll_create1(0), one = 1;
	pid_t tid = syscall(SYS_gettid);
	unsigned long long cpu0, delay0, cpu1, delay1;
	struct epoll_event ev, evs[64];
	double t0 = now_s();

	pthread_setname_np(pthread_self(), "server");
	schedstat(tid, &cpu0, &delay0);
	for (int i = 0; i < clients; i++) {
		int c = accept(listener, NULL, NULL);

		if (c < 0) {
			perror("accept");
			exit(1);
		}
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		ev.events = EPOLLIN;
		ev.data.fd = c;
		epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
	}
	while (now_s() - t0 < seconds) {
		int n = epoll_wait(ep, evs, 64, 100);

		for (int i = 0; i < n; i++) {
			char b;

			if (read(evs[i].data.fd, &b, 1) != 1)
				continue;
			handle_request();
			if (write(evs[i].data.fd, &b, 1) != 1)
				perror("write");
		}
	}
	schedstat(tid, &cpu1, &delay1);
	printf("server tid %d life_ns %.0f cpu_ns %llu runnable_ns %llu\n", tid,
	       (now_s() - t0) * 1e9, cpu1 - cpu0, delay1 - delay0);
	fflush(stdout);
	atomic_store(&stop, 1);
	return NULL;
}

static void *client(void *arg)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	char b = 'x';

	(void)arg;
	pthread_setname_np(pthread_self(), "client");
	if (connect(fd, (void *)&addr, sizeof(addr))) {
		perror("connect");
		exit(1);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	while (!atomic_load(&stop)) {
		if (write(fd, &b, 1) != 1 || read(fd, &b, 1) != 1)
			break;
	}
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	socklen_t len = sizeof(addr);
	pthread_t s, c[64];
	int clients;

	if (argc != 4) {
		fprintf(stderr, "usage: wg_saturated CLIENTS SECONDS WORK_SECONDS\n");
		return 2;
	}
	clients = atoi(argv[1]);
	seconds = atof(argv[2]);
	work = atof(argv[3]);
	if (clients < 1 || clients > 64) {
		fprintf(stderr, "wg_saturated: 1 to 64 clients\n");
		return 2;
	}
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	listener = socket(AF_INET, SOCK_STREAM, 0);
	if (listener < 0 || bind(listener, (void *)&addr, sizeof(addr)) ||
	    listen(listener, 64) || getsockname(listener, (void *)&addr, &len)) {
		perror("listen");
		return 1;
	}
	pthread_create(&s, NULL, server, &clients);
	for (int i = 0; i < clients; i++)
		pthread_create(&c[i], NULL, client, NULL);
	pthread_join(s, NULL);
	/* Clients blocked in read see the server's sockets close at exit. */
	exit(0);
}
