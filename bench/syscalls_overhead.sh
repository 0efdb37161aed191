#!/usr/bin/env bash
# Added cost per system call of `holdup record --syscalls`, next to
# `holdup record` without it, `perf trace -s` and `strace -c`, on
# `perf bench syscall basic` (getppid in a loop) and on a small file loop
# (open, read, close of one small file). Both print their own run time
# ("Total time"); the added time divided by the number of system calls is
# the cost per call (`holdup-counts`: --syscalls with no ordinary call kept
# as a record, the in-kernel counting alone). Medians of ROUNDS interleaved
# runs. The cost of --syscalls itself is holdup-syscalls minus holdup.
# usage: bench/syscalls_overhead.sh [ROUNDS] [CALLS]   (as root)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
calls=${2:-2000000}
. bench/common.sh
bench_setup holdup-cli
cc -O2 -g -o "$work/fileloop" workloads/sys_fileloop.c
echo hello > "$work/small"


# The programs, for N system calls.
basic() { perf bench syscall basic -l "$1"; }
fileloop() { "$work/fileloop" "$work/small" $(($1 / 3)); }

# ns per system call of WORKLOAD under MODE: the program's own "Total time"
# over N calls. perf trace and strace cost ~20 µs a call here: they run a
# twentieth of the calls.
per_call() { # mode, workload
	local n=$calls out
	case $1 in perf-trace | strace) n=$((calls / 20)) ;; esac
	case $1 in
	plain) out=$($2 "$n" 2>/dev/null) ;;
	holdup) out=$("$holdup" record -o "$work/h.data" -- bash -c "$(declare -f $2); work=$work; $2 $n" 2>/dev/null) ;;
	holdup-syscalls) out=$("$holdup" record --syscalls -o "$work/s.data" -- bash -c "$(declare -f $2); work=$work; $2 $n" 2>/dev/null) ;;
	# Counting and timing only: no ordinary call becomes a record.
	holdup-counts) out=$("$holdup" record --syscalls --syscall-sample 4000000000 -o "$work/c.data" -- bash -c "$(declare -f $2); work=$work; $2 $n" 2>/dev/null) ;;
	perf-trace) out=$(perf trace -s -o /dev/null -- bash -c "$(declare -f $2); work=$work; $2 $n" 2>/dev/null) ;;
	strace) out=$(strace -f -c -o /dev/null -- bash -c "$(declare -f $2); work=$work; $2 $n" 2>/dev/null) ;;
	esac
	echo "$out" | awk -v n="$n" '/Total time/ {printf "%.1f\n", $3 * 1e9 / n}'
}

bench() { # name, workload
	declare -A t
	local modes=(plain holdup holdup-syscalls holdup-counts perf-trace strace)
	for _ in $(seq "$rounds"); do
		for m in "${modes[@]}"; do
			t[$m]+="$(per_call "$m" "$2") "
		done
	done
	local base
	base=$(printf '%s\n' ${t[plain]} | median)
	printf '%s: plain %.0f ns per system call\n' "$1" "$base"
	for m in "${modes[@]:1}"; do
		local s
		s=$(printf '%s\n' ${t[$m]} | median)
		printf '  %-16s %8.0f ns/call   added %7.0f ns/call   %6.2fx plain\n' "$m" "$s" \
			"$(echo "$s - $base" | bc -l)" "$(echo "$s / $base" | bc -l)"
	done
	local hs ps ss
	hs=$(printf '%s\n' ${t[holdup-syscalls]} | median)
	ps=$(printf '%s\n' ${t[perf-trace]} | median)
	ss=$(printf '%s\n' ${t[strace]} | median)
	printf '  added cost relative to holdup --syscalls: perf trace -s %.1fx, strace -c %.1fx\n' \
		"$(echo "($ps - $base) / ($hs - $base)" | bc -l)" "$(echo "($ss - $base) / ($hs - $base)" | bc -l)"
}

bench "perf bench syscall basic (getppid)" basic
bench "file loop (open+read+close)" fileloop
