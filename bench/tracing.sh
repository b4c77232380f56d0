#!/usr/bin/env bash
# What tracing costs nb serve: the added latency of a non-streamed
# /v1/chat/completions against the instant fake provider, sequential,
# with tracing off (no OTEL_* variable) and on at 100% sampling to a
# local OTLP/HTTP sink (bench/otlpsink). Prints the figures that go in
# bench/README.md. Last, both servers run at once and each request to
# one alternates with a request to the other: the paired difference
# (on − off, measured in both orders) is what a loaded machine's drift
# spoils least.
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

start() { # NAME PORT ENV...: starts nb serve, waits until it answers
	local name=$1 port=$2
	shift 2
	env "$@" OPENAI_API_ADDRESS="$FAKE" "$out/nb" serve --listen 127.0.0.1:$port --log-level warn --watch 0 "$carts" >"$out/tracing/nb-$name.log" 2>&1 &
	started=$!
	pids+=("$started")
	for _ in $(seq 100); do curl -sf http://127.0.0.1:$port/v1/models >/dev/null 2>&1 && break; sleep 0.1; done
}

stopnb() { kill -TERM "$1"; wait "$1" 2>/dev/null || true; }

ON=(OTEL_EXPORTER_OTLP_ENDPOINT="$SINK" OTEL_TRACES_SAMPLER=always_on)

run() { # NAME ENV...
	local name=$1
	shift
	start "$name" "$PORT" "$@"
	echo "== tracing $name"
	"$out/openaiload" latency -url http://127.0.0.1:$PORT/v1 -direct "$FAKE/v1" -model bench -n "$N" -warmup 500
	stopnb "$started"
}

for round in 1 2; do
	run off
	run on "${ON[@]}"
done
start off "$PORT"
off=$started
start on $((PORT + 1)) "${ON[@]}"
on=$started
echo "== paired: tracing on (through) against tracing off (as 'fake directly'); added = on − off"
"$out/openaiload" latency -url http://127.0.0.1:$((PORT + 1))/v1 -direct http://127.0.0.1:$PORT/v1 -model bench -n "$N" -warmup 500
echo "== paired, the other order: tracing off (through) against tracing on; added = off − on"
"$out/openaiload" latency -url http://127.0.0.1:$PORT/v1 -direct http://127.0.0.1:$((PORT + 1))/v1 -model bench -n "$N" -warmup 500
stopnb "$on"
stopnb "$off"
kill -TERM "$SINK_PID"
sleep 0.2
cat "$out/tracing/sink.log"
