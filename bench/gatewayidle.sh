#!/usr/bin/env bash
# Idle memory of nb gateway with the web chat on (the default
# configuration, the default cartridge pointed at an unused address): RSS,
# anonymous and file-backed (/proc/PID/smaps_rollup), 10 s after start,
# for each binary given (the release build of this tree if none), started
# in turn ROUNDS times. Also prints the binary's resident bytes by module
# when given an unstripped binary (bench/binsize -pid).
#
#   bench/gatewayidle.sh [ROUNDS] [NB...]
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out
mkdir -p "$out"
rounds=${1:-3}
shift || true
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/nb" ./cmd/nb
	bins=("$PWD/$out/nb")
fi
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
port=38471
for _ in $(seq "$rounds"); do
	for nb in "${bins[@]}"; do
		env -i HOME="$home" XDG_CONFIG_HOME="$home/config" XDG_DATA_HOME="$home/data" XDG_STATE_HOME="$home/state" \
			PATH="$PATH" OPENAI_API_ADDRESS=http://127.0.0.1:9 OPENAI_API_KEY=k NB_DOTENV=0 \
			"$nb" gateway --listen 127.0.0.1:$port --log-level error &
		pid=$!
		for _ in $(seq 100); do curl -sf http://127.0.0.1:$port/health >/dev/null 2>&1 && break; sleep 0.05; done
		sleep 10
		awk -v nb="$nb" '/^Rss:/ {r=$2} /^Anonymous:/ {a=$2} END {printf "%s: RSS %.1f MiB, anonymous %.1f MiB, file %.1f MiB\n", nb, r/1024, a/1024, (r-a)/1024}' /proc/$pid/smaps_rollup
		if [ -n "${BINSIZE:-}" ]; then go run ./bench/binsize -bin "$nb" -pid $pid -top "${BINSIZE}"; fi
		kill -INT $pid
		wait $pid || true
		port=$((port + 1))
	done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
