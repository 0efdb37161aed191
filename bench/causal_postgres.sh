#!/usr/bin/env bash
# What `holdup causal run --system` predicts for a real server: postgres
# (apt) under pgbench's TPC-B-like load, progress counted by a uprobe on the
# function that commits a transaction (no rebuild). postgres runs as its own
# user, started through runuser, so its processes take part under another
# user than the profiler's (they inherit what they share as fds).
#
# Prints pgbench's throughput without and with the profiler, and the
# profile's targets (Debian's postgres has no line tables: the targets are
# the subclasses, "a faster disk" and "more cores", and with --process the
# whole server).
# usage: bench/causal_postgres.sh [SECONDS [CLIENTS]]   (as root)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
clients=${2:-4}
. bench/common.sh
bench_setup holdup-cli holdup-causal
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$pgbin/postgres" ] || { echo "postgres is not installed (apt install postgresql)" >&2; exit 1; }
id postgres >/dev/null 2>&1 || { echo "no postgres user" >&2; exit 1; }

# A cluster of our own, on the disk, reachable by the postgres user.
pg=$(mktemp -d /var/tmp/holdup-pg-XXXXXX)
chmod 755 "$pg"
mkdir "$pg/data" "$pg/sock"
chown postgres "$pg/data" "$pg/sock"
trap 'runuser -u postgres -- "$pgbin/pg_ctl" -D "$pg/data" stop -m immediate >/dev/null 2>&1 || true; rm -rf "$pg" "$work"' EXIT
runuser -u postgres -- "$pgbin/initdb" -D "$pg/data" -A trust >/dev/null
port=5499
cat >"$work/serve.sh" <<EOF
#!/usr/bin/env bash
# Start the server, run the load, stop the server: the profiled command.
runuser -u postgres -- "$pgbin/postgres" -D "$pg/data" -k "$pg/sock" -p $port -c listen_addresses='' &
for _ in \$(seq 100); do "$pgbin/pg_isready" -q -h "$pg/sock" -p $port && break; sleep 0.1; done
runuser -u postgres -- pgbench -h "$pg/sock" -p $port -c $clients -j 2 -T "\$1" postgres 2>&1 | grep -E '^(tps|number of transactions actually)'
runuser -u postgres -- "$pgbin/pg_ctl" -D "$pg/data" stop -m fast >/dev/null
wait
EOF
chmod 755 "$work/serve.sh"

# The tables, once (scale 10: 1 M accounts).
runuser -u postgres -- "$pgbin/postgres" -D "$pg/data" -k "$pg/sock" -p $port -c listen_addresses='' >/dev/null 2>&1 &
for _ in $(seq 100); do "$pgbin/pg_isready" -q -h "$pg/sock" -p $port && break; sleep 0.1; done
runuser -u postgres -- pgbench -h "$pg/sock" -p $port -i -s 10 postgres >/dev/null 2>&1
runuser -u postgres -- "$pgbin/pg_ctl" -D "$pg/data" stop -m fast >/dev/null
wait

echo "== pgbench alone ($secs s, $clients clients)"
"$work/serve.sh" "$secs"
echo "== under holdup causal run --system"
"$holdup" causal run --system --progress "$pgbin/postgres:CommitTransactionCommand" \
	-o "$work/pg.coz" -- "$work/serve.sh" "$secs"
"$holdup" causal report -i "$work/pg.coz"
echo "== the whole server (--process postgres)"
"$holdup" causal run --system --process postgres --progress "$pgbin/postgres:CommitTransactionCommand" \
	-o "$work/pgp.coz" -- "$work/serve.sh" "$secs"
"$holdup" causal report -i "$work/pgp.coz"
