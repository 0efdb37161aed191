#!/usr/bin/env bash
# What always-on profiling costs. On a context-switch storm (`perf bench
# sched messaging -g 5 -l 1000`, which prints its own run time) the
# program's time under: perf record -F 1000 -g, holdup record (the default:
# every blocked sample has its stacks), holdup record --stack-budget, and a
# system-wide recorder at the settings of `holdup agent` (AGENT below: a low
# rate, a stack budget, no wait segments, block requests or wakers' stacks)
# running beside it. Each as a ratio to the plain program of the same round (median and
# quartiles of ROUNDS interleaved rounds), and in points above it.
# Then the recorder's own cost at the always-on settings on this host, as it
# is: its process's CPU time (utime + stime) and the run time of its BPF
# programs (kernel.bpf_stats_enabled, on only for this part) over IDLE
# seconds once started, as % of one core. BPF time is charged to whatever
# ran when the programs did, so it is added, not found in the process's.
# Then, during one storm, the run time of each of the recorder's BPF
# programs at the always-on settings (what the CPU-seconds above are made
# of; less noisy than program time on a shared machine).
# The modes run in a different order each round (the storm's time drifts
# within a round); MODES="perf agent" measures only those. Mode `base` is
# `agent` with another build of holdup (BASE=path/to/holdup, with the
# recorder's flags in BASE_ARGS if they differ), to compare a change with
# what it changes, round by round.
# usage: [MODES=...] [BASE=... [BASE_ARGS=...]] bench/agent_overhead.sh [ROUNDS [IDLE]]   (as root)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
idle=${2:-10}
. bench/common.sh
bench_setup holdup-cli
command -v bpftool >/dev/null || { echo "bpftool missing (apt install bpftool)"; exit 1; }
storm=(perf bench sched messaging -g 5 -l 1000)
budget=(--stack-budget 1000)
AGENT=(-F 19 --stack-budget 100 --no-segments --no-block-io --no-waker-stacks)

# The storm's own time (s) of `PREFIX... storm` (perf record's exit code
# here is not the program's).
prog_time() { { "$@" "${storm[@]}" 2>/dev/null || true; } | awk '/Total time/ {print $3}'; }

# Start a system-wide recorder with "$@" in the background and return once
# it records: it catches SIGTERM from then on (SigCgt bit 15), after its
# programs are attached and the processes that exist are read. Its pid in
# $rec.
start_recorder() {
	"${bin:-$holdup}" record -a "$@" -o "$work/a.data" >/dev/null 2>"$work/a.err" &
	rec=$!
	for _ in $(seq 600); do
		(( 0x$(awk '/^SigCgt/ {print $2}' /proc/"$rec"/status) & 0x4000 )) && break
		sleep 0.1
	done
	sleep 0.5
}

stop_recorder() { kill -TERM "$rec"; wait "$rec" || true; }

declare -A ratios
read -ra modes <<<"${MODES:-perf holdup budget agent}"
[[ " ${modes[*]} " != *" base "* || -x ${BASE:-} ]] || { echo "mode base needs BASE=path/to/holdup"; exit 1; }
read -ra base_args <<<"${BASE_ARGS:-${AGENT[*]}}"
for r in $(seq "$rounds"); do
	plain=$(prog_time)
	# Rotate: round r starts with mode r.
	n=${#modes[@]}
	for i in $(seq 0 $((n - 1))); do
		m=${modes[$(((i + r) % n))]}
		case $m in
		perf) t=$(prog_time perf record -F 1000 -g -o "$work/p.data" --) ;;
		holdup) t=$(prog_time "$holdup" record -o "$work/h.data" --) ;;
		budget) t=$(prog_time "$holdup" record "${budget[@]}" -o "$work/b.data" --) ;;
		agent) start_recorder "${AGENT[@]}"; t=$(prog_time); stop_recorder ;;
		base) bin=$BASE start_recorder "${base_args[@]}"; t=$(prog_time); stop_recorder ;;
		esac
		ratios[$m]+="$(printf "%.4f" "$(echo "$t / $plain" | bc -l)") "
	done
done

echo "storm: ${storm[*]} — program time / plain, median [q1..q3] of $rounds rounds (load average $(cut -d' ' -f1-3 /proc/loadavg))"
for m in "${modes[@]}"; do
	med=$(printf '%s\n' ${ratios[$m]} | median)
	printf '  %-8s %s  (%+.1f points)\n' "$m" "$(printf '%s\n' ${ratios[$m]} | quartiles)" "$(echo "($med - 1) * 100" | bc -l)"
done
echo "  budget = record ${budget[*]}; agent = record -a ${AGENT[*]} beside the plain program${BASE:+; base = $BASE record -a ${base_args[*]}}"

# The recorder's own cost at the always-on settings, once started.
prev=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -q kernel.bpf_stats_enabled="$prev"; rm -rf "$work"' EXIT
sysctl -q kernel.bpf_stats_enabled=1
prog_ids() { grep -h '^prog_id' /proc/"$rec"/fdinfo/* | awk '{print $2}' | sort -u | tr '\n' ' '; }
bpf_ns() { bpftool prog show -j | python3 -c '
import json, sys
ids = {int(x) for x in sys.argv[1].split()}
print(sum(p.get("run_time_ns", 0) for p in json.load(sys.stdin) if p["id"] in ids))' "$ids"; }

# Each program's run time during one storm (programs attached later, such
# as a fallback, are read at the end).
for b in "$holdup" ${BASE:+"$BASE"}; do
	args=("${AGENT[@]}")
	[[ $b == "$holdup" ]] || args=("${base_args[@]}")
	bin=$b start_recorder "${args[@]}"
	bpftool prog show -j >"$work/p0.json"
	t=$(prog_time)
	bpftool prog show -j >"$work/p1.json"
	ids=$(prog_ids)
	stop_recorder
	python3 -c '
import json, sys
ids = {int(x) for x in sys.argv[1].split()}
a = {p["id"]: p for p in json.load(open(sys.argv[2]))}
b = {p["id"]: p for p in json.load(open(sys.argv[3]))}
rows = []
for i in ids & b.keys():
    ns = b[i].get("run_time_ns", 0) - a.get(i, {}).get("run_time_ns", 0)
    n = b[i].get("run_cnt", 0) - a.get(i, {}).get("run_cnt", 0)
    if n:
        rows.append((ns, n, b[i]["name"]))
print("BPF during a %s s storm (%s, load average %s): %.3f CPU-s" % (sys.argv[4], sys.argv[5], sys.argv[6], sum(r[0] for r in rows) / 1e9))
for ns, n, name in sorted(rows, reverse=True)[:6]:
    print("  %-22s %7.1f ms %9d runs %6.0f ns each" % (name, ns / 1e6, n, ns / n))' \
		"$ids" "$work/p0.json" "$work/p1.json" "$t" "$b" "$(cut -d' ' -f1-3 /proc/loadavg)"
done

start_recorder "${AGENT[@]}"
ids=$(prog_ids)
cpu_ticks() { awk '{print $14 + $15}' /proc/"$rec"/stat; }
c0=$(cpu_ticks); b0=$(bpf_ns); t0=$(date +%s.%N)
sleep "$idle"
c1=$(cpu_ticks); b1=$(bpf_ns); t1=$(date +%s.%N)
stop_recorder
sysctl -q kernel.bpf_stats_enabled="$prev"
hz=$(getconf CLK_TCK)
python3 -c '
import sys
c0, c1, b0, b1, hz = (float(x) for x in sys.argv[1:6])
wall = float(sys.argv[7]) - float(sys.argv[6])
proc = (c1 - c0) / hz
bpf = (b1 - b0) / 1e9
print("recorder at the always-on settings over %.1f s (load average %s): process %.1f ms/s, BPF %.1f ms/s: %.2f%% of one core"
      % (wall, sys.argv[8], proc / wall * 1e3, bpf / wall * 1e3, (proc + bpf) / wall * 100))' \
	"$c0" "$c1" "$b0" "$b1" "$hz" "$t0" "$t1" "$(cut -d' ' -f1-3 /proc/loadavg)"
