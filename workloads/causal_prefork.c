/*
 * A pre-forked worker pool: the parent forks WORKERS processes that take
 * requests from one shared counter. Each request is P ms of work of the
 * worker's own (line "target: p"), then C ms inside one lock shared by all
 * workers (a process-shared mutex in shared memory; line "target: c").
 * With C > P the lock is the bottleneck: a request every C ms whatever the
 * number of workers, so line c is what a fix must speed up, and making it
 * x% faster speeds the pool up by about x% until the workers' own work
 * limits it.
 *
 * usage: causal_prefork REQUESTS [WORKERS=2] [P_MS=0.5] [C_MS=1.5]
 * Prints the time per request, measured by the parent from the first
 * request to the last; run again with a smaller C_MS to measure the effect
 * of a faster line c.
 */
#include "causal_common.h"
#ifdef USE_COZ_H
#include <coz.h>
#else
#include "../include/holdup.h"
#endif
#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

struct shared {
	pthread_mutex_t queue;	/* the request counter */
	pthread_mutex_t resource;	/* what every request needs */
	long next, requests;
};

static void worker(struct shared *s, long p_iters, long c_iters)
{
	prctl(PR_SET_NAME, "worker");
	for (;;) {
		pthread_mutex_lock(&s->queue);
		long mine = s->next < s->requests ? s->next++ : -1;
		pthread_mutex_unlock(&s->queue);
		if (mine < 0)
			return;
		SPIN(p_iters); /* target: p */
		pthread_mutex_lock(&s->resource);
		SPIN(c_iters); /* target: c */
		pthread_mutex_unlock(&s->resource);
		COZ_PROGRESS_NAMED("request");
	}
}

int main(int argc, char **argv)
{
	long requests = (long)arg_d(argc, argv, 1, 2000);
	int workers = (int)arg_d(argc, argv, 2, 2);
	long per_ms = iters_per_ms();
	long p_iters = (long)(arg_d(argc, argv, 3, 0.5) * per_ms);
	long c_iters = (long)(arg_d(argc, argv, 4, 1.5) * per_ms);
	struct shared *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pthread_mutexattr_t attr;

	if (s == MAP_FAILED)
		return 1;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&s->queue, &attr);
	pthread_mutex_init(&s->resource, &attr);
	s->requests = requests;
	long long t0 = now_ns();
	for (int w = 0; w < workers; w++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			worker(s, p_iters, c_iters);
			_exit(0);
		}
	}
	int ok = 1, status;
	while (wait(&status) > 0)
		ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
	printf("request_ns=%lld\n", (now_ns() - t0) / requests);
	return ok ? 0 : 1;
}
