// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * holdup's recorder: on-CPU samples and blocked samples on one scale.
 *
 * Every thread has two clocks, like perf's task-clock: one runs while it is
 * on a CPU, one while it is off. Each `period_ns` of either is a sampling
 * point, so a thread's on-CPU and blocked samples add up to its lifetime
 * exactly, whatever the timing of the workload. Blocked samples follow
 * bperf: the scheduler hooks only take timestamps (switch-out, wakeup,
 * switch-in); when a thread is switched back in and its off-CPU clock passed
 * one or more points, one blocked sample is made whose weight is that number.
 * The interval is split at the wakeup: the part before keeps the blocking
 * subclass, the part after is runqueue time. On-CPU points are turned into
 * samples at the next tick of a cpu-clock perf event that finds the thread
 * running (the tick is where its stack can be taken), weighted by the
 * points its on-CPU clock passed since its last sample; the points a
 * system call's work between two waits passed (a run's kernel part, from
 * its switch-in to its return to user space, or a short run that ends in
 * a wait) are sampled there instead, its own points only (see on_cpu.bpf.h).
 *
 * Under a hypervisor a running thread's virtual CPU may itself not run
 * (steal time). The thread's own CPU time excludes it, and so must its
 * on-CPU samples: the steal time the scheduler counted on the thread's CPU
 * while it ran (read at its switch-out and at its samples) moves from the
 * on-CPU clock to a steal clock, whose points ride on the next on-CPU
 * sample as runqueue points (the thread was waiting for a real CPU).
 *
 * Stacks are the expensive part, so they are taken only for intervals that
 * produce a sample. The kernel stack is read at switch-in from the sleeping
 * task; the user stack can only be read from the thread itself, so the sample
 * is parked in the thread's storage and emitted when the thread returns from
 * schedule() (or, failing that, at its next sample or switch-out). User stacks
 * are a frame-pointer walk plus a copy of the top of the stack, which user
 * space unwinds with CFI because Debian's libc has no frame pointers.
 *
 * Every off-CPU interval is also written as a compact segment (no stack) for
 * the wait-for graph, together with block requests and task lifecycle.
 * Records are submitted without wake-ups; user space drains on a timer.
 *
 * The parts live in recorder/, one concern each, and are included below in
 * an order where each comes after what it uses: one translation unit, so the
 * helpers shared between parts are inlined as before and the object is what
 * one file would compile to (libbpf's static linking would make a function
 * called across files a separately verified subprogram).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "intf.h"
#include "block.h"
#include "log2.h"
#include "tracked.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#include "recorder/state.bpf.h"
#include "recorder/clocks.bpf.h"
#include "recorder/irq.bpf.h"
#include "recorder/user_stack.bpf.h"
#include "recorder/python.bpf.h"
#include "recorder/sample.bpf.h"
#include "recorder/sleep.bpf.h"
#include "recorder/syscalls.bpf.h"
#include "recorder/kernel_stack.bpf.h"
#include "recorder/on_cpu.bpf.h"
#include "recorder/switch.bpf.h"
#include "recorder/wakeup.bpf.h"
#include "recorder/tasks.bpf.h"
#include "recorder/block_io.bpf.h"
#include "recorder/flush.bpf.h"
#include "recorder/goroutines.bpf.h"
