/*
 * Interrupts as causes (DARC §3.6): a hard irq or softirq runs on the time of
 * whatever thread it interrupted, so its duration, measured per CPU, is
 * charged to that thread's clock of the interrupt rather than left in the
 * call's own on-CPU time.
 */

/* Interrupts that run while a thread is on a CPU take time from its
 * call: the current task in an interrupt is the interrupted thread. A
 * hard interrupt during a softirq counts for the interrupt only. */
struct irq_clock {
	u64 irq_at;		/* outermost hard interrupt's entry */
	u64 irq_total;		/* hard-interrupt time so far on this CPU */
	u64 softirq_at;
	u64 softirq_irq_snap;	/* irq_total at softirq entry */
	u32 irq_depth;
	u32 irq_cause;		/* of the outermost hard interrupt */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct irq_clock);
} irq_clocks SEC(".maps");

/* Device interrupt → its cause slot, given on first sight. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, u32);
	__type(value, u32);
} irq_slots SEC(".maps");

/* Cause slot - LAT_CAUSE_IRQ_DEV → the interrupt that has it; a slot is
 * taken by inserting it, so two CPUs cannot take the same one. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LAT_IRQ_DEV_SLOTS);
	__type(key, u32);
	__type(value, struct lat_irq_name);
} irq_names SEC(".maps");

static __always_inline struct irq_clock *irq_clock(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&irq_clocks, &zero);
}

static __always_inline void charge_current(u32 cause, u64 ns)
{
	struct thread_starts *s;

	u64 i = cause;

	s = bpf_task_storage_get(&starts, bpf_get_current_task_btf(), 0, 0);
	/* A 64-bit check on the index itself, next to its use: the
	 * compiler would otherwise fold it into a caller's check or make it
	 * on 32 bits, which the verifier does not carry over. */
	asm volatile("" : "+r"(i));
	if (s && i < LAT_CAUSES) {
		s->off.ns[i] += ns;
		s->off.any += ns;
	}
}

/* The cause slot of device interrupt `irq`, given on first sight. Two
 * CPUs seeing a new interrupt at once may both take a slot; the first
 * insert into irq_slots wins and the other slot is never charged. */
static __always_inline u32 irq_cause(int irq, struct irqaction *action)
{
	struct lat_irq_name n = { .irq = irq };
	u32 key = irq, cause = LAT_CAUSE_IRQ_OTHER, *found;

	found = bpf_map_lookup_elem(&irq_slots, &key);
	if (found)
		return *found;
	BPF_CORE_READ_STR_INTO(&n.name, action, name);
#pragma unroll
	for (int i = 0; i < LAT_IRQ_DEV_SLOTS; i++) {
		u32 slot = i;

		if (bpf_map_update_elem(&irq_names, &slot, &n, BPF_NOEXIST) == 0) {
			cause = LAT_CAUSE_IRQ_DEV + i;
			break;
		}
	}
	bpf_map_update_elem(&irq_slots, &key, &cause, BPF_NOEXIST);
	found = bpf_map_lookup_elem(&irq_slots, &key);
	return found ? *found : LAT_CAUSE_IRQ_OTHER;
}

static __always_inline int irq_enter(u32 cause)
{
	struct irq_clock *c = irq_clock();

	if (c && c->irq_depth++ == 0) {
		c->irq_at = bpf_ktime_get_ns();
		c->irq_cause = cause;
	}
	return 0;
}

static __always_inline int irq_exit(void)
{
	struct irq_clock *c = irq_clock();
	u64 d;

	if (!c || c->irq_depth == 0)
		return 0;
	if (--c->irq_depth == 0 && c->irq_at) {
		d = bpf_ktime_get_ns() - c->irq_at;
		c->irq_total += d;
		c->irq_at = 0;
		charge_current(c->irq_cause, d);
	}
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(lat_irq_entry, int irq, struct irqaction *action)
{
	return irq_enter(irq_cause(irq, action));
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(lat_irq_exit, int irq, struct irqaction *action, int ret)
{
	return irq_exit();
}

SEC("tp_btf/local_timer_entry")
int BPF_PROG(lat_timer_entry, int vector)
{
	return irq_enter(LAT_CAUSE_IRQ_TIMER);
}

SEC("tp_btf/local_timer_exit")
int BPF_PROG(lat_timer_exit, int vector)
{
	return irq_exit();
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(lat_softirq_entry, unsigned int vec)
{
	struct irq_clock *c = irq_clock();

	if (c) {
		c->softirq_at = bpf_ktime_get_ns();
		c->softirq_irq_snap = c->irq_total;
	}
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(lat_softirq_exit, unsigned int vec)
{
	struct irq_clock *c = irq_clock();
	u64 d, irq;

	if (!c || !c->softirq_at)
		return 0;
	d = bpf_ktime_get_ns() - c->softirq_at;
	irq = c->irq_total - c->softirq_irq_snap;
	c->softirq_at = 0;
	/* In ksoftirqd the current task is no traced thread: nothing is
	 * charged, its softirqs are not another thread's. */
	if (d > irq && vec < LAT_SOFTIRQ_VECS)
		charge_current(LAT_CAUSE_SOFTIRQ + vec, d - irq);
	return 0;
}
