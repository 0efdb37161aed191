/*
 * A program that loads a library, runs code in it and unloads it, over
 * and over (as PAM modules, plugins and interpreter extensions are): the
 * causal runtime must never touch an unloaded library's memory (its
 * unwind tables go with it), whatever samples in it are still queued.
 *
 * usage: causal_dlclose ROUNDS
 * prints: rounds=N crc=X
 */
#include "causal_common.h"
#ifdef USE_COZ_H
#include <coz.h>
#else
#include "../include/holdup.h"
#endif
#include <dlfcn.h>

typedef unsigned long (*crc32_fn)(unsigned long, const unsigned char *, unsigned int);

static unsigned char buf[1 << 20];

int main(int argc, char **argv)
{
	long rounds = (long)arg_d(argc, argv, 1, 300);
	unsigned long crc = 0;

	for (long i = 0; i < rounds; i++) {
		void *lib = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
		if (!lib) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			return 1;
		}
		crc32_fn crc32 = (crc32_fn)dlsym(lib, "crc32");
		if (!crc32)
			return 1;
		for (int k = 0; k < 3; k++)
			crc = crc32(crc, buf, sizeof(buf));
		dlclose(lib);
		COZ_PROGRESS_NAMED("round");
	}
	printf("rounds=%ld crc=%lx\n", rounds, crc);
	return 0;
}
