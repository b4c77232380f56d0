#!/usr/bin/env bash
# nb serve beside Portkey's AI gateway (npm @portkey-ai/gateway, pinned in
# bench/portkey/package-lock.json) and the bare Go relay (bench/bareproxy),
# all over the same instant fake provider, in one run: issue 36's serve
# goals side by side.
#
#   bench/portkey.sh [OLD_NB]      # OLD_NB: another nb build measured beside this tree's
#   PROCS1=1 bench/portkey.sh ...  # and this tree's nb with GOMAXPROCS=1 too
#
# Figures: added latency (openaiload latency: sequential requests through
# each server in turn, then to the fake directly; the median of the paired
# differences), the first streamed token the same way, throughput with
# wrk at $CONNECTIONS connections for $DURATION ($ROUNDS rounds, the
# servers alternating) with the errors counted, and each server's peak
# RSS (VmHWM) at the end. N (2000) requests each for the latencies.
#
# Portkey is installed with `npm ci` from bench/portkey/'s lock (exact
# versions, integrity hashes) into .cache/npm/bench-portkey (ignored), once;
# node and npm come from Debian (apt-get install nodejs npm). Needs wrk.
# Everything listens on 127.0.0.1 and stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=bench/out
mkdir -p "$out/portkey"
command -v wrk >/dev/null || { echo "bench: install wrk (apt-get install wrk)" >&2; exit 1; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "bench: install node and npm (apt-get install nodejs npm)" >&2; exit 1; }
old=
if [ $# -ge 1 ]; then
	[ -x "$1" ] || { echo "usage: bench/portkey.sh [OLD_NB]" >&2; exit 2; }
	old=$(realpath "$1")
fi
N=${N:-2000}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-32}
ROUNDS=${ROUNDS:-2}
PORTKEY_PORT=${PORTKEY_PORT:-8787}

# Portkey, from the lock file, into the ignored cache.
pk=$root/.cache/npm/bench-portkey
want=$(cat bench/portkey/package.json bench/portkey/package-lock.json | sha256sum | cut -d' ' -f1)
if [ ! -d "$pk/node_modules" ] || [ "$(cat "$pk/.installed" 2>/dev/null)" != "$want" ]; then
	mkdir -p "$pk"
	rm -f "$pk/.installed"
	cp bench/portkey/package.json bench/portkey/package-lock.json "$pk/"
	(cd "$pk" && SCARF_ANALYTICS=false DO_NOT_TRACK=1 npm ci --no-audit --no-fund --loglevel=error)
	echo "$want" >"$pk/.installed"
fi

CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/nb" ./cmd/nb
go build -o "$out/fakeprovider" ./bench/fakeprovider
go build -o "$out/openaiload" ./bench/openaiload
go build -o "$out/bareproxy" ./bench/bareproxy
carts=$out/portkey/cartridges
mkdir -p "$carts"
cp bench/cartridge.yml "$carts/bench.yml"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
load() { echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"; }
wait_up() { # URL NAME LOG
	for _ in $(seq 150); do curl -sf -o /dev/null "$1" && return; sleep 0.1; done
	echo "bench: $2 did not start:" >&2; cat "$3" >&2; exit 1
}

"$out/fakeprovider" -chunks 1 -size 6 >"$out/portkey/fake.addr" 2>"$out/portkey/fake.log" &
pids+=($!)
for _ in $(seq 50); do [ -s "$out/portkey/fake.addr" ] && break; sleep 0.1; done
FAKE=$(head -1 "$out/portkey/fake.addr")

# start_nb NAME BINARY PORT: nb serve over $carts; sets NB_PID.
start_nb() {
	OPENAI_API_ADDRESS="$FAKE" GOMAXPROCS="${GOMAXPROCS:-}" "$2" serve --listen "127.0.0.1:$3" --log-level warn \
		--max-runs 20000 --max-client-conns 20000 --max-conns 20000 --watch 0 "$carts" >"$out/portkey/$1.log" 2>&1 &
	NB_PID=$!
	pids+=("$NB_PID")
	wait_up "http://127.0.0.1:$3/v1/models" "$1" "$out/portkey/$1.log"
}

names=() urls=() ports=() procs=()
"$out/bareproxy" -listen 127.0.0.1:3050 -upstream "$FAKE" >"$out/portkey/bareproxy.addr" 2>"$out/portkey/bareproxy.log" &
pids+=($!)
names+=(bare-relay) ports+=(3050) procs+=($!)
for _ in $(seq 50); do [ -s "$out/portkey/bareproxy.addr" ] && break; sleep 0.1; done
if [ -n "$old" ]; then
	start_nb nb-old "$old" 3049
	names+=(nb-old) ports+=(3049) procs+=("$NB_PID")
fi
start_nb nb-new "$root/$out/nb" 3048
names+=(nb-new) ports+=(3048) procs+=("$NB_PID")
if [ -n "${PROCS1:-}" ]; then
	# this tree's nb again, on one OS thread running Go code (GOMAXPROCS=1):
	# fewer hand-offs between threads, which this kind of VM pays dearly
	GOMAXPROCS=1 start_nb nb-new-p1 "$root/$out/nb" 3047
	names+=(nb-new-p1) ports+=(3047) procs+=("$NB_PID")
fi
(cd "$pk/node_modules/@portkey-ai/gateway" && exec node build/start-server.js --port="$PORTKEY_PORT") >"$out/portkey/portkey.log" 2>&1 &
pids+=($!)
names+=(portkey) ports+=("$PORTKEY_PORT") procs+=($!)
wait_up "http://127.0.0.1:$PORTKEY_PORT/" portkey "$out/portkey/portkey.log"
for i in "${!ports[@]}"; do urls+=("http://127.0.0.1:${ports[$i]}/v1"); done
list=$(IFS=,; echo "${urls[*]}")
echo "servers, in this order: ${names[*]}"
echo "fake provider: $FAKE"

# Portkey's headers go to every server (nb and the relay ignore them).
hdr=(-header "x-portkey-provider: openai" -header "x-portkey-custom-host: $FAKE/v1" -header "Authorization: Bearer bench")

echo "== added latency, sequential, whole answers"
load
"$out/openaiload" latency -url "$list" -direct "$FAKE/v1" -model bench -n "$N" -warmup 200 "${hdr[@]}"
echo "== first streamed token"
load
"$out/openaiload" latency -stream -url "$list" -direct "$FAKE/v1" -model bench -n "$N" -warmup 200 "${hdr[@]}"

cat >"$out/portkey/post.lua" <<LUA
wrk.method = "POST"
wrk.body   = '{"model":"bench","messages":[{"role":"user","content":"hi"}]}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer bench"
wrk.headers["x-portkey-provider"] = "openai"
wrk.headers["x-portkey-custom-host"] = "$FAKE/v1"
done = function(summary, latency, requests)
	local errors = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout
	io.write(string.format("requests %d, errors %d (non-2xx %d, timeouts %d), %.0f requests/s, latency p50 %.2f ms p99 %.2f ms\n",
		summary.requests, errors, summary.errors.status, summary.errors.timeout, summary.requests / (summary.duration / 1e6),
		latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
LUA
echo "== throughput, $CONNECTIONS connections, $DURATION, $ROUNDS rounds"
for i in "${!ports[@]}"; do # warm up
	wrk -t2 -c"$CONNECTIONS" -d2s -s "$out/portkey/post.lua" "${urls[$i]}/chat/completions" >/dev/null
done
for r in $(seq "$ROUNDS"); do
	load
	for i in "${!ports[@]}"; do
		printf '%-10s round %d: ' "${names[$i]}" "$r"
		wrk -t2 -c"$CONNECTIONS" -d"$DURATION" -s "$out/portkey/post.lua" "${urls[$i]}/chat/completions" | tail -1
	done
done

echo "== peak RSS (VmHWM) after all of the above"
for i in "${!procs[@]}"; do
	awk -v n="${names[$i]}" '/VmHWM/ {printf "%-10s %.1f MiB\n", n, $2 / 1024}' "/proc/${procs[$i]}/status"
done
load
