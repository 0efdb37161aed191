/*
 * What an unprivileged local user can do to a `holdup causal run --system`
 * that root runs next to them. For SECONDS it looks for anything of the run
 * to write to or connect to, and uses what it finds:
 * - entries that appear in /tmp, /var/tmp and /dev/shm (two levels deep),
 *   and in a new directory also the names of holdup's former run directory
 *   (domain, profile.coz, samples.sock), which need no listing: a file it
 *   can open for writing is overwritten with 0xff bytes (forged delays and
 *   profile records), a socket it can connect to is connected to;
 * - Unix sockets with a name in /proc/net/unix that were not there when it
 *   started: connected to;
 * - the open files of the processes named COMM, through /proc/PID/fd.
 * It prints "got PATH" once for each thing it could write to or connect
 * to, and keeps at it until SECONDS have passed or it is killed.
 *
 * With "forge", it is a process of the program gone bad instead (one that
 * runs as another user, say): it tries to truncate the shared domain (which
 * would make every other process fault on its mapping), says whether that
 * worked, and writes 0xff bytes over all of it every millisecond.
 *
 * usage: causal_intruder SECONDS COMM...
 *        causal_intruder forge SECONDS
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_SEEN 4096

static char *known_sockets[MAX_SEEN];
static int n_known;
static char *got[MAX_SEEN];
static int n_got;
static time_t start;

static int listed(char **list, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (strcmp(list[i], s) == 0)
			return 1;
	return 0;
}

static void report(const char *path)
{
	if (listed(got, n_got, path) || n_got == MAX_SEEN)
		return;
	got[n_got++] = strdup(path);
	printf("got %s\n", path);
	fflush(stdout);
}

/* Connect to a named (or, with a leading '@', abstract) socket. */
static void try_connect(const char *name)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t len = strlen(name);
	if (len >= sizeof(a.sun_path))
		return;
	memcpy(a.sun_path, name, len);
	if (name[0] == '@')
		a.sun_path[0] = 0;
	socklen_t alen = offsetof(struct sockaddr_un, sun_path) + len;
	if (name[0] != '@')
		alen++;
	int types[] = { SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET };
	for (unsigned i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		int fd = socket(AF_UNIX, types[i] | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		if (connect(fd, (struct sockaddr *)&a, alen) == 0) {
			report(name);
			static const char junk[64] = { [0 ... 63] = (char)0xff };
			(void)!write(fd, junk, sizeof(junk));
			/* Kept open: a peer that never reads. */
			return;
		}
		close(fd);
	}
}

/* Overwrite a file it can open for writing with 0xff bytes. */
static void try_write(const char *path)
{
	int fd = open(path, O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		report(path);
		static char junk[16384];
		memset(junk, 0xff, sizeof(junk));
		(void)!pwrite(fd, junk, sizeof(junk), 0);
	}
	close(fd);
}

static void try_entry(const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return;
	if (S_ISSOCK(st.st_mode))
		try_connect(path);
	else if (S_ISREG(st.st_mode))
		try_write(path);
}

static void scan(const char *dir, int depth)
{
	DIR *d = opendir(dir);
	char path[4096];
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] == '.' &&
		    (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (lstat(path, &st) != 0 || st.st_ctime < start)
			continue;
		if (!S_ISDIR(st.st_mode)) {
			try_entry(path);
			continue;
		}
		/* A new directory: names that need no listing, then its list. */
		static const char *guesses[] = { "domain", "profile.coz", "samples.sock" };
		for (unsigned i = 0; i < 3; i++) {
			char p[4200];
			snprintf(p, sizeof(p), "%s/%s", path, guesses[i]);
			try_entry(p);
		}
		if (depth > 1)
			scan(path, depth - 1);
	}
	closedir(d);
}

/* Every named socket in /proc/net/unix; with `remember`, as known. */
static void unix_sockets(int remember)
{
	FILE *f = fopen("/proc/net/unix", "r");
	char line[1024];
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *name = NULL, *tok, *save;
		int field = 0;
		for (tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save))
			if (++field == 8)
				name = tok;
		if (!name || !strcmp(name, "Path"))
			continue;
		if (remember) {
			if (n_known < MAX_SEEN && !listed(known_sockets, n_known, name))
				known_sockets[n_known++] = strdup(name);
		} else if (!listed(known_sockets, n_known, name)) {
			try_connect(name);
		}
	}
	fclose(f);
}

static void open_files_of(char **comms, int n)
{
	DIR *proc = opendir("/proc");
	struct dirent *e;
	if (!proc)
		return;
	while ((e = readdir(proc))) {
		char path[300], comm[64] = "";
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = 0;
		fclose(f);
		comm[strcspn(comm, "\n")] = 0;
		if (!listed(comms, n, comm))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/fd", e->d_name);
		DIR *fds = opendir(path);
		if (!fds)
			continue;
		struct dirent *fe;
		while ((fe = readdir(fds))) {
			char p[600];
			if (fe->d_name[0] == '.')
				continue;
			snprintf(p, sizeof(p), "%s/%s", path, fe->d_name);
			int fd = open(p, O_RDWR | O_NONBLOCK | O_CLOEXEC);
			if (fd >= 0) {
				report(p);
				close(fd);
			}
		}
		closedir(fds);
	}
	closedir(proc);
}

#define DOMAIN_BYTES 16384

static int forge(double seconds)
{
	const char *fd_var = getenv("HOLDUP_CAUSAL_DOMAIN_FD");
	const char *dir = getenv("HOLDUP_CAUSAL_SYSTEM");
	char path[4096];
	int fd = -1;
	if (fd_var) {
		fd = atoi(fd_var);
	} else if (dir) {
		/* holdup's former run directory, named in the environment. */
		snprintf(path, sizeof(path), "%s/domain", dir);
		fd = open(path, O_RDWR | O_CLOEXEC);
	}
	char *p = fd < 0 ? MAP_FAILED :
		mmap(NULL, DOMAIN_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		printf("no domain\n");
		return 1;
	}
	printf(ftruncate(fd, 0) == 0 ? "truncated\n" : "truncation refused\n");
	fflush(stdout);
	struct timespec t0, now, pause = { 0, 1000 * 1000 };
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		memset(p, 0xff, DOMAIN_BYTES);
		nanosleep(&pause, NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (argc == 3 && strcmp(argv[1], "forge") == 0)
		return forge(atof(argv[2]));
	double seconds = atof(argv[1]);
	start = time(NULL) - 1;
	unix_sockets(1);
	printf("ready\n");
	fflush(stdout);
	struct timespec t0, now, pause = { 0, 20 * 1000 * 1000 };
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		scan("/tmp", 2);
		scan("/var/tmp", 2);
		scan("/dev/shm", 2);
		unix_sockets(0);
		open_files_of(argv + 2, argc - 2);
		nanosleep(&pause, NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
	return 0;
}
