#!/usr/bin/env bash
# Overhead of `holdup record` next to `perf record -F 1000 -g` and the plain
# program, in one run, on a CPU+I/O program (the demo workload) and on
# `perf bench sched messaging` (a context-switch storm). Both print their own
# run time ("Total time"), which is what is compared: the slowdown of the
# program while it is profiled. The wall time of the whole command (with the
# tool's start-up and finishing) is shown beside it. Medians of ROUNDS
# interleaved runs. Also: trace bytes per wait event, and the speed of
# `holdup report` on 1 M samples.
# usage: bench/record_overhead.sh [ROUNDS]   (as root)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
cargo build --release --quiet -p holdup-cli
cargo build --release --quiet -p holdup-trace --examples
target=${CARGO_TARGET_DIR:-$(pwd)/target}
holdup=$target/release/holdup
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 -g -fno-omit-frame-pointer -pthread -o "$work/demo" workloads/demo.c

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
pct() { echo "($1/$2 - 1)*100" | bc -l; }

# run TOOL... -- CMD...: prints "<program time> <wall time>"
run() {
	local t0 t1 out
	t0=$(date +%s.%N)
	out=$("$@" 2>/dev/null)
	t1=$(date +%s.%N)
	echo "$(echo "$out" | awk '/Total time/ {print $3}') $(echo "$t1 - $t0" | bc -l)"
}

bench() { # name, command...
	local name=$1; shift
	declare -A prog wall
	local modes=(plain holdup holdup-no-segments perf)
	for _ in $(seq "$rounds"); do
		for m in "${modes[@]}"; do
			case $m in
			plain) r=$(run "$@") ;;
			holdup) r=$(run "$holdup" record -o "$work/h.data" -- "$@") ;;
			holdup-no-segments) r=$(run "$holdup" record --no-segments -o "$work/hn.data" -- "$@") ;;
			perf) r=$(run perf record -F 1000 -g -o "$work/p.data" -- "$@") ;;
			esac
			prog[$m]+="${r% *} "
			wall[$m]+="${r#* } "
		done
	done
	local base basew
	base=$(printf '%s\n' ${prog[plain]} | median)
	basew=$(printf '%s\n' ${wall[plain]} | median)
	echo "$name"
	for m in "${modes[@]}"; do
		local p w
		p=$(printf '%s\n' ${prog[$m]} | median)
		w=$(printf '%s\n' ${wall[$m]} | median)
		printf '  %-20s program %.3f s (%+5.1f%%)   wall %.3f s (%+5.1f%%)\n' "$m" "$p" "$(pct "$p" "$base")" "$w" "$(pct "$w" "$basew")"
	done
}

echo "holdup record overhead, median of $rounds interleaved runs each, $(nproc) cores"
bench "demo (cpu + O_DIRECT reads + mutex + sleeps)" "$work/demo" "$work/demo.bin"
bench "perf bench sched messaging (context-switch storm)" perf bench sched messaging

echo
echo "trace contents of one recording of perf bench sched messaging:"
"$holdup" record -v -o "$work/m.data" -- perf bench sched messaging 2>&1 >/dev/null | grep -E "bytes each|holdup record"

echo
cargo run --release --quiet -p holdup-trace --example synth -- "$work/synth.data" 1000000
t0=$(date +%s.%N); "$holdup" report -i "$work/synth.data" >/dev/null; t1=$(date +%s.%N)
t2=$(date +%s.%N); "$holdup" report --json -i "$work/synth.data" >/dev/null; t3=$(date +%s.%N)
printf 'holdup report on 1 M samples: %.3f s (text), %.3f s (--json)\n' "$(echo "$t1 - $t0" | bc -l)" "$(echo "$t3 - $t2" | bc -l)"
