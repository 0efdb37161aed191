#!/usr/bin/env bash
# Overhead and experiment rate of `holdup causal run` next to `coz run`
# (apt coz-profiler, COZ 0.2.2) on the same programs: the causal_* workloads,
# built with -gdwarf-3 -gstrict-dwarf so that COZ can read their line tables.
#
# For each program: the wall time of the plain program, under `coz run` and
# under `holdup causal run` (medians of ROUNDS interleaved runs), the
# slowdown of each, and the experiments per minute each profiler completed.
# The slowdown includes the delays that virtual speedups insert: that is
# the method's price, paid by both profilers.
# causal_procpipe is two processes (a pipe writer and its forked reader)
# and causal_prefork three (a parent and two workers sharing a lock):
# holdup profiles them with `causal run --system`; COZ runs them too but
# sees only the first process. NAME-sys is program NAME profiled by holdup
# with `--system` instead of per thread; NAME-a with `-a` (SCOZ's
# core-level delays, nothing loaded into the program; progress counted by
# a uprobe on a function called once per unit of progress).
# usage: bench/causal_overhead.sh [ROUNDS [PROGRAM...]]   (as root)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift $(($# > 0 ? 1 : 0))
programs=("$@")
[ $# -gt 0 ] || programs=(barrier odirect lock pool procpipe prefork barrier-sys lock-sys barrier-a lock-a procpipe-a)
. bench/common.sh
bench_setup holdup-cli holdup-causal
have_coz=1
command -v coz >/dev/null || { echo "coz not installed (apt install coz-profiler): holdup only" >&2; have_coz=0; }

for w in barrier odirect lock pool procpipe prefork; do
	cc -O1 -gdwarf-3 -gstrict-dwarf -fno-omit-frame-pointer -pthread -o "$work/$w" "workloads/causal_$w.c"
done
# Same work in every run: calibrate the spin loop once.
cat >"$work/cal.c" <<EOF
#include "$(pwd)/workloads/causal_common.h"
int main(void) { printf("%ld\n", iters_per_ms()); return 0; }
EOF
cc -O1 -o "$work/cal" "$work/cal.c"
CAUSAL_ITERS_PER_MS=$(env -u CAUSAL_ITERS_PER_MS "$work/cal")
export CAUSAL_ITERS_PER_MS


# mode, profile, command... → wall seconds; the profile gets the experiments
run() {
	local mode=$1 prof=$2 t0 t1
	shift 2
	t0=$(date +%s.%N)
	case $mode in
		plain) "$@" >/dev/null 2>&1 ;;
		coz) (cd "$work" && coz run -o "$prof" --- "$@" >/dev/null 2>&1) ;;
		holdup) "$holdup" causal run "${opts[@]}" -o "$prof" -- "$@" >/dev/null 2>&1 ;;
		# Every experiment at 0%: the price of sampling and bookkeeping
		# alone, without the delays that virtual speedups insert.
		holdup0) "$holdup" causal run "${opts[@]}" --speedup 0 -o "$prof" -- "$@" >/dev/null 2>&1 ;;
	esac
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}

declare -A cmds=(
	[barrier]="$work/barrier 1500 8 5"
	[odirect]="$work/odirect $work 1500 20 4"
	[lock]="$work/lock 3000 2 1"
	[pool]="$work/pool 1500 1 2"
	[procpipe]="$work/procpipe 4000"
	[prefork]="$work/prefork 6000"
)
declare -A progress_fn=([barrier]=round_done [lock]=iteration_done [procpipe]=item_done [odirect]=round_done)
modes=(plain holdup holdup0)
[ "$have_coz" = 1 ] && modes=(plain coz holdup holdup0)

printf "%-8s %9s %9s %9s %8s %8s %9s %10s %10s\n" program plain_s coz_s holdup_s coz_% holdup_% holdup0_% coz_exp/m holdup_exp/m
sum_coz=0 sum_holdup=0 sum_hold0=0 n=0
for name in "${programs[@]}"; do
	declare -A times=() exps=()
	program=${name%-sys}
	program=${program%-a}
	opts=()
	case $name in
		procpipe | prefork | *-sys) opts=(--system) ;;
		# A uprobe on the function each program calls once per unit of
		# progress (the lowest address of a COZ_PROGRESS line can be a
		# block run once, at -O1).
		*-a) opts=(-a --progress "$work/$program:${progress_fn[$program]}") ;;
	esac
	for r in $(seq "$rounds"); do
		for m in "${modes[@]}"; do
			prof="$work/$name.$m.$r.coz"
			rm -f "$prof"
			# shellcheck disable=SC2086
			t=$(run "$m" "$prof" ${cmds[$program]})
			times[$m]+="$t "
			if [ "$m" != plain ]; then
				e=$(grep -c '^experiment' "$prof" 2>/dev/null || true)
				exps[$m]+="$(echo "${e:-0} * 60 / $t" | bc -l) "
			fi
		done
	done
	plain=$(echo "${times[plain]}" | tr ' ' '\n' | grep . | median)
	hold=$(echo "${times[holdup]}" | tr ' ' '\n' | grep . | median)
	hold_e=$(echo "${exps[holdup]}" | tr ' ' '\n' | grep . | median)
	hold_pct=$(echo "($hold / $plain - 1) * 100" | bc -l)
	hold0=$(echo "${times[holdup0]}" | tr ' ' '\n' | grep . | median)
	hold0_pct=$(echo "($hold0 / $plain - 1) * 100" | bc -l)
	if [ "$have_coz" = 1 ]; then
		coz=$(echo "${times[coz]}" | tr ' ' '\n' | grep . | median)
		coz_e=$(echo "${exps[coz]}" | tr ' ' '\n' | grep . | median)
		coz_pct=$(echo "($coz / $plain - 1) * 100" | bc -l)
	else
		coz=0 coz_e=0 coz_pct=0
	fi
	printf "%-8s %9.2f %9.2f %9.2f %7.1f%% %7.1f%% %8.1f%% %10.0f %10.0f\n" "$name" "$plain" "$coz" "$hold" "$coz_pct" "$hold_pct" "$hold0_pct" "$coz_e" "$hold_e"
	sum_coz=$(echo "$sum_coz + $coz_pct" | bc -l)
	sum_hold0=$(echo "$sum_hold0 + $hold0_pct" | bc -l)
	sum_holdup=$(echo "$sum_holdup + $hold_pct" | bc -l)
	n=$((n + 1))
done
printf "mean slowdown: coz %.1f%%, holdup %.1f%% (at 0%% speedup only: %.1f%%)\n" "$(echo "$sum_coz / $n" | bc -l)" "$(echo "$sum_holdup / $n" | bc -l)" "$(echo "$sum_hold0 / $n" | bc -l)"
