#!/usr/bin/env bash
# BCOZ's RocksDB case (OSDI'24, §4.2): readrandom with its workers contending
# on the block cache's lock, profiled with `holdup causal run` on the
# distribution's db_bench and librocksdb (no line tables: function targets),
# and the predictions set beside what the fixes really buy, measured in the
# same run.
#
# The DB is filled once; every read run is readrandom with THREADS threads,
# a block cache that holds the whole DB, and the page cache warm. Progress
# is counted without a trap: with --stats_interval=N each db_bench worker
# writes one line to stderr every N reads, so `--progress syscall:write`
# counts reads in groups of N (a BPF count on the system call; a uprobe on
# DBImpl::GetImpl would trap once a read).
#
# Prints
#  - plain readrandom throughput with 4/16/64 shards and with the DB on a
#    RAM disk, each run right after one with 1 shard on the disk (the
#    machine's load drifts: each speedup is of its own pair);
#  - the throughput of the profiled run itself (its delays included) and
#    of one whose experiments all speed up by 0% (what sampling and
#    counting cost alone), and within the profiled run, its progress rate
#    over all experiments against that in its 0% experiments (what the
#    delays cost, free of the drift between runs);
#  - holdup's top code targets, its predictions for the block-cache
#    functions (LRU cache shard, its mutex, the table reader's cache
#    lookups) and for subclass:io, next to the measured program speedups
#    (1 − ops/s before ÷ ops/s after, COZ's measure);
#  - the paper's second finding: fillrandom's write stalls, relieved by
#    max_write_buffer_number 2 → 16, measured in pairs, and holdup's top
#    targets on the stalling configuration (WRITE_SECONDS of profile).
#    The L0 triggers are raised: with two cores the default ones make
#    compaction's backlog, not the memtables, stall the writers.
# KEEP=DIR keeps the profiles there.
# usage: bench/causal_rocksdb.sh [SECONDS [CAUSAL_SECONDS [THREADS]]]   (as root)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
causal_secs=${2:-240}
threads=${3:-4}
. bench/common.sh
bench_setup holdup-cli holdup-causal
if ! command -v db_bench >/dev/null; then
	apt-get install -y rocksdb-tools >/dev/null || { echo "db_bench is needed (apt install rocksdb-tools)" >&2; exit 1; }
fi
keys=1000000
# db_bench's default block cache is 8 MiB, a twelfth of the DB: reads
# would miss it and go to the page cache, and the cache's lock would not
# be the bottleneck. BCOZ's case has the whole DB in the block cache.
cache_bytes=$((1 << 30))
stats_every=100
db=/var/tmp/holdup-rocksdb-$$
ram=/dev/shm/holdup-rocksdb-$$
wdb=/var/tmp/holdup-rocksdb-writes-$$
trap 'rm -rf "$work" "$db" "$ram" "$wdb"' EXIT

echo "== filling $keys keys (fillrandom, 100-byte values, no compression)"
db_bench --benchmarks=fillrandom --num=$keys --value_size=100 --compression_type=none \
	--db="$db" 2>&1 | grep '^fillrandom'
du -sh "$db" | cut -f1 | sed 's/^/DB size: /'
cp -r "$db" "$ram"

# readrandom DB SHARD_BITS SECONDS [WRAPPER...] → its ops/s on stdout
reads() {
	local dir=$1 bits=$2 s=$3
	shift 3
	cat "$dir"/* >/dev/null
	"$@" db_bench --benchmarks=readrandom --use_existing_db=1 --num=$keys --threads="$threads" \
		--cache_size=$cache_bytes --cache_numshardbits="$bits" --duration="$s" \
		--stats_interval=$stats_every --db="$dir" 2>"$work/stderr" |
		awk '$1 == "readrandom" { for (i = 1; i < NF; i++) if ($(i + 1) == "ops/sec") print $i }'
}
speedup() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", 100 * (1 - a / b) }'; }

echo "== plain readrandom, $threads threads, $secs s each, in pairs"
declare -A base_ops fixed_ops
for fix in 2 4 6 ram; do
	base_ops[$fix]=$(reads "$db" 0 "$secs")
	case $fix in
		ram) fixed_ops[$fix]=$(reads "$ram" 0 "$secs"); what="the DB on a RAM disk" ;;
		*) fixed_ops[$fix]=$(reads "$db" "$fix" "$secs"); what="$((1 << fix)) shards" ;;
	esac
	echo "1 shard: ${base_ops[$fix]} ops/s, then $what: ${fixed_ops[$fix]} ops/s"
done

echo "== holdup causal run --progress syscall:write ($causal_secs s)"
causal_ops=$(reads "$db" 0 "$causal_secs" "$holdup" causal run --progress syscall:write -o "$work/rdb.coz" --)
grep '^holdup' "$work/stderr" || true
echo "== the same with every speedup 0% (60 s)"
zero_ops=$(reads "$db" 0 60 "$holdup" causal run --speedup 0 --progress syscall:write -o "$work/zero.coz" --)
after=$(reads "$db" 0 "$secs")
echo "plain, right after: $after ops/s"
# Plain: the runs just before and just after the profiled ones.
plain=$(awk -v a="${base_ops[ram]}" -v b="$after" 'BEGIN { print (a + b) / 2 }')
[ -z "${KEEP:-}" ] || { mkdir -p "$KEEP" && cp "$work/rdb.coz" "$work/zero.coz" "$KEEP/"; }

"$holdup" causal report -i "$work/rdb.coz" >"$work/report.txt"
"$holdup" causal report --json -i "$work/rdb.coz" >"$work/report.json"
echo "== holdup's top targets"
head -24 "$work/report.txt"
# target, best fitted speedup, low end of its best interval, flag
show='"\(.target)\t" + if .enough_data | not then "too few experiments (\(.experiments))" else "best \(.max_program_speedup * 1000 | round / 10)%\tsurely ≥ \(if .best_interval then (.best_interval[0] * 1000 | round / 10 | tostring) + "%" else "?" end)\t\(if .no_measurable_effect then "no measurable effect" elif .encloses_program then "encloses \(.program_share * 100 | round)% of the program" else "" end)" end'
echo "== code targets, ranked (first 8)"
jq -r "[.targets[] | select(.kind != \"subclass\" and .kind != \"process\")][:8][] | $show" "$work/report.json"
echo "== block-cache targets"
jq -r ".targets[] | select(.target | test(\"LRUCache|ShardedCache|CacheShard|port::Mutex|RetrieveBlock|GetDataBlockFromCache|LookupAndPin|MaybeReadBlockAndLoadToCache\")) | $show" "$work/report.json" | head -12
echo "== subclass:io"
jq -r "[.targets[] | select(.target == \"subclass:io\") | $show] | if length == 0 then \"no target: no blocked sample was in I/O\" else .[] end" "$work/report.json"

echo "== measured, side by side (program speedup = 1 − ops/s before ÷ after)"
pct='def pct: if . == null then "none with a measurable effect" else (. * 1000 | round / 10 | tostring) + "%" end; '
cache_best=$(jq -r "$pct"'[.targets[] | select(.enough_data and (.no_measurable_effect | not) and (.target | test("LRUCache|ShardedCache|CacheShard|port::Mutex|LookupAndPin"))) | .max_program_speedup] | max | pct' "$work/report.json")
io_best=$(jq -r "$pct"'[.targets[] | select(.target == "subclass:io") | .max_program_speedup] | max | pct' "$work/report.json")
for bits in 2 4 6; do
	echo "1 → $((1 << bits)) shards: $(speedup "${base_ops[$bits]}" "${fixed_ops[$bits]}")%   (holdup, best block-cache target: ${cache_best})"
done
echo "RAM disk: $(speedup "${base_ops[ram]}" "${fixed_ops[ram]}")%   (holdup, subclass:io: ${io_best})"
echo "throughput under causal run: $causal_ops ops/s, $(awk -v a="$causal_ops" -v b="$plain" 'BEGIN { printf "%.0f", 100 * a / b }')% of plain"
echo "throughput at 0% speedups: $zero_ops ops/s, $(awk -v a="$zero_ops" -v b="$plain" 'BEGIN { printf "%.0f", 100 * a / b }')% of plain"
# The same split inside the profiled run, where the machine's drift between
# runs takes no part: progress per real second over all its experiments
# against its 0% experiments (the delays the experiments insert, alone).
awk -F'\t' '
	{ delete f; for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] } }
	$1 == "experiment" { zero = f["speedup"] + 0 == 0; all_t += f["elapsed"]; if (zero) zero_t += f["elapsed"] }
	$1 == "throughput-point" { all_v += f["delta"]; if (zero) zero_v += f["delta"] }
	END { if (zero_t > 0 && zero_v > 0 && all_t > 0)
		printf "progress rate over all experiments: %.0f%% of its 0%% experiments'"'"' (the delays alone)\n",
			100 * (all_v / all_t) / (zero_v / zero_t) }' "$work/rdb.coz"

# fillrandom with 1 KiB values and small memtables: with 2 of them the
# writers stop while one is flushed; 16 let them go on.
write_secs=${WRITE_SECONDS:-90}
fills() {
	local buffers=$1 s=$2
	shift 2
	rm -rf "$wdb"
	"$@" db_bench --benchmarks=fillrandom,stats --threads="$threads" --value_size=1000 --num=$((100 * keys)) \
		--duration="$s" --write_buffer_size=$((4 << 20)) --max_write_buffer_number="$buffers" \
		--level0_slowdown_writes_trigger=1000 --level0_stop_writes_trigger=1000 --db="$wdb" 2>"$work/stderr" |
		awk '$1 == "fillrandom" { for (i = 1; i < NF; i++) if ($(i + 1) == "ops/sec") ops = $i }
			/^Cumulative stall/ { stall = $(NF - 1) } END { print ops, stall }'
}
echo "== fillrandom, $threads threads, write stalls: max_write_buffer_number 2 → 16, $secs s each, in pairs"
for pair in 1 2; do
	read -r slow slow_stall < <(fills 2 "$secs")
	read -r fast fast_stall < <(fills 16 "$secs")
	echo "2 buffers: $slow ops/s (stalled ${slow_stall}% of the run), then 16: $fast ops/s (${fast_stall}%): $(speedup "$slow" "$fast")%"
done
echo "== holdup causal run --progress syscall:write on 2 buffers ($write_secs s)"
fills 2 "$write_secs" "$holdup" causal run --progress syscall:write -o "$work/writes.coz" -- >/dev/null
grep '^holdup' "$work/stderr" || true
"$holdup" causal report -i "$work/writes.coz" | head -14
