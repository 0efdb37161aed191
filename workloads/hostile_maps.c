/* A traced program that attacks the files of its own mappings, for the
 * test that holdup, as root, neither blocks on them nor dies of them:
 *
 *   hostile_maps fifo LIB S      maps LIB, deletes it and puts a FIFO at
 *                                its path, then computes in it for S seconds
 *   hostile_maps truncate LIB S  maps LIB, computes in it for S seconds,
 *                                cuts the file right after its code (the
 *                                code pages stay valid; its unwind tables
 *                                and symbols are gone), then computes S
 *                                seconds more in code it had not run
 *
 * Prints "exited_at <unix time in s>" just before it exits. */
#include "common.h"
#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef unsigned long (*work_fn)(unsigned long);

static void run(work_fn f, double seconds)
{
	double end = now_s() + seconds;

	while (now_s() < end)
		f(10000);
}

struct code_end {
	const char *lib;
	off_t end;
};

/* The end of LIB's executable segment in the file, rounded up to a page. */
static int find_code_end(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct code_end *c = arg;

	(void)size;
	if (!info->dlpi_name || strcmp(info->dlpi_name, c->lib) != 0)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];

		if (p->p_type == PT_LOAD && (p->p_flags & PF_X))
			c->end = (p->p_offset + p->p_filesz + 4095) & ~(off_t)4095;
	}
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: hostile_maps fifo|truncate LIB SECONDS\n");
		return 2;
	}
	const char *lib = argv[2];
	double seconds = atof(argv[3]);
	void *h = dlopen(lib, RTLD_NOW);

	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	work_fn work = (work_fn)dlsym(h, "lib_work");
	work_fn late = (work_fn)dlsym(h, "lib_work_late");

	if (strcmp(argv[1], "fifo") == 0) {
		if (unlink(lib) || mkfifo(lib, 0644)) {
			perror(lib);
			return 1;
		}
		run(work, seconds);
	} else {
		struct code_end c = { lib, 0 };

		run(work, seconds);
		dl_iterate_phdr(find_code_end, &c);
		if (c.end == 0 || truncate(lib, c.end)) {
			perror(lib);
			return 1;
		}
		run(late, seconds);
	}
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	printf("exited_at %.6f\n", t.tv_sec + t.tv_nsec * 1e-9);
	fflush(stdout);
	/* No destructors: they would read the library's cut-off pages. */
	_exit(0);
}
