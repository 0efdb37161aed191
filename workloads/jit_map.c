/* A program that generates code and names it itself, as a JIT does: a spin
 * loop copied into anonymous executable memory, and /tmp/perf-PID.map
 * saying so, with two malformed lines and a last line left half written.
 * After `keep` seconds it deletes the map (a profiler must keep what it
 * read), then spins `after` seconds more. Prints the CPU time spent in the
 * generated code ("hot_cpu_s X") and its pid.
 * usage: jit_map KEEP AFTER */
#include "common.h"
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* mov ecx, 0x100000; 1: dec ecx; jnz 1b; ret */
static const unsigned char spin[] = {0xb9, 0x00, 0x00, 0x10, 0x00, 0xff, 0xc9, 0x75, 0xfc, 0xc3};

static double thread_cpu_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	double keep = argc > 1 ? atof(argv[1]) : 2, after = argc > 2 ? atof(argv[2]) : 0.5;
	unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char path[64];
	FILE *map;
	double t0 = now_s(), cpu0 = thread_cpu_s();

	if (code == MAP_FAILED)
		return 1;
	memcpy(code + 64, spin, sizeof(spin));
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
	map = fopen(path, "w");
	if (!map)
		return 1;
	fprintf(map, "%lx %zx generated_spin\n", (unsigned long)(code + 64), sizeof(spin));
	fprintf(map, "this is not a map line\n");
	fprintf(map, "zz 10 not_hex\n");
	fprintf(map, "%lx 10", (unsigned long)(code + 256));
	fclose(map);
	while (now_s() < t0 + keep + after) {
		((void (*)(void))(code + 64))();
		if (path[0] && now_s() > t0 + keep) {
			unlink(path);
			path[0] = 0;
		}
	}
	printf("hot_cpu_s %.3f\npid %d\n", thread_cpu_s() - cpu0, getpid());
	return 0;
}
