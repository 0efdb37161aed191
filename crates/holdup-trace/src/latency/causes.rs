//! The names of the causes a latency file splits each call's time by (its
//! `causes` list, the columns of `cause_ns`): the recorder writes them,
//! `explain` and the renderers read them. The file format owns them, so
//! that the recorder, the analysis and the tests say the same words.

use crate::SOFTIRQ_NAMES;

/// Blocked with I/O wait.
pub const IOWAIT: &str = "iowait";
/// Blocked in a futex (a lock).
pub const FUTEX_WAIT: &str = "futex_wait";
/// Runnable, not running.
pub const PREEMPTED: &str = "preempted";
/// Any other blocking.
pub const BLOCKED: &str = "blocked";
/// The off-CPU causes, the first columns of every file with causes, in
/// the recorder's order.
pub const OFF_CPU: [&str; 4] = [IOWAIT, FUTEX_WAIT, PREEMPTED, BLOCKED];

/// The time of a call that no cause took: it ran on a CPU.
pub const ON_CPU: &str = "on-cpu";

/// Interrupts taken while the call ran on a CPU: the local timer, a
/// device whose handler was not told apart, one without a name.
pub const IRQ_TIMER: &str = "irq:timer";
pub const IRQ_OTHER: &str = "irq:other";
pub const IRQ_UNNAMED: &str = "irq:unnamed";

/// A device interrupt, by its handler's name.
pub fn irq(name: &str) -> String {
    format!("irq:{name}")
}

/// A softirq, by its number (`softirq:net_rx`).
pub fn softirq(nr: usize) -> String {
    format!("softirq:{}", SOFTIRQ_NAMES.get(nr).unwrap_or(&"?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupt_causes_are_named_by_kind_and_handler() {
        assert_eq!(irq("virtio0-input.0"), "irq:virtio0-input.0");
        assert_eq!(softirq(3), "softirq:net_rx");
        assert_eq!(softirq(99), "softirq:?");
        assert_eq!(OFF_CPU[2], PREEMPTED);
    }
}
