#!/usr/bin/env bash
# Per-call cost of `holdup latency` instrumentation: the time a program
# measures for one call of an operation, with and without the histogram
# instrumentation of that operation, medians of ROUNDS interleaved runs.
#   syscall  getppid() under raw_syscalls sys_enter/sys_exit   (target ≤ 150 ns)
#   fentry   vfs_read of a 1-byte read of /dev/zero, fentry/fexit (target ≤ 100 ns)
#   uprobe   an empty user function, uprobe/uretprobe          (target ≤ 2 µs)
# and the floors of the syscall and uprobe rows: the same calls while the
# programs are attached for another process only (tracepoint or trap and the
# pid filter, no histogram update). Then the slowdown of a program while
# `explain` is recorded (--callees 3 below a ~0.7 ms function, 10 k calls;
# target ≤ 5%), from the time the program measures in that function, and
# the same with --decision-ops 20 (the probes come off once each peak had
# 20 calls).
# bcc's funclatency needs kprobes and is compared only where it runs.
# usage: bench/latency_overhead.sh [ROUNDS] [CALLS]   (as root)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
calls=${2:-2000000}
. bench/common.sh
bench_setup holdup-cli
cc -O2 -g -o "$work/lat_bench" workloads/lat_bench.c
cc -O1 -g -fno-omit-frame-pointer -o "$work/lat_callees" workloads/lat_callees.c
bin=$work/lat_bench

per_call() { "$@" 2>"$work/err" | sed -n 's/^ns_per_call=//p'; }
# Seconds lat_callees spent in handle(), summed over its buckets.
in_handle() { "$@" 2>"$work/err" | sed -n 's/.*handle_ns=\([0-9]*\).*/\1/p' | awk '{s += $1} END {printf "%.3f", s / 1e9}'; }

kfunc=vfs_read
fentry_ok=1
if ! "$holdup" latency -o "$work/probe.data" --kfunc "$kfunc" -- "$bin" read 10 >/dev/null 2>"$work/err"; then
	fentry_ok=0
	fentry_why=$(cat "$work/err")
fi

declare -A ns
# The floors: the tool traces an idle process only, so the calls pay for
# the tracepoint (or the uprobe trap) and the pid filter, not for the
# histogram. Measured in every round, between the others.
floors() {
	sleep 100000 &
	local idle=$! tool
	"$holdup" latency -o "$work/idle.data" --syscalls --func "$bin:bench_func" -p "$idle" 2>/dev/null &
	tool=$!
	sleep 1
	ns[floor]+="$(per_call "$bin" syscall "$calls") "
	ns[ufloor]+="$(per_call "$bin" func "$((calls / 20))") "
	kill -INT "$tool"
	wait "$tool" || true
	kill "$idle"
	wait "$idle" 2>/dev/null || true
}
for _ in $(seq "$rounds"); do
	floors
	ns[plain_sys]+="$(per_call "$bin" syscall "$calls") "
	ns[plain_func]+="$(per_call "$bin" func "$calls") "
	ns[syscall]+="$(per_call "$holdup" latency -o "$work/s.data" --syscalls -- "$bin" syscall "$calls") "
	ns[uprobe]+="$(per_call "$holdup" latency -o "$work/u.data" --func bench_func -- "$bin" func "$((calls / 20))") "
	ns[plain_handle]+="$(in_handle "$work/lat_callees" 10000) "
	ns[explain]+="$(in_handle "$holdup" latency -o "$work/e.data" --func handle --callees 3 -- "$work/lat_callees" 10000) "
	ns[decided]+="$(in_handle "$holdup" latency -o "$work/d.data" --func handle --callees 3 --decision-ops 20 -- "$work/lat_callees" 10000) "
	if [ "$fentry_ok" = 1 ]; then
		ns[plain_read]+="$(per_call "$bin" read "$calls") "
		ns[fentry]+="$(per_call "$holdup" latency -o "$work/k.data" --kfunc "$kfunc" -- "$bin" read "$calls") "
	fi
done
med() { tr ' ' '\n' <<<"${ns[$1]}" | grep . | median; }

printf '%-8s %12s %12s %12s %8s  %s\n' what plain traced added ratio target
row() { # name, plain key, traced key, target
	local p t
	p=$(med "$2"); t=$(med "$3")
	printf '%-8s %9.1f ns %9.1f ns %9.1f ns %7.2fx  %s\n' "$1" "$p" "$t" "$(echo "$t - $p" | bc -l)" "$(echo "$t / $p" | bc -l)" "$4"
}
row floor plain_sys floor "(sys_enter/exit tracepoints + pid filter)"
row syscall plain_sys syscall "≤ 150 ns added"
if [ "$fentry_ok" = 1 ]; then
	row fentry plain_read fentry "≤ 100 ns added"
else
	echo "fentry   not measured: ${fentry_why#holdup: error: }"
fi
row ufloor plain_func ufloor "(uprobe + uretprobe trap + pid filter)"
row uprobe plain_func uprobe "≤ 2000 ns added"
p=$(med plain_handle); t=$(med explain)
printf '%-8s %10.3f s %10.3f s %+11.1f%%  %s\n' explain "$p" "$t" "$(echo "($t / $p - 1) * 100" | bc -l)" "≤ 5% (10 k calls of handle, --callees 3)"
t=$(med decided)
printf '%-8s %10.3f s %10.3f s %+11.1f%%  %s\n' decided "$p" "$t" "$(echo "($t / $p - 1) * 100" | bc -l)" "(the same, --decision-ops 20)"
if command -v funclatency-bpfcc >/dev/null || command -v funclatency >/dev/null; then
	echo "bcc funclatency is installed; it attaches kprobes/uprobes (run it by hand for comparison)"
else
	echo "bcc funclatency/syscount: not installed here; funclatency needs kprobes, which this kernel lacks"
fi
