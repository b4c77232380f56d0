#!/usr/bin/env bash
# What tracing costs nb serve: the added latency of a non-streamed
# /v1/chat/completions against the instant fake provider, sequential,
# with tracing off (no OTEL_* variable) and on at 100% sampling to a
# local OTLP/HTTP sink (bench/otlpsink). Prints the figures that go in
# bench/README.md.
#
#   bench/tracing.sh            # N=5000 requests each (N and PORT can be set)
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out
mkdir -p "$out/tracing"
N=${N:-5000}
PORT=${PORT:-3049}
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/nb" ./cmd/nb
go build -o "$out/fakeprovider" ./bench/fakeprovider
go build -o "$out/openaiload" ./bench/openaiload
go build -o "$out/otlpsink" ./bench/otlpsink
carts=$out/tracing/cartridges
mkdir -p "$carts"
cp bench/cartridge.yml "$carts/bench.yml"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

"$out/fakeprovider" -chunks 1 -size 6 >"$out/tracing/fake.addr" 2>"$out/tracing/fake.log" &
pids+=($!)
"$out/otlpsink" >"$out/tracing/sink.addr" 2>"$out/tracing/sink.log" &
SINK_PID=$!
pids+=("$SINK_PID")
for _ in $(seq 50); do [ -s "$out/tracing/fake.addr" ] && [ -s "$out/tracing/sink.addr" ] && break; sleep 0.1; done
FAKE=$(head -1 "$out/tracing/fake.addr")
SINK=$(head -1 "$out/tracing/sink.addr")

run() { # NAME ENV...
	local name=$1
	shift
	env "$@" OPENAI_API_ADDRESS="$FAKE" "$out/nb" serve --listen 127.0.0.1:$PORT --log-level warn --watch 0 "$carts" >"$out/tracing/nb-$name.log" 2>&1 &
	local pid=$!
	for _ in $(seq 100); do curl -sf http://127.0.0.1:$PORT/v1/models >/dev/null 2>&1 && break; sleep 0.1; done
	echo "== tracing $name"
	"$out/openaiload" latency -url http://127.0.0.1:$PORT/v1 -direct "$FAKE/v1" -model bench -n "$N" -warmup 500
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null || true
}

for round in 1 2; do
	run off
	run on OTEL_EXPORTER_OTLP_ENDPOINT="$SINK" OTEL_TRACES_SAMPLER=always_on
done
kill -TERM "$SINK_PID"
sleep 0.2
cat "$out/tracing/sink.log"
