/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * In-band system-call results, as DeBox returned them: a program recorded
 * with `holdup record --syscalls --inband -- ./app` reads what its thread's
 * last system call cost, without making another system call.
 *
 *   if (holdup_debox_open() == 0) ...        once per process (and its thread)
 *   holdup_debox_thread_init();              once in every other thread
 *   n = read(fd, buf, len);
 *   const struct holdup_debox *d = holdup_debox_last();
 *   if (d && d->wall_ns > 1000000)
 *           printf("%s took %llu ns, %llu blocked on I/O, %u major faults\n", ...);
 *
 * The recorder writes one slot per thread (slot tid % HOLDUP_DEBOX_SLOTS)
 * at every sys_exit; the program maps the slots read-only. It finds them
 * through the HOLDUP_DEBOX environment variable ("recorder-pid:fd"): the
 * map is taken from the recorder with pidfd_getfd(2), which needs the
 * right to ptrace the recorder (the program runs as the recorder's user,
 * root). Without the recorder holdup_debox_open() fails and
 * holdup_debox_last() returns NULL.
 *
 * holdup_debox_last() describes the last system call the thread made that
 * the recorder saw: call it right after the call of interest (anything in
 * between that makes a system call, such as printf flushing, replaces it).
 */
#ifndef HOLDUP_DEBOX_H
#define HOLDUP_DEBOX_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HOLDUP_DEBOX_SLOTS 32768

/* The recorder's struct debox_info (its intf.h): holdup's build checks
 * that the two layouts agree. */
struct holdup_debox {
	uint64_t seq;		/* calls written to this slot */
	uint64_t start_ns;	/* CLOCK_MONOTONIC at entry */
	uint64_t wall_ns;
	uint64_t blocked_ns[4];	/* HOLDUP_DEBOX_IO, _LOCK, _SCHED (runqueue), _OTHER */
	uint32_t tid;
	uint32_t call;		/* system call number */
	uint32_t sleeps;	/* times it went to sleep (runqueue waits not counted) */
	uint32_t min_flt;	/* page faults taken inside the call */
	uint32_t maj_flt;
	uint32_t _pad;
};

enum { HOLDUP_DEBOX_IO, HOLDUP_DEBOX_LOCK, HOLDUP_DEBOX_SCHED, HOLDUP_DEBOX_OTHER };

static const volatile struct holdup_debox *holdup_debox_slots;
static __thread uint32_t holdup_debox_tid;

/* Learn the calling thread's id (a system call: done once per thread, so
 * that holdup_debox_last() itself never makes one). */
static inline void holdup_debox_thread_init(void)
{
	holdup_debox_tid = (uint32_t)syscall(SYS_gettid);
}

/* Map the slots; 0 on success, -1 without the recorder. */
static inline int holdup_debox_open(void)
{
	const char *env = getenv("HOLDUP_DEBOX");
	char *colon;
	long pid, fd, pidfd, mine;
	void *p;

	if (holdup_debox_slots)
		return 0;
	if (!env)
		return -1;
	pid = strtol(env, &colon, 10);
	if (*colon != ':')
		return -1;
	fd = strtol(colon + 1, NULL, 10);
	pidfd = syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return -1;
	mine = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	close((int)pidfd);
	if (mine < 0)
		return -1;
	p = mmap(NULL, sizeof(struct holdup_debox) * HOLDUP_DEBOX_SLOTS, PROT_READ, MAP_SHARED,
		 (int)mine, 0);
	close((int)mine);
	if (p == MAP_FAILED)
		return -1;
	holdup_debox_slots = p;
	holdup_debox_thread_init();
	return 0;
}

/* The calling thread's last system call, or NULL (no recorder, a thread
 * without holdup_debox_thread_init(), or the slot was last written by
 * another thread with the same tid modulo HOLDUP_DEBOX_SLOTS). */
static inline const volatile struct holdup_debox *holdup_debox_last(void)
{
	uint32_t tid = holdup_debox_tid;
	const volatile struct holdup_debox *d;

	if (!holdup_debox_slots || !tid)
		return NULL;
	d = &holdup_debox_slots[tid % HOLDUP_DEBOX_SLOTS];
	return d->tid == tid ? d : NULL;
}

#endif /* HOLDUP_DEBOX_H */
