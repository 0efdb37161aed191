/* A C++ library whose cache serializes its callers on one internal mutex,
 * as a new user meets it: built with -O2 and without frame pointers. T
 * threads call LruCache::Release N times; it holds the cache's Mutex (a
 * wrapper around pthread_mutex_t) for 2 ms of CPU, and each caller works
 * 0.5 ms outside it. Most of each thread's time is waiting in
 * LruCache::Release → Mutex::Lock → pthread_mutex_lock, for the thread that
 * holds the lock. Each thread prints the wall time it spent in Mutex::Lock
 * ("locked TID SECONDS"), the ground truth for its lock waits.
 * usage: lru_mutex THREADS ITERATIONS */
#include "common.h"
#include <pthread.h>
#include <unistd.h>

static thread_local double time_in_lock;

namespace cache {

class Mutex {
public:
	/* Checked, as wrappers do (which also keeps Lock on the stack: no
	 * tail call into libc). */
	__attribute__((noinline)) void Lock()
	{
		double t0 = now_s();

		if (pthread_mutex_lock(&mu_) != 0)
			abort();
		time_in_lock += now_s() - t0;
	}
	__attribute__((noinline)) void Unlock()
	{
		if (pthread_mutex_unlock(&mu_) != 0)
			abort();
	}

private:
	pthread_mutex_t mu_ = PTHREAD_MUTEX_INITIALIZER;
};

class LruCache {
public:
	/* Unpins an entry: the list update is the critical section. */
	__attribute__((noinline)) void Release(int key)
	{
		mu_.Lock();
		burn_cpu(0.002);
		last_ = key;
		mu_.Unlock();
	}

private:
	Mutex mu_;
	int last_ = 0;
};

} // namespace cache

static cache::LruCache lru;
static int iterations;

static void *client(void *arg)
{
	long id = (long)arg;

	for (int i = 0; i < iterations; i++) {
		lru.Release((int)id * 1000 + i);
		burn_cpu(0.0005);
	}
	printf("locked %d %.4f\n", gettid(), time_in_lock);
	return nullptr;
}

int main(int argc, char **argv)
{
	int n = arg_int(argc, argv, 1, 4);
	pthread_t t[64];

	iterations = arg_int(argc, argv, 2, 100);
	if (n > 64)
		n = 64;
	for (long i = 0; i < n; i++)
		pthread_create(&t[i], nullptr, client, (void *)i);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], nullptr);
	return 0;
}
