/*
 * Interrupt context, tracked per CPU: a wakeup in interrupt context has the
 * interrupted task as current, which is not who woke the thread. Entries and
 * exits of hard irqs, softirqs, timers and IPIs keep the CPU's context, so
 * that a wakeup can name the irq, the softirq (or the task it works for) or
 * the timer instead.
 */

/* What the CPU is doing besides running current: names the waker when a
 * wakeup happens in interrupt context. */
struct irq_context {
	s32 hardirq;		/* irq number + 1 */
	s32 softirq;		/* vector + 1 */
	u32 timer;		/* inside an hrtimer expiry or the local timer */
	u32 ipi;		/* inside a function-call IPI */
	/* The thread a running softirq works for: the task that raised it in
	 * process context and runs it itself (local_bh_enable after a loopback
	 * send), 0 when it was raised in interrupt context. */
	u32 softirq_owner;
	/* Per vector, who raised it since it last ran: 0 nobody, a tid, or
	 * RAISED_IN_IRQ once any raise came from interrupt context. */
	u32 raised_by[16];
};

#define NR_SOFTIRQ_VECTORS_MASK 15
#define RAISED_IN_IRQ ((u32)-1)

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct irq_context);
} irq_ctx SEC(".maps");

static __always_inline struct irq_context *this_irq_ctx(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&irq_ctx, &zero);
}

/* Who is waking a thread right now: current, unless we run in interrupt
 * context, where current is just whoever was interrupted. */
static __always_inline void current_waker(u8 *kind, u32 *id)
{
	struct irq_context *ic = this_irq_ctx();

	if (ic) {
		if (ic->hardirq) {
			*kind = WAKER_IRQ;
			*id = ic->hardirq - 1;
			return;
		}
		if (ic->ipi) {
			*kind = WAKER_IRQ;
			*id = IRQ_IPI;
			return;
		}
		if (ic->timer) {
			*kind = WAKER_TIMER;
			*id = 0;
			return;
		}
		if (ic->softirq && ic->softirq_owner) {
			*kind = WAKER_THREAD;
			*id = ic->softirq_owner;
			return;
		}
		if (ic->softirq) {
			*kind = WAKER_SOFTIRQ;
			*id = ic->softirq - 1;
			return;
		}
	}
	*kind = WAKER_THREAD;
	*id = bpf_get_current_pid_tgid();
}

/* Interrupt context bookkeeping, for naming wakers. */

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(on_irq_entry, int irq)
{
	struct irq_context *ic = this_irq_ctx();

	if (ic)
		ic->hardirq = irq + 1;
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(on_irq_exit)
{
	struct irq_context *ic = this_irq_ctx();

	if (ic)
		ic->hardirq = 0;
	return 0;
}

/* A softirq raised by a task in process context and run before that task
 * leaves the CPU (from its own local_bh_enable: a loopback send runs the
 * receiver's NET_RX this way) is the task's work, so the wakeups it does are
 * the task's. One raised from a hard irq, a timer, an IPI or another softirq
 * stays an interrupt; a run that serves both kinds of raise too. */
SEC("tp_btf/softirq_raise")
int BPF_PROG(on_softirq_raise, unsigned int vec)
{
	struct irq_context *ic = this_irq_ctx();
	u32 tid = (u32)bpf_get_current_pid_tgid();
	u32 *by;

	if (!ic || vec >= NR_SOFTIRQS)
		return 0;
	by = &ic->raised_by[vec & NR_SOFTIRQ_VECTORS_MASK];
	/* Raised by a softirq the task owns (NET_RX re-raising itself past
	 * its budget): still the task's. */
	if (ic->hardirq || ic->ipi || ic->timer || tid == 0 ||
	    (ic->softirq && ic->softirq_owner != tid))
		*by = RAISED_IN_IRQ;
	else if (*by != RAISED_IN_IRQ)
		*by = tid;
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(on_softirq_entry, unsigned int vec)
{
	struct irq_context *ic = this_irq_ctx();
	u32 tid = (u32)bpf_get_current_pid_tgid();
	u32 *by;

	if (!ic)
		return 0;
	ic->softirq = vec + 1;
	ic->softirq_owner = 0;
	if (vec < NR_SOFTIRQS) {
		by = &ic->raised_by[vec & NR_SOFTIRQ_VECTORS_MASK];
		if (*by == tid)
			ic->softirq_owner = tid;
		*by = 0;
	}
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(on_softirq_exit)
{
	struct irq_context *ic = this_irq_ctx();

	if (ic) {
		ic->softirq = 0;
		ic->softirq_owner = 0;
	}
	return 0;
}

/* Contexts that nest (an hrtimer expiry, the local timer, function-call
 * IPIs): a depth counter in `field` of the CPU's irq_context, kept by an
 * entry and an exit program. */
#define NESTED_CONTEXT(name, tp, field)					\
	SEC("tp_btf/" #tp "_entry")					\
	int BPF_PROG(on_##name##_entry)					\
	{								\
		struct irq_context *ic = this_irq_ctx();		\
									\
		if (ic)							\
			ic->field++;					\
		return 0;						\
	}								\
									\
	SEC("tp_btf/" #tp "_exit")					\
	int BPF_PROG(on_##name##_exit)					\
	{								\
		struct irq_context *ic = this_irq_ctx();		\
									\
		if (ic && ic->field)					\
			ic->field--;					\
		return 0;						\
	}

NESTED_CONTEXT(hrtimer, hrtimer_expire, timer)
NESTED_CONTEXT(local_timer, local_timer, timer)
NESTED_CONTEXT(ipi_single, call_function_single, ipi)
NESTED_CONTEXT(ipi, call_function, ipi)
