/* SPDX-License-Identifier: (MIT OR Apache-2.0) */
/*
 * Progress points for `holdup causal`, with COZ's ABI: a program built
 * against this header, or against COZ's own coz.h, works under holdup and
 * under COZ alike, and runs unchanged (at the cost of one branch per
 * visit) when neither profiler is loaded.
 *
 *   COZ_PROGRESS               one unit of work done (named after file:line)
 *   COZ_PROGRESS_NAMED("name") the same, with a name
 *   COZ_BEGIN("name") / COZ_END("name")   a transaction starts / ends
 *                              (latency, by Little's law)
 *
 * HOLDUP_PROGRESS, HOLDUP_PROGRESS_NAMED, HOLDUP_BEGIN and HOLDUP_END are
 * the same macros under holdup's name.
 *
 * How it works: on its first visit each progress point looks up
 * `_coz_get_counter(kind, name)` with dlsym. The profiler's runtime (loaded
 * with LD_PRELOAD) exports it and returns a counter
 * `{ size_t count; size_t backoff; }` that the point then increments
 * atomically. dlsym is declared weak so that programs need not link libdl.
 */
#ifndef HOLDUP_H
#define HOLDUP_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HOLDUP_COUNTER_THROUGHPUT 1
#define HOLDUP_COUNTER_BEGIN 2
#define HOLDUP_COUNTER_END 3

/* The same layout as COZ's coz_counter_t. */
typedef struct {
	size_t count;
	size_t backoff;	/* unused, kept for COZ's ABI */
} holdup_counter_t;

typedef holdup_counter_t *(*holdup_get_counter_fn)(int, const char *);

void *dlsym(void *handle, const char *symbol) __attribute__((weak));

static inline __attribute__((unused)) holdup_counter_t *holdup_get_counter(int kind, const char *name)
{
	static unsigned char looked_up;
	static holdup_get_counter_fn fn;

	if (!looked_up) {
		if (dlsym) {
			void *p = dlsym(RTLD_DEFAULT, "_coz_get_counter");
			/* memcpy: ISO C does not convert void * to function pointers. */
			memcpy(&fn, &p, sizeof(p));
		}
		looked_up = 1;
	}
	return fn ? fn(kind, name) : NULL;
}

#define HOLDUP_COUNT(kind, name)                                                \
	do {                                                                    \
		static unsigned char holdup_seen_;                               \
		static holdup_counter_t *holdup_counter_;                        \
		if (!holdup_seen_) {                                             \
			holdup_counter_ = holdup_get_counter((kind), (name));    \
			holdup_seen_ = 1;                                        \
		}                                                                \
		if (holdup_counter_)                                             \
			__atomic_add_fetch(&holdup_counter_->count, 1, __ATOMIC_RELAXED); \
	} while (0)

#define HOLDUP_STR2_(x) #x
#define HOLDUP_STR_(x) HOLDUP_STR2_(x)

#define HOLDUP_PROGRESS HOLDUP_COUNT(HOLDUP_COUNTER_THROUGHPUT, __FILE__ ":" HOLDUP_STR_(__LINE__))
#define HOLDUP_PROGRESS_NAMED(name) HOLDUP_COUNT(HOLDUP_COUNTER_THROUGHPUT, (name))
#define HOLDUP_BEGIN(name) HOLDUP_COUNT(HOLDUP_COUNTER_BEGIN, (name))
#define HOLDUP_END(name) HOLDUP_COUNT(HOLDUP_COUNTER_END, (name))

/* COZ's names, unless coz.h came first. */
#ifndef COZ_H
#define COZ_PROGRESS HOLDUP_PROGRESS
#define COZ_PROGRESS_NAMED(name) HOLDUP_PROGRESS_NAMED(name)
#define COZ_BEGIN(name) HOLDUP_BEGIN(name)
#define COZ_END(name) HOLDUP_END(name)
#endif

#ifdef __cplusplus
}
#endif

#endif /* HOLDUP_H */
