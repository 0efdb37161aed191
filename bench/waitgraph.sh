#!/usr/bin/env bash
# Speed and memory of `holdup waitgraph` on a recording of
# `perf bench sched messaging`.
#
#   bench/waitgraph.sh            record (once) and measure
#   TRACE=f.data bench/waitgraph.sh   measure an existing trace
#   MSG_GROUPS=10 MSG_LOOPS=10000 ...     size of the recording (default ~60 s here)
#
# Prints scheduler events per second (a context switch per off-CPU interval
# plus its wakeup: what `perf sched record` counts as sched_switch +
# sched_waking):
#  - end to end (read, decode twice, analyse) on one core (taskset -c 0: the
#    decoder thread and the analysis share it) and on all cores;
#  - the analysis alone on one core, on records decoded into memory first;
# and the peak RSS on prefixes of the trace (a trace cut at any byte is a
# valid, shorter trace): memory should level off while events grow. All of
# it streaming (--no-holders): what the waited-for side of each edge did
# needs the trace in memory. That default (holders on: the file decoded
# once into memory) is timed last, as CPU time (user + sys, all threads) of
# the whole command, which a loaded machine does not inflate as it does wall
# time, then by step.
set -euo pipefail
cd "$(dirname "$0")/.."

HOLDUP=${HOLDUP:-target/release/holdup}
[ -x "$HOLDUP" ] || cargo build --release -p holdup-cli --quiet
out=target/bench
mkdir -p "$out"
trace=${TRACE:-$out/waitgraph-messaging.data}
runs=${RUNS:-3}

if [ ! -s "$trace" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "bench/waitgraph.sh: recording needs root (or pass TRACE=file)" >&2
		exit 1
	fi
	echo "recording: perf bench sched messaging -g ${MSG_GROUPS:-10} -l ${MSG_LOOPS:-10000}" >&2
	"$HOLDUP" record --ring-mb 512 -o "$trace" -- \
		perf bench sched messaging -g "${MSG_GROUPS:-10}" -l "${MSG_LOOPS:-10000}" >/dev/null
fi

# One run: "events segments seconds rss_mib" from --timing.
measure() { # measure PIN FILE
	local pin=$1 file=$2 line
	if [ "$pin" = one ]; then
		line=$(taskset -c 0 "$HOLDUP" waitgraph --json --timing --no-holders -i "$file" 2>&1 >/dev/null | grep 'analysed')
	else
		line=$("$HOLDUP" waitgraph --json --timing --no-holders -i "$file" 2>&1 >/dev/null | grep 'analysed')
	fi
	# holdup: analysed E sched events (S wait segments) in T s: ... peak RSS R MiB
	echo "$line" | sed -E 's/.*analysed ([0-9]+) sched events \(([0-9]+) wait segments\) in ([0-9.]+) s.*peak RSS ([0-9.]+) MiB/\1 \2 \3 \4/'
}

best() { # best PIN FILE: the fastest of $runs runs
	local pin=$1 file=$2 b="" t
	for _ in $(seq "$runs"); do
		t=$(measure "$pin" "$file")
		if [ -z "$b" ] || awk -v a="$t" -v b="$b" 'BEGIN { split(a, x); split(b, y); exit !(x[3] < y[3]) }'; then
			b=$t
		fi
	done
	echo "$b"
}

size=$(stat -c %s "$trace")
printf '%s: %.1f MB\n' "$trace" "$(awk -v s="$size" 'BEGIN { print s / 1e6 }')"
printf '%-10s %12s %12s %9s %14s %14s %9s\n' cores events segments seconds "M events/s" "M segments/s" "RSS MiB"
for pin in one all; do
	read -r ev seg sec rss <<<"$(best "$pin" "$trace")"
	events=$ev
	printf '%-10s %12d %12d %9.3f %14.2f %14.2f %9.1f\n' "$pin" "$ev" "$seg" "$sec" \
		"$(awk -v e="$ev" -v s="$sec" 'BEGIN { print e / s / 1e6 }')" \
		"$(awk -v e="$seg" -v s="$sec" 'BEGIN { print e / s / 1e6 }')" "$rss"
done

best_alone=0
for _ in $(seq "$runs"); do
	r=$(taskset -c 0 "$HOLDUP" waitgraph --bench-in-memory --no-holders -i "$trace" 2>&1 | grep 'analysis alone' | sed -E 's/.*: ([0-9.]+) M events\/s.*/\1/')
	best_alone=$(awk -v a="$r" -v b="$best_alone" 'BEGIN { print (a > b) ? a : b }')
done
printf '%-10s %s M events/s (analysis alone, records already in memory)\n' one "$best_alone"

echo
echo "peak memory against trace length (prefixes of the same trace, one core):"
printf '%-10s %12s %9s\n' prefix events "RSS MiB"
for frac in 25 50 100; do
	part=$out/waitgraph-prefix-$frac.data
	head -c $((size * frac / 100)) "$trace" >"$part"
	read -r ev _ _ rss <<<"$(measure one "$part")"
	printf '%-10s %12d %9.1f\n' "$frac%" "$ev" "$rss"
	rm -f "$part"
done

echo
echo "the default, with what the waited-for side did (holders), whole command on one core:"
best_cpu=""
for _ in $(seq "$runs"); do
	c=$( { TIMEFORMAT='%U %S'; time taskset -c 0 "$HOLDUP" waitgraph --json -i "$trace" >/dev/null 2>&1; } 2>&1 | awk '{ print $1 + $2 }')
	if [ -z "$best_cpu" ] || awk -v a="$c" -v b="$best_cpu" 'BEGIN { exit !(a < b) }'; then
		best_cpu=$c
	fi
done
printf '%-10s %12d events in %.3f CPU s: %.2f M events per CPU second\n' one "$events" "$best_cpu" \
	"$(awk -v e="$events" -v s="$best_cpu" 'BEGIN { print e / s / 1e6 }')"
echo "by step (CPU time of each step of one run, then each step alone, least of three):"
taskset -c 0 "$HOLDUP" waitgraph --json --timing -i "$trace" 2>&1 >/dev/null | grep 'CPU time'
taskset -c 0 "$HOLDUP" waitgraph --bench-in-memory -i "$trace" 2>&1 | grep 'each step'

