#!/usr/bin/env bash
# What following goroutines costs (record --goroutines): a goroutine-heavy
# pipeline (workloads/runtimes/pipeline.go, ITEMS values through two
# channel stages, over a hundred thousand parks a second) timed by itself
# under `holdup record` without and with --goroutines, medians of ROUNDS
# runs each, and the slowdown --goroutines adds. The goal is 10%; uprobes
# on the Go scheduler (a trap per park, wake and run) do not reach it on a
# program that parks this often, which is why --goroutines is opt-in.
# usage: bench/goroutine_cost.sh [ROUNDS] [ITEMS]   (as root)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
items=${2:-200000}
. bench/common.sh
bench_setup holdup-cli
go=/usr/local/go/bin/go
[ -x "$go" ] || go=go
(cd workloads/runtimes && "$go" build -o "$work/pipeline" pipeline.go)

# elapsed seconds the pipeline measured, recorded with extra options "$@"
run() {
	"$holdup" record -o "$work/g.data" "$@" -- "$work/pipeline" "$items" 2>/dev/null |
		awk '/^elapsed_s/ {print $2}'
}
parks=$("$work/pipeline" "$items" | awk '/^parks_per_s/ {print $2}')
declare -A t
for ((r = 0; r < rounds; r++)); do
	t[plain]+="$(run) "
	t[goroutines]+="$(run --goroutines) "
done
m() { tr ' ' '\n' <<<"${t[$1]}" | grep . | median; }
plain=$(m plain)
followed=$(m goroutines)
echo "pipeline of $items items, about $parks parks/s alone; elapsed s, median of $rounds:"
echo "  holdup record                 $plain"
echo "  holdup record --goroutines    $followed"
echo "  slowdown from --goroutines    $(echo "($followed / $plain - 1) * 100" | bc -l | cut -c1-5)% (goal 10%)"
