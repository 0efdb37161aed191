/* The main thread and one other thread take turns over two pipes, each
 * blocked a few frames deep in read(2) while the other sleeps WAIT_MS: a
 * stack much shorter than the recorder's copy of it. Built without frame
 * pointers, no frame record cuts the copy, so only the top of each stack
 * does (the main thread's start, the other thread's descriptor). Each side
 * times its own reads and prints the seconds it spent in them:
 *   main_side <s>
 *   thread_side <s>
 * usage: shallow_waits [ROUNDS] */
#include "common.h"
#include <pthread.h>
#include <unistd.h>

#define WAIT_MS 2

static int to_thread[2], to_main[2];
static int rounds;

__attribute__((noinline)) static double read_one(int fd)
{
	double t0 = now_s();
	char c;

	if (read(fd, &c, 1) != 1)
		exit(1);
	return now_s() - t0;
}

__attribute__((noinline)) static void *thread_side(void *arg)
{
	double waited = 0;

	(void)arg;
	for (int i = 0; i < rounds; i++) {
		waited += read_one(to_thread[0]);
		usleep(WAIT_MS * 1000);
		if (write(to_main[1], "x", 1) != 1)
			exit(1);
	}
	printf("thread_side %.6f\n", waited);
	return NULL;
}

__attribute__((noinline)) static double main_side(void)
{
	double waited = 0;

	for (int i = 0; i < rounds; i++) {
		usleep(WAIT_MS * 1000);
		if (write(to_thread[1], "x", 1) != 1)
			exit(1);
		waited += read_one(to_main[0]);
	}
	return waited;
}

int main(int argc, char **argv)
{
	pthread_t t;
	double waited;

	rounds = argc > 1 ? atoi(argv[1]) : 200;
	if (pipe(to_thread) || pipe(to_main) || pthread_create(&t, NULL, thread_side, NULL))
		return 1;
	waited = main_side();
	pthread_join(t, NULL);
	printf("main_side %.6f\n", waited);
	return 0;
}
