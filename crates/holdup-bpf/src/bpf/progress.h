/* Progress points counted without a trap (holdup causal run --progress
 * syscall:NAME | tracepoint:CAT:NAME): shared by progress.bpf.c and Rust. */
#ifndef HOLDUP_PROGRESS_H
#define HOLDUP_PROGRESS_H

enum progress_consts {
	PROGRESS_MAX_CPUS = 256,
	/* No system call number: the program counts a tracepoint. */
	PROGRESS_NO_SYSCALL = 0xffffffff,
};

/* One CPU's visits, alone on its cache line: CPUs never write the same
 * line. */
struct progress_slot {
	u64 visits;
	u64 _pad[7];
};

#endif
