/* Run a command while a cpu-clock perf event samples every CPU at FREQ Hz
 * and nothing reads the samples: what the sampling interrupts alone cost.
 * Without a hardware PMU (as in most VMs) perf and holdup both sample on
 * cpu-clock, so this is the floor under both of their overheads.
 * usage: sampling_clock FREQ COMMAND [ARG...]   (as root) */
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long freq = argc > 2 ? atol(argv[1]) : 0;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	pid_t child;
	int status;

	if (freq <= 0) {
		fprintf(stderr, "usage: sampling_clock FREQ COMMAND [ARG...]\n");
		return 2;
	}
	for (long cpu = 0; cpu < cpus; cpu++) {
		struct perf_event_attr a;

		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.type = PERF_TYPE_SOFTWARE;
		a.config = PERF_COUNT_SW_CPU_CLOCK;
		a.sample_period = 1000000000 / freq;
		a.sample_type = PERF_SAMPLE_IP;
		if (syscall(SYS_perf_event_open, &a, -1, (int)cpu, -1, PERF_FLAG_FD_CLOEXEC) < 0) {
			perror("sampling_clock: perf_event_open");
			return 1;
		}
	}
	child = fork();
	if (child == 0) {
		execvp(argv[2], argv + 2);
		perror("sampling_clock: exec");
		_exit(127);
	}
	if (child < 0 || waitpid(child, &status, 0) < 0) {
		perror("sampling_clock");
		return 1;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
