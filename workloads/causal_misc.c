/*
 * Programs that go wrong under the causal profiler, for its tests.
 *
 * usage: causal_misc noprogress MS   compute for MS ms, never reach a progress point
 *        causal_misc crash MS        make progress for MS ms, then crash (SIGSEGV)
 *        causal_misc calibrate       print the spin iterations per ms (for
 *                                    CAUSAL_ITERS_PER_MS)
 */
#include "causal_common.h"
#include "../include/holdup.h"
#include <string.h>

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "calibrate") == 0) {
		unsetenv("CAUSAL_ITERS_PER_MS");
		printf("%ld\n", iters_per_ms());
		return 0;
	}
	if (argc < 3)
		return 2;
	long per_ms = iters_per_ms();
	long ms = atol(argv[2]);
	if (strcmp(argv[1], "noprogress") == 0) {
		SPIN(ms * per_ms); /* target: noprogress */
		return 0;
	}
	for (long i = 0; i < ms; i++) {
		SPIN(per_ms); /* target: work */
		COZ_PROGRESS_NAMED("ms");
	}
	fflush(stdout);
	volatile int *p = NULL;
	return *p;
}
