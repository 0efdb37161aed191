#!/usr/bin/env bash
# Wall-time overhead of `holdup record` next to `perf record -F 1000 -g` and
# the plain program, in one run, on a CPU+I/O program (the demo workload)
# and on `perf bench sched messaging` (a context-switch storm). Prints the
# median of ROUNDS interleaved runs and the ratios, plus trace bytes per
# wait event and the speed of `holdup report` on 1 M samples.
# usage: bench/record_overhead.sh [ROUNDS]   (as root)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
cargo build --release --quiet -p holdup-cli -p holdup-trace --examples
holdup=$(pwd)/target/release/holdup
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 -g -fno-omit-frame-pointer -pthread -o "$work/demo" workloads/demo.c

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
wall() { # wall seconds of a command
	local t0 t1
	t0=$(date +%s.%N)
	"$@" >/dev/null 2>&1
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}

bench() { # name, command...
	local name=$1; shift
	local plain=() hold=() holdns=() perfr=()
	for _ in $(seq "$rounds"); do
		plain+=("$(wall "$@")")
		hold+=("$(wall "$holdup" record -o "$work/h.data" -- "$@")")
		holdns+=("$(wall "$holdup" record --no-segments -o "$work/hn.data" -- "$@")")
		perfr+=("$(wall perf record -F 1000 -g -o "$work/p.data" -- "$@")")
	done
	local p h hn f
	p=$(printf '%s\n' "${plain[@]}" | median)
	h=$(printf '%s\n' "${hold[@]}" | median)
	hn=$(printf '%s\n' "${holdns[@]}" | median)
	f=$(printf '%s\n' "${perfr[@]}" | median)
	printf '%-26s plain %.3f s | holdup %.3f s (%+.1f%%) | holdup --no-segments %.3f s (%+.1f%%) | perf record -g %.3f s (%+.1f%%)\n' \
		"$name" "$p" "$h" "$(echo "($h/$p - 1)*100" | bc -l)" "$hn" "$(echo "($hn/$p - 1)*100" | bc -l)" \
		"$f" "$(echo "($f/$p - 1)*100" | bc -l)"
}

echo "holdup record overhead, median of $rounds runs each (2 cores)"
bench "demo (cpu+io+lock+sleep)" "$work/demo" "$work/demo.bin"
bench "perf bench sched messaging" perf bench sched messaging

echo
"$holdup" record -v -o "$work/m.data" -- perf bench sched messaging 2>&1 >/dev/null | grep -E "bytes|holdup record"

echo
cargo run --release --quiet -p holdup-trace --example synth -- "$work/synth.data" 1000000
t=$(wall "$holdup" report -i "$work/synth.data")
tj=$(wall "$holdup" report --json -i "$work/synth.data")
printf 'holdup report on 1 M samples: %.3f s (text), %.3f s (--json)\n' "$t" "$tj"
