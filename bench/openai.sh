#!/usr/bin/env bash
# Benchmarks of nb serve's OpenAI-compatible API against an instant local
# fake provider (bench/fakeprovider). Needs Debian's wrk (apt-get install
# wrk). Prints the figures that go in bench/README.md.
#
#   bench/openai.sh                 # every measurement
#   bench/openai.sh latency         # or one: latency, throughput, streams
#
# Everything listens on 127.0.0.1 and stops by itself. DURATION (60s),
# CONNECTIONS (128) and STREAMS (10000) can be set in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out
mkdir -p "$out/openai"
command -v wrk >/dev/null || { echo "bench: install wrk (apt-get install wrk)" >&2; exit 1; }
what=${1:-all}
DURATION=${DURATION:-60s}
CONNECTIONS=${CONNECTIONS:-128}
STREAMS=${STREAMS:-10000}

CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/nb" ./cmd/nb
go build -o "$out/fakeprovider" ./bench/fakeprovider
go build -o "$out/openaiload" ./bench/openaiload
go build -o "$out/bareproxy" ./bench/bareproxy

carts=$out/openai/cartridges
mkdir -p "$carts"
cp bench/cartridge.yml "$carts/bench.yml"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# start_fake ARGS...: the fake provider; sets FAKE to its address.
start_fake() {
	"$out/fakeprovider" "$@" >"$out/openai/fake.addr" 2>"$out/openai/fake.log" &
	pids+=($!)
	for _ in $(seq 50); do [ -s "$out/openai/fake.addr" ] && break; sleep 0.1; done
	FAKE=$(head -1 "$out/openai/fake.addr")
}

# start_nb ENV...: nb serve on 127.0.0.1:3048 over $carts; sets NB_PID.
start_nb() {
	env "$@" OPENAI_API_ADDRESS="$FAKE" "$out/nb" serve --listen 127.0.0.1:3048 --log-level warn \
		--max-runs 20000 --max-client-conns 20000 --max-conns 20000 --watch 0 "$carts" >"$out/openai/nb.log" 2>&1 &
	NB_PID=$!
	pids+=("$NB_PID")
	for _ in $(seq 100); do curl -sf http://127.0.0.1:3048/v1/models >/dev/null 2>&1 && return; sleep 0.1; done
	echo "bench: nb serve did not start:" >&2; cat "$out/openai/nb.log" >&2; exit 1
}

stop_all() { cleanup; wait 2>/dev/null || true; pids=(); }

hwm() { awk '/VmHWM/ {printf "%.1f MB", $2 / 1024}' "/proc/$1/status"; }

if [ "$what" = all ] || [ "$what" = latency ]; then
	echo "== added latency, sequential, nb serve vs the fake directly (goal: median <= 0.3 ms)"
	start_fake -chunks 1 -size 6
	start_nb
	# the floor: bench/bareproxy relays the same requests, parsing nothing
	"$out/bareproxy" -listen 127.0.0.1:3050 -upstream "$FAKE" >"$out/openai/bareproxy.addr" 2>"$out/openai/bareproxy.log" &
	pids+=($!)
	for _ in $(seq 50); do [ -s "$out/openai/bareproxy.addr" ] && break; sleep 0.1; done
	echo "-- through the bare relay (first) and nb serve (second)"
	"$out/openaiload" latency -url http://127.0.0.1:3050/v1,http://127.0.0.1:3048/v1 -direct "$FAKE/v1" -model bench -n 5000 -warmup 500
	echo "-- streamed: the first token through the bare relay (first) and nb serve (second)"
	"$out/openaiload" latency -stream -url http://127.0.0.1:3050/v1,http://127.0.0.1:3048/v1 -direct "$FAKE/v1" -model bench -n 5000 -warmup 500
	stop_all
fi

if [ "$what" = all ] || [ "$what" = throughput ]; then
	echo "== non-streamed /v1/chat/completions for $DURATION, $CONNECTIONS connections (goal: >= 5000 requests/s, 100% success, peak RSS <= 150 MB)"
	start_fake -chunks 1 -size 6
	start_nb
	cat >"$out/openai/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body   = '{"model":"bench","messages":[{"role":"user","content":"hi"}]}'
wrk.headers["Content-Type"] = "application/json"
done = function(summary, latency, requests)
	local errors = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout
	io.write(string.format("requests %d, errors %d (non-2xx %d), %.0f requests/s, latency p50 %.2f ms p99 %.2f ms\n",
		summary.requests, errors, summary.errors.status, summary.requests / (summary.duration / 1e6),
		latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
LUA
	wrk -t2 -c"$CONNECTIONS" -d10s -s "$out/openai/post.lua" http://127.0.0.1:3048/v1/chat/completions >/dev/null # warm up
	wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency -s "$out/openai/post.lua" http://127.0.0.1:3048/v1/chat/completions | tail -1
	echo "nb serve peak RSS: $(hwm "$NB_PID")"
	stop_all
fi

if [ "$what" = all ] || [ "$what" = streams ]; then
	echo "== $STREAMS streamed answers held open at once (60 chunks, one a second, over HTTPS and HTTP/2 like a real provider)"
	start_fake -chunks 60 -size 6 -delay 1s -tls "$out/openai/fake.pem"
	start_nb SSL_CERT_FILE="$out/openai/fake.pem"
	"$out/openaiload" streams -url http://127.0.0.1:3048/v1 -model bench -n "$STREAMS" -ramp 10s \
		-want "$(printf 'xxxxxx%.0s' $(seq 60))" -pid "$NB_PID"
	stop_all
fi
