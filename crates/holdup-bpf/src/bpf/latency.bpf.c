// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * holdup latency: log2 histograms of operation latencies, aggregated in the
 * kernel (OSprof). An operation's start is kept per thread; at its end the
 * elapsed time goes into the bucket floor(log2(ns)) of a per-CPU histogram
 * keyed by process, operation and time interval, so the cost per call is a
 * few map operations whatever the event rate, and user space reads the maps
 * once at the end. Operations: system calls (raw_syscalls enter/exit), kernel
 * functions (fentry/fexit pairs whose targets are set before load), user
 * functions (one uprobe/uretprobe pair attached per symbol, the operation id
 * in the attach cookie) and block requests (issue to completion).
 *
 * For the first level of DARC's root-cause search, each thread also keeps
 * clocks of its off-CPU time by cause (I/O wait, futex wait, preempted,
 * other), advanced at every context switch; a call's start snapshots them,
 * and its end adds the differences to its bucket, so each peak's time
 * splits into on-CPU time and the causes that made the call wait.
 *
 * Below that level, DARC's descent: the callees of a user function (a
 * root) get uprobes too; while a root call is open in a thread, the time
 * (and off-CPU causes) of each call path below it (an fnode of DARC's
 * ftree, followed with a current-node pointer as DARC does) is summed per
 * thread, and at the root's return the sums go to the root call's bucket,
 * so a peak of the root splits into the call paths that made it.
 *
 * Interrupts are causes too (DARC §3.6): time in hard interrupt handlers
 * and softirqs while a traced thread was on the CPU advances that
 * thread's clock of that interrupt (the local timer, each device
 * interrupt, each softirq vector), so it is not counted as the call's own
 * on-CPU work.
 *
 * The parts live in latency/, one concern each, included below in an order
 * where each comes after what it uses: one translation unit, so shared
 * helpers are inlined and the object is what one file would compile to.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "latency.h"
#include "block.h"
#include "log2.h"
#include "tracked.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#include "latency/state.bpf.h"
#include "latency/syscalls.bpf.h"
#include "latency/kfuncs.bpf.h"
#include "latency/ufuncs.bpf.h"
#include "latency/block.bpf.h"
#include "latency/switch.bpf.h"
#include "latency/irq.bpf.h"
