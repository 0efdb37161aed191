#!/usr/bin/env bash
# Builds, once per machine, what the agent's end-to-end test talks to: the
# OpenTelemetry Collector of this directory (from the Go module proxy) and a
# Python environment with the official OTLP protos, for the sink behind it.
# Both are cached outside the repository under a hash of their inputs, so a
# change of go.mod, go.sum, main.go or the protos' version builds anew.
# Prints collector=PATH and python=PATH. Exits 3, saying why, when the
# machine cannot build them (no Go 1.26 or newer, no Python venv).
# HOLDUP_OTELCOL=PATH takes a Collector built elsewhere (the same
# components: the OTLP receiver, the debug and otlp_http exporters).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${HOLDUP_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/holdup-tests}
protos=opentelemetry-proto==1.45.2 # older ones decode profiles wrong (another field layout)
mkdir -p "$cache"
# One build at a time (tests may start together); taken only to build.
locked=
lock() { [ -n "$locked" ] || { exec 9>"$cache/.otelcol.lock" && flock 9 && locked=1; }; }

key=$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-16)
collector=${HOLDUP_OTELCOL:-$cache/otelcol-$key/otelcol-test}
[ -x "$collector" ] || lock
if [ ! -x "$collector" ]; then
	go=
	for g in /usr/local/go/bin/go "$(command -v go || true)"; do
		[ -x "$g" ] || continue
		minor=$("$g" env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
		if [ -n "$minor" ] && [ "$minor" -ge 26 ]; then go=$g; break; fi
	done
	if [ -z "$go" ]; then
		echo "building the OpenTelemetry Collector needs Go 1.26 or newer (/usr/local/go/bin/go or go on PATH)" >&2
		exit 3
	fi
	echo "holdup: building the OpenTelemetry Collector for the agent's tests (a few minutes, once)" >&2
	work=$(mktemp -d "$cache/otelcol-build.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	cp "$here/go.mod" "$here/go.sum" "$here/main.go" "$work/"
	(cd "$work" && GOFLAGS="-mod=readonly -buildvcs=false" nice -n 19 "$go" build -trimpath -ldflags='-s -w' -o otelcol-test .) >&2
	mkdir -p "$(dirname "$collector")"
	mv "$work/otelcol-test" "$collector"
fi

venv="$cache/otlp-python-$(echo "$protos" | sha256sum | cut -c1-16)"
probe='from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2'
"$venv/bin/python" -c "$probe" 2>/dev/null || lock
if ! "$venv/bin/python" -c "$probe" 2>/dev/null; then
	rm -rf "$venv"
	if ! python3 -m venv "$venv" >&2 || ! "$venv/bin/pip" install -q "$protos" >&2; then
		rm -rf "$venv"
		echo "could not make a Python environment with $protos (python3 -m venv, pip)" >&2
		exit 3
	fi
fi
echo "collector=$collector"
echo "python=$venv/bin/python"
