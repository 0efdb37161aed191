/* Threads that are idle by design, none of them contending: a pool of
 * WORKERS threads parked on a condition variable, a timer thread that
 * ticks every 10 ms in pthread_cond_timedwait, and the main thread that
 * joins a job thread burning SECONDS of CPU. At the end, main wakes the
 * pool and the timer and joins them. Apart from the job, every thread
 * spends its life waiting for a signal (condvar, timed wait, join).
 * Prints the wall time each spent in its wait calls: "parked S" per
 * worker, "timer S" (the sum over its ticks), "join S".
 * usage: idle_pool WORKERS SECONDS */
#include "common.h"
#include <pthread.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake_pool = PTHREAD_COND_INITIALIZER;
static pthread_cond_t wake_timer = PTHREAD_COND_INITIALIZER;
static int stop;
static double job_seconds;

__attribute__((noinline)) static void *pool_worker(void *arg)
{
	double t0 = now_s();

	pthread_mutex_lock(&mu);
	while (!stop)
		pthread_cond_wait(&wake_pool, &mu);
	pthread_mutex_unlock(&mu);
	*(double *)arg = now_s() - t0;
	return NULL;
}

__attribute__((noinline)) static void *timer_thread(void *arg)
{
	double waited = 0;

	pthread_mutex_lock(&mu);
	while (!stop) {
		struct timespec t;

		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_nsec += 10 * 1000 * 1000;
		if (t.tv_nsec >= 1000000000) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000;
		}
		double t0 = now_s();

		pthread_cond_timedwait(&wake_timer, &mu, &t);
		waited += now_s() - t0;
	}
	pthread_mutex_unlock(&mu);
	*(double *)arg = waited;
	return NULL;
}

__attribute__((noinline)) static void *job(void *arg)
{
	burn_cpu(job_seconds);
	return NULL;
}

__attribute__((noinline)) static double wait_for_job(pthread_t t)
{
	double t0 = now_s();

	pthread_join(t, NULL);
	return now_s() - t0;
}

int main(int argc, char **argv)
{
	int n = arg_int(argc, argv, 1, 3);
	pthread_t pool[64], timer, worker;
	double parked[64], timed, joined;

	job_seconds = argc > 2 ? atof(argv[2]) : 0.5;
	if (n > 64)
		n = 64;
	for (int i = 0; i < n; i++)
		pthread_create(&pool[i], NULL, pool_worker, &parked[i]);
	pthread_create(&timer, NULL, timer_thread, &timed);
	pthread_create(&worker, NULL, job, NULL);
	joined = wait_for_job(worker);
	pthread_mutex_lock(&mu);
	stop = 1;
	pthread_cond_broadcast(&wake_pool);
	pthread_cond_signal(&wake_timer);
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < n; i++)
		pthread_join(pool[i], NULL);
	pthread_join(timer, NULL);
	for (int i = 0; i < n; i++)
		printf("parked %.4f\n", parked[i]);
	printf("timer %.4f\njoin %.4f\n", timed, joined);
	return 0;
}
