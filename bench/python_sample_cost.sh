#!/usr/bin/env bash
# The cost of an on-CPU sample whose thread runs Python, next to a native
# one: the recorder's on_cpu_sample program (kernel.bpf_stats_enabled), its
# run time over the on-CPU samples the recording made (its runs in other
# tasks taken out), on
#   - a C loop (workloads/spin_work.c, frame pointers),
#   - a Python loop DEPTH calls deep (workloads/runtimes/py_deep.py) on a CPython whose frames are walked
#     (pyenv's 3.12 by default): a recursion (one code object at every
#     level), and a chain of DEPTH distinct functions (a code object each),
#     and
#   - the same Python loop on a CPython the recorder does not walk (3.9),
#     the native sample of the same kind of process.
# Medians of ROUNDS runs of each. The goal: a Python sample costs at most
# twice a native one.
# usage: bench/python_sample_cost.sh [ROUNDS] [DEPTH]   (as root; PY=... PY_NATIVE=... choose the interpreters)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
depth=${2:-20}
py=${PY:-$HOME/.pyenv/versions/3.12.1/bin/python}
py_native=${PY_NATIVE:-$HOME/.pyenv/versions/3.9.18/bin/python}
. bench/common.sh
bench_setup holdup-cli
command -v bpftool >/dev/null || { echo "bpftool missing (apt install bpftool)"; exit 1; }
cc -O1 -g -fno-omit-frame-pointer -o "$work/spin_work" workloads/spin_work.c
deep=$(pwd)/workloads/runtimes/py_deep.py
{
	echo "import sys, time"
	echo "sys.path.insert(0, '$(dirname "$deep")')"
	echo "from py_deep import spin"
	echo "f0 = spin"
	for ((i = 1; i <= depth + 1; i++)); do echo "def f$i(end): return f$((i - 1))(end)"; done
	echo "f$((depth + 1))(time.monotonic() + 2.0)"
} >"$work/chain.py"

# "run time (ns), runs, on-CPU samples" of on_cpu_sample over one recording
# of a command
stats() {
	local rec ids="" snap="" i s
	"$holdup" record -o "$work/c.data" -- "$@" >/dev/null 2>"$work/c.err" &
	rec=$!
	while kill -0 "$rec" 2>/dev/null; do
		i=$(grep -h '^prog_id' /proc/"$rec"/fdinfo/* 2>/dev/null | awk '{print $2}' | sort -u | tr '\n' ' ' || true)
		s=$(bpftool prog show -j 2>/dev/null || true)
		if [ -n "$i" ] && grep -q '"on_cpu_sample"' <<<"$s"; then ids=$i; snap=$s; fi
		sleep 0.2
	done
	python3 -c '
import json, re, sys
ids = {int(x) for x in sys.argv[1].split()}
progs = [p for p in json.loads(sys.argv[2]) if p["id"] in ids and p["name"] == "on_cpu_sample"]
samples = int(re.search(r"record: (\d+) samples", sys.argv[3]).group(1))
print(sum(p.get("run_time_ns", 0) for p in progs), sum(p.get("run_cnt", 0) for p in progs), samples)' "$ids" "$snap" "$(cat "$work/c.err")"
}

# ns of on_cpu_sample per on-CPU sample of a command. The program runs at
# every tick of every CPU, most of them in other tasks when the machine is
# busy; those runs, at $other ns each (a recording of sleep), are taken out.
per_sample() {
	read -r ns runs samples < <(stats "$@")
	echo "($ns - ($runs - $samples) * $other) / $samples" | bc
}

prev=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -q kernel.bpf_stats_enabled="$prev"; rm -rf "$work"' EXIT
sysctl -q kernel.bpf_stats_enabled=1
declare -A cost
for ((r = 0; r < rounds; r++)); do
	# The recorder's programs are sometimes not seen in a short recording
	# (it loads slowly on a busy machine): tried again.
	for _ in 1 2 3; do
		read -r ns runs _ < <(stats sleep 1)
		[ "${runs:-0}" -gt 0 ] && break
	done
	[ "${runs:-0}" -gt 0 ] || { echo "no run of on_cpu_sample seen in a recording of sleep"; exit 1; }
	other=$((ns / runs))
	cost[other]+="$other "
	cost[c]+="$(per_sample "$work/spin_work" 2000000000) "
	cost[py]+="$(per_sample "$py" "$deep" "$depth") "
	cost[chain]+="$(per_sample "$py" "$work/chain.py") "
	[ -x "$py_native" ] && cost[pynative]+="$(per_sample "$py_native" "$deep" "$depth") "
done
m() { tr ' ' '\n' <<<"${cost[$1]}" | grep . | median; }
c=$(m c)
echo "on_cpu_sample per on-CPU sample (ns, median of $rounds):"
echo "  C loop (native)                          $c"
[ -n "${cost[pynative]:-}" ] && echo "  Python $depth deep, not walked ($(basename "$py_native"))  $(m pynative)"
times() { echo "$(m "$1") / $c" | bc -l | cut -c1-4; }
echo "  Python $depth deep, frames walked ($(basename "$py"))  $(m py)   $(times py)x the C loop"
echo "  the same, $depth distinct functions          $(m chain)   $(times chain)x the C loop"
echo "  (a run in another task: $(m other); load average: $(cut -d' ' -f1-3 /proc/loadavg))"
