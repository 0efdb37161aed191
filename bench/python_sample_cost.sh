#!/usr/bin/env bash
# The cost of an on-CPU sample whose thread runs Python, next to a native
# one: the recorder's on_cpu_sample program (kernel.bpf_stats_enabled), its
# run time over the on-CPU samples the recording made, on
#   - a C loop (workloads/spin_work.c, frame pointers),
#   - a Python loop DEPTH calls deep on a CPython whose frames are walked
#     (pyenv's 3.12 by default), and
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
cat >"$work/deep.py" <<'PY'
import sys, time
def spin(end):
    x = 0
    while time.monotonic() < end:
        for i in range(1000):
            x += i * i
def down(n, end):
    return spin(end) if n == 0 else down(n - 1, end)
down(int(sys.argv[1]), time.monotonic() + 2.0)
PY

# ns of on_cpu_sample per on-CPU sample, for one recording of a command
per_sample() {
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
ns = sum(p.get("run_time_ns", 0) for p in json.loads(sys.argv[2]) if p["id"] in ids and p["name"] == "on_cpu_sample")
samples = int(re.search(r"record: (\d+) samples", sys.argv[3]).group(1))
print("%.0f" % (ns / samples))' "$ids" "$snap" "$(cat "$work/c.err")"
}

prev=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -q kernel.bpf_stats_enabled="$prev"; rm -rf "$work"' EXIT
sysctl -q kernel.bpf_stats_enabled=1
declare -A cost
for ((r = 0; r < rounds; r++)); do
	cost[c]+="$(per_sample "$work/spin_work" 2000000000) "
	cost[py]+="$(per_sample "$py" "$work/deep.py" "$depth") "
	[ -x "$py_native" ] && cost[pynative]+="$(per_sample "$py_native" "$work/deep.py" "$depth") "
done
m() { tr ' ' '\n' <<<"${cost[$1]}" | grep . | median; }
c=$(m c)
echo "on_cpu_sample per on-CPU sample (ns, median of $rounds):"
echo "  C loop (native)                          $c"
[ -n "${cost[pynative]:-}" ] && echo "  Python $depth deep, not walked ($(basename "$py_native"))  $(m pynative)"
echo "  Python $depth deep, frames walked ($(basename "$py"))  $(m py)   $(echo "$(m py) / $c" | bc -l | cut -c1-4)x the C loop"
