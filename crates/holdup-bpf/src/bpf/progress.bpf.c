// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* One progress point counted in the kernel, without a trap: a system call
 * (raw sys_enter, filtered by number) or any tracepoint (tp_btf, its
 * target set when loading). A uprobe takes a trap per visit (~1-20 µs);
 * this costs the tracepoint's call into BPF and an add on the CPU's own
 * cache line. Only the processes in `counted` count (the command and what
 * it starts, or -p's), unless every process does (-a). User space maps
 * .bss and sums the slots; the causal runtime reads them the same way. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "progress.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

const volatile __u32 syscall_nr = PROGRESS_NO_SYSCALL;
const volatile __u32 all_processes;

struct progress_slot slots[PROGRESS_MAX_CPUS];

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} counted SEC(".maps");

static __always_inline void visit(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u32 cpu = bpf_get_smp_processor_id();

	if (!all_processes && !bpf_map_lookup_elem(&counted, &tgid))
		return;
	if (cpu < PROGRESS_MAX_CPUS)
		__sync_fetch_and_add(&slots[cpu].visits, 1);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(count_syscall, struct pt_regs *regs, long id)
{
	if (id == syscall_nr)
		visit();
	return 0;
}

/* Attached to the tracepoint user space names before loading; its
 * arguments are not read, so one program fits any tracepoint. */
SEC("tp_btf")
int count_tracepoint(void *ctx)
{
	visit();
	return 0;
}

/* A counted process's children count too (a shell that runs the program,
 * a server's workers). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(follow_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;

	if (!all_processes && bpf_map_lookup_elem(&counted, &ptgid))
		bpf_map_update_elem(&counted, &ctgid, &one, BPF_ANY);
	return 0;
}
