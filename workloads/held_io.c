/* I/O inside a lock, and what a waiter waits for.
 *
 * lock mode: a keeper takes a mutex, writes 4 KiB and fdatasyncs it, lets
 * go, spins a little; a waiter takes the same mutex in a loop.
 * chain mode: a waiter takes a mutex that a relay holds while it asks a
 * feeder, over a pipe, for a block; the feeder reads it with O_DIRECT and
 * answers on another pipe: waiter -> relay (mutex) -> feeder (pipe) -> disk.
 *
 * The program times the waiter's waits for the mutex and the I/O calls
 * (the keeper's pwrite and fdatasync, the feeder's pread) and prints:
 *   wait_s S        the waiter's time inside pthread_mutex_lock
 *   io_share F      the part of it during which an I/O call was under way
 *   waits N
 * usage: held_io lock|chain FILE SECONDS */
#include "common.h"
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SPANS (1 << 18)
#define BLOCK (1 << 20)
#define FILE_MB 64

struct spans {
	long long start[MAX_SPANS], end[MAX_SPANS];
	int n;
};

static struct spans waits, ios;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int stop, taken;
static int fd, req[2], resp[2];

static void note(struct spans *s, long long a, long long b)
{
	if (s->n < MAX_SPANS) {
		s->start[s->n] = a;
		s->end[s->n] = b;
		s->n++;
	}
}

/* The keeper's critical section: a write made durable. */
__attribute__((noinline)) static void sync_under_lock(const char *buf, off_t off)
{
	long long t = now_ns();

	if (pwrite(fd, buf, 4096, off) != 4096 || fdatasync(fd) != 0) {
		perror("pwrite/fdatasync");
		exit(1);
	}
	note(&ios, t, now_ns());
}

static void *keeper(void *arg)
{
	static char buf[4096];
	off_t off = 0;

	(void)arg;
	pthread_setname_np(pthread_self(), "keeper");
	memset(buf, 'k', sizeof(buf));
	while (!stop) {
		pthread_mutex_lock(&lock);
		sync_under_lock(buf, off);
		pthread_mutex_unlock(&lock);
		off = (off + 4096) % (1 << 20);
		spin_us(300);
	}
	return NULL;
}

/* The feeder: a block read from the disk for every request of the relay. */
__attribute__((noinline)) static void read_block(char *buf, unsigned *seed)
{
	off_t off = (off_t)(rand_r(seed) % ((FILE_MB << 20) / BLOCK)) * BLOCK;
	long long t = now_ns();

	if (pread(fd, buf, BLOCK, off) != BLOCK) {
		perror("pread");
		exit(1);
	}
	note(&ios, t, now_ns());
}

static void *feeder(void *arg)
{
	char *buf, c;
	unsigned seed = 7;

	(void)arg;
	pthread_setname_np(pthread_self(), "feeder");
	if (posix_memalign((void **)&buf, 4096, BLOCK))
		exit(1);
	while (read(req[0], &c, 1) == 1 && c == 'r') {
		read_block(buf, &seed);
		if (write(resp[1], buf, 1) != 1)
			exit(1);
	}
	free(buf);
	return NULL;
}

/* The relay holds the mutex while it waits for the feeder's answer. */
__attribute__((noinline)) static void ask_feeder(void)
{
	char c = 'r';

	if (write(req[1], &c, 1) != 1 || read(resp[0], &c, 1) != 1) {
		perror("pipe");
		exit(1);
	}
}

/* The relay lets the waiter have the lock once between its own turns, so
 * that the waiter's time on the runqueue after its wakeup (its own, not the
 * relay's) overlaps no read of the feeder. */
static void *relay(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "relay");
	while (!stop) {
		int seen = taken;

		pthread_mutex_lock(&lock);
		ask_feeder();
		pthread_mutex_unlock(&lock);
		while (taken == seen && !stop)
			usleep(100);
	}
	if (write(req[1], "q", 1) != 1)
		exit(1);
	return NULL;
}

__attribute__((noinline)) static void take_lock(void)
{
	long long t = now_ns();

	pthread_mutex_lock(&lock);
	note(&waits, t, now_ns());
	taken++;
	pthread_mutex_unlock(&lock);
}

static void *waiter(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "waiter");
	while (!stop) {
		take_lock();
		spin_us(50);
	}
	return NULL;
}

/* Time of the spans of `w` covered by those of `io` (both in time order,
 * the spans of each disjoint). */
static long long covered(const struct spans *w, const struct spans *io)
{
	long long sum = 0;
	int j = 0;

	for (int i = 0; i < w->n; i++) {
		while (j < io->n && io->end[j] <= w->start[i])
			j++;
		for (int k = j; k < io->n && io->start[k] < w->end[i]; k++) {
			long long a = io->start[k] > w->start[i] ? io->start[k] : w->start[i];
			long long b = io->end[k] < w->end[i] ? io->end[k] : w->end[i];

			if (b > a)
				sum += b - a;
		}
	}
	return sum;
}

/* The file the feeder reads: written once, outside the timed part. */
static void make_file(const char *path)
{
	static char chunk[1 << 20];
	struct stat st;
	int f;

	if (stat(path, &st) == 0 && st.st_size >= (FILE_MB << 20))
		return;
	f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (f < 0) {
		perror(path);
		exit(1);
	}
	memset(chunk, 'd', sizeof(chunk));
	for (int i = 0; i < FILE_MB; i++)
		if (write(f, chunk, sizeof(chunk)) != sizeof(chunk))
			exit(1);
	fsync(f);
	close(f);
}

int main(int argc, char **argv)
{
	int chain = argc > 1 && strcmp(argv[1], "chain") == 0;
	const char *path = argc > 2 ? argv[2] : "held_io.dat";
	double secs = argc > 3 ? atof(argv[3]) : 1.5;
	pthread_t holder, w, f;
	long long total = 0;

	if (chain) {
		make_file(path);
		fd = open(path, O_RDONLY | O_DIRECT);
		if (pipe(req) || pipe(resp)) {
			perror("pipe");
			return 1;
		}
		pthread_create(&f, NULL, feeder, NULL);
		pthread_create(&holder, NULL, relay, NULL);
	} else {
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		pthread_create(&holder, NULL, keeper, NULL);
	}
	if (fd < 0) {
		perror(path);
		return 1;
	}
	pthread_create(&w, NULL, waiter, NULL);
	usleep((useconds_t)(secs * 1e6));
	stop = 1;
	pthread_join(w, NULL);
	pthread_join(holder, NULL);
	if (chain)
		pthread_join(f, NULL);
	for (int i = 0; i < waits.n; i++)
		total += waits.end[i] - waits.start[i];
	printf("wait_s %.6f\n", total * 1e-9);
	printf("io_share %.4f\n", total ? (double)covered(&waits, &ios) / total : 0.0);
	printf("waits %d\n", waits.n);
	return 0;
}
