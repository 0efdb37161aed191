/* Workers contending on one mutex: each holds it for a while, then works
 * outside it. The lock serializes them, so the workers (merged into one
 * group: same name, same stacks) wait for each other: a self-loop knot.
 * usage: wg_lock THREADS ROUNDS [CPU_FILE]
 * CPU_FILE receives the CPU seconds the process used: burn_cpu overshoots
 * by up to one chunk of its loop, so the CPU burnt is measured, not assumed. */
#include "common.h"
#include <pthread.h>
#include <sys/resource.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int rounds;
static volatile long shared;

__attribute__((noinline)) static void critical_section(void)
{
	pthread_mutex_lock(&lock);
	burn_cpu(0.0003);
	shared++;
	pthread_mutex_unlock(&lock);
}

static void *worker(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "locker");
	for (int i = 0; i < rounds; i++) {
		critical_section();
		burn_cpu(0.0001);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int n = arg_int(argc, argv, 1, 4);
	pthread_t t[64];

	rounds = arg_int(argc, argv, 2, 1500);
	if (n > 64)
		n = 64;
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("%ld\n", shared);
	if (argc > 3) {
		struct rusage ru;
		FILE *f = fopen(argv[3], "w");

		getrusage(RUSAGE_SELF, &ru);
		if (!f)
			return 1;
		fprintf(f, "%f\n", ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
				     ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6);
		fclose(f);
	}
	return 0;
}
