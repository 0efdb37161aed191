#!/usr/bin/env bash
# Overhead of `holdup record` next to `perf record -F 1000 -g` and the plain
# program, in one run, on a CPU+I/O program (the demo workload), a CPU-only
# one, an I/O-only one (4 KiB O_DIRECT reads) and `perf bench sched
# messaging` (a context-switch storm). Each prints
# its own run time ("Total time"), which is what is compared: the slowdown of
# the program while it is profiled. The wall time of the whole command (with the
# tool's start-up and finishing) is shown beside it, both as ratios to the
# plain program, holdup's and perf's side by side. Medians of ROUNDS
# interleaved runs, twice as many on the storm (the spread, min..max,
# in brackets), and each round's slowdown against its own plain run with
# quartiles, holdup's minus perf's among them. Also: holdup's
# start-up (until the target runs) and finishing time (after it ended,
# symbolization included; cold and warm symbol cache), the cost of each BPF
# program per call (with bpftool) and, on a token ring of processes, all of
# them and the recorder's own CPU per blocked sample, and on the O_DIRECT
# reads per read, as a share of what a read takes; trace bytes per wait
# event and the drain loop's CPU on the storm, and the speed of `holdup
# report` on 1 M samples.
# The "clock" runs have nothing but a 1 kHz cpu-clock event open on every CPU
# (bench/sampling_clock.c): without a hardware PMU both tools sample on
# cpu-clock, and on a VM each of its interrupts is dear, so that is the floor
# under both; holdup's own work is its slowdown minus the clock's.
# usage: bench/record_overhead.sh [ROUNDS]   (as root)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
. bench/common.sh
bench_setup holdup-cli
cargo build --release --quiet -p holdup-trace --examples
cc -O1 -g -fno-omit-frame-pointer -pthread -o "$work/demo" workloads/demo.c
cc -O1 -g -fno-omit-frame-pointer -o "$work/spin_work" workloads/spin_work.c
cc -O2 -o "$work/sampling_clock" bench/sampling_clock.c
cc -O2 -o "$work/token_ring" workloads/token_ring.c
cc -O2 -o "$work/odirect_loop" bench/odirect_loop.c
# Its file is made once, before any round is timed.
"$work/odirect_loop" "$work/od.bin" 64 1 >/dev/null
odirect=("$work/odirect_loop" "$work/od.bin" 64 20000)

pct() { echo "($1/$2 - 1)*100" | bc -l; }

# run TOOL... -- CMD...: prints "<program time> <wall time>"; the tool's
# stderr is kept in $work/stderr
run() {
	local t0 t1 out
	t0=$(date +%s.%N)
	out=$("$@" 2>"$work/stderr")
	t1=$(date +%s.%N)
	echo "$(echo "$out" | awk '/Total time/ {print $3}') $(echo "$t1 - $t0" | bc -l)"
}

# "median [min..max]" of the numbers on stdin
spread() { local v; v=$(sort -n); printf '%s [%s..%s]' "$(echo "$v" | median)" "$(echo "$v" | head -1)" "$(echo "$v" | tail -1)"; }

# holdup's own start-up and finishing (ms), from its -v line in $work/stderr
phases() { sed -n 's/.*start-up \([0-9.]*\) ms.*finishing \([0-9.]*\) ms.*symbolization \([0-9.]*\) ms.*/\1 \2 \3/p' "$work/stderr"; }

bench() { # name, rounds, command...
	local name=$1 n=$2; shift 2
	declare -A prog wall
	local modes=(plain clock holdup holdup-no-segments perf) startup="" finishing=""
	for _ in $(seq "$n"); do
		for m in "${modes[@]}"; do
			case $m in
			plain) r=$(run "$@") ;;
			clock) r=$(run "$work/sampling_clock" 1000 "$@") ;;
			holdup) r=$(run "$holdup" record -v -o "$work/h.data" -- "$@")
				read -r s f _ <<<"$(phases)"; startup+="$s "; finishing+="$f " ;;
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
		printf '  %-20s program %.3f s ×%.3f (%+5.1f%%) %-16s  wall %.3f s ×%.3f %s\n' "$m" \
			"$p" "$(echo "$p / $base" | bc -l)" "$(pct "$p" "$base")" "[$(printf '%s\n' ${prog[$m]} | sort -n | head -1)..$(printf '%s\n' ${prog[$m]} | sort -n | tail -1)]" \
			"$w" "$(echo "$w / $basew" | bc -l)" "[$(printf '%s\n' ${wall[$m]} | sort -n | head -1 | cut -c1-5)..$(printf '%s\n' ${wall[$m]} | sort -n | tail -1 | cut -c1-5)]"
	done
	ratio() { echo "$(printf '%s\n' ${1} | median) / $2" | bc -l; }
	# The machine's speed drifts over a run by more than the overheads
	# compared: the slowdown of each run against the plain run of its own
	# round cancels the drift. Their median and quartiles, and those of
	# holdup's minus perf's in each round, say how far the difference
	# between the two tools can be trusted.
	slowdown() { paste <(printf '%s\n' ${prog[$1]}) <(printf '%s\n' ${prog[plain]}) | awk '{printf "%.2f\n", ($1 / $2 - 1) * 100}'; }
	minus() { paste <(slowdown "$1") <(slowdown "$2") | awk '{printf "%.2f\n", $1 - $2}' | quartiles; }
	echo "  paired, slowdown in % against the plain run of the same round, median [quartiles]:"
	echo "    holdup $(slowdown holdup | quartiles), perf $(slowdown perf | quartiles), clock alone $(slowdown clock | quartiles)"
	echo "    holdup minus perf $(minus holdup perf), holdup minus clock $(minus holdup clock), perf minus clock $(minus perf clock)"
	printf '  holdup vs perf: program ×%.3f vs ×%.3f, wall ×%.3f vs ×%.3f; holdup start-up %s ms, finishing %s ms\n' \
		"$(ratio "${prog[holdup]}" "$base")" "$(ratio "${prog[perf]}" "$base")" \
		"$(ratio "${wall[holdup]}" "$basew")" "$(ratio "${wall[perf]}" "$basew")" \
		"$(printf '%s\n' $startup | spread)" "$(printf '%s\n' $finishing | spread)"
}

# Start-up and finishing of `holdup record` on a program that does nothing,
# with a cold symbol cache (a fresh directory) and then warm.
fixed_cost() {
	local cold="" warm="" s f y
	for _ in $(seq "$rounds"); do
		rm -rf "$work/cache"
		XDG_CACHE_HOME=$work/cache "$holdup" record -v -o "$work/t.data" -- "$work/demo" >/dev/null 2>"$work/stderr" || true
		read -r s f y <<<"$(phases)"; cold+="$s/$f/$y "
		XDG_CACHE_HOME=$work/cache "$holdup" record -v -o "$work/t.data" -- "$work/demo" >/dev/null 2>"$work/stderr" || true
		read -r s f y <<<"$(phases)"; warm+="$s/$f/$y "
	done
	col() { printf '%s\n' $1 | cut -d/ -f"$2" | spread; }
	echo "holdup record of a program that exits at once (ms, median [min..max]):"
	echo "  start-up $(col "$cold" 1); finishing, cold symbol cache $(col "$cold" 2) (symbolization $(col "$cold" 3)); warm $(col "$warm" 2) (symbolization $(col "$warm" 3))"
}

# The storm is 200 tasks (-g 5) for about 1.8 s: past the first second,
# when the drain loop converts what the ring holds while the program runs.
# (A run under a second is converted only after it exited, which hid that
# cost.) Its time varies the most: twice the rounds.
storm=(perf bench sched messaging -g 5 -l 1000)
echo "holdup record overhead, medians of interleaved runs ($rounds rounds, $((2 * rounds)) on the storm), $(nproc) cores"
bench "demo (cpu + O_DIRECT reads + mutex + sleeps)" "$rounds" "$work/demo" "$work/demo.bin"
bench "spin_work (cpu only, one thread)" "$rounds" "$work/spin_work"
bench "odirect_loop (4 KiB O_DIRECT reads, one thread)" "$rounds" "${odirect[@]}"
bench "${storm[*]} (context-switch storm)" $((2 * rounds)) "${storm[@]}"
echo
fixed_cost

# What each BPF program costs per call (kernel.bpf_stats_enabled for one
# recording of a command; the recorder's programs are those its descriptors
# name). The per-event programs of an I/O-bound program are its whole cost.
# Also all programs and the recorder's own CPU (drain loop, finishing) per
# blocked sample, on the token ring (100 processes, built like distribution
# binaries, without frame pointers): nearly every block there makes one,
# and their number varies little from run to run, unlike the storm's
# context switches. On the O_DIRECT reads the same per read: every hook
# on a read's path runs on its critical path, and this CPU cost varies far
# less from run to run than the program's time does (on this kind of
# machine the 1 kHz clock alone moves an I/O-bound program by several
# percent either way), so it is the measure of holdup's cost on I/O.
bpf_costs() { # name, command...
	local name=$1; shift
	command -v bpftool >/dev/null || { echo "(bpftool missing: no per-program costs)"; return; }
	local prev rec ids="" snap=""
	prev=$(sysctl -n kernel.bpf_stats_enabled)
	sysctl -q kernel.bpf_stats_enabled=1
	"$holdup" record -v -o "$work/c.data" -- "$@" >"$work/c.out" 2>"$work/c.err" &
	rec=$!
	while kill -0 "$rec" 2>/dev/null; do
		local i s
		i=$(grep -h '^prog_id' /proc/"$rec"/fdinfo/* 2>/dev/null | awk '{print $2}' | sort -u | tr '\n' ' ' || true)
		s=$(bpftool prog show -j 2>/dev/null || true)
		if [ -n "$i" ] && grep -q '"on_switch"' <<<"$s"; then ids=$i; snap=$s; fi
		sleep 0.1
	done
	sysctl -q kernel.bpf_stats_enabled="$prev"
	echo "BPF programs of one recording of $name (calls, mean cost, total):"
	python3 -c '
import json, os, re, sys
ids = {int(x) for x in sys.argv[1].split()}
for p in sorted(json.loads(sys.argv[2]), key=lambda p: -p.get("run_time_ns", 0)):
    if p["id"] in ids and p.get("run_cnt"):
        print("  %-20s %9d calls %7.0f ns %8.1f ms" % (p["name"], p["run_cnt"], p["run_time_ns"] / p["run_cnt"], p["run_time_ns"] / 1e6))
total = sum(p.get("run_time_ns", 0) for p in json.loads(sys.argv[2]) if p["id"] in ids)
print("  all programs %.1f ms" % (total / 1e6))
err = sys.argv[3]
blocked = re.search(r"(\d+) blocked samples \(weight", err)
cpu = re.search(r"drainer used ([0-9.]+) s.*finishing used ([0-9.]+) s", err)
if os.environ.get("PER_BLOCKED_SAMPLE") and blocked and cpu and int(blocked.group(1)):
    n = int(blocked.group(1))
    user = float(cpu.group(1)) + float(cpu.group(2))
    print("  per blocked sample (%d of them): all programs %.0f ns, the recorder process %.0f ns" % (n, total / n, user * 1e9 / n))
reads = re.search(r"reads=(\d+) mean_us=([0-9.]+)", sys.argv[4])
if os.environ.get("PER_READ") and reads and cpu:
    # Each read is one block request: the snapshot of the counters, taken
    # every 0.1 s, saw as many reads as it counts issues. The drain loop
    # only: finishing (symbolization) is a fixed cost, as large as the
    # share of the reads on a run this short.
    issued = sum(p["run_cnt"] for p in json.loads(sys.argv[2]) if p["id"] in ids and p["name"] == "on_rq_issue")
    n, us = int(reads.group(1)), float(reads.group(2))
    drain = float(cpu.group(1)) * 1e9 / n
    if issued:
        per = total / issued
        print("  per read (%d of them, %.1f us each while recorded): all programs %.0f ns, the drain loop %.0f ns; together %.1f%% of a read" % (n, us, per, drain, (per + drain) / (us * 10)))
' "$ids" "${snap:-[]}" "$(cat "$work/c.err")" "$(cat "$work/c.out")"
}

echo
bpf_costs "the storm" "${storm[@]}"
bpf_costs "the demo" "$work/demo" "$work/demo.bin"
PER_BLOCKED_SAMPLE=1 bpf_costs "the token ring" "$work/token_ring" 100 3000
PER_READ=1 bpf_costs "the O_DIRECT reads" "${odirect[@]}"

echo
echo "trace contents of one recording of ${storm[*]}, and the drain loop's CPU:"
"$holdup" record -v -o "$work/m.data" -- "${storm[@]}" 2>&1 >/dev/null | grep -E "bytes each|holdup record|drainer used"

echo
cargo run --release --quiet -p holdup-trace --example synth -- "$work/synth.data" 1000000
t0=$(date +%s.%N); "$holdup" report -i "$work/synth.data" >/dev/null; t1=$(date +%s.%N)
t2=$(date +%s.%N); "$holdup" report --json -i "$work/synth.data" >/dev/null; t3=$(date +%s.%N)
printf 'holdup report on 1 M samples: %.3f s (text), %.3f s (--json)\n' "$(echo "$t1 - $t0" | bc -l)" "$(echo "$t3 - $t2" | bc -l)"
