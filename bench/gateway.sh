#!/usr/bin/env bash
# Benchmarks of nb gateway against an instant local fake model: port open
# after exec, idle memory, turns through the web chat's websocket with 100
# sessions, memory after 10,000 turns and after 10,000 more, model calls
# while idle. Prints the figures that go in bench/README.md.
#
#   bench/gateway.sh [-sessions 100] [-turns 10000] [-idle 10s] [-rate 500] [-paced 10s] [-fresh 10000]
#   go run ./bench/gatewaybench -nb OLD,NEW …   # two binaries side by side
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out
mkdir -p "$out"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/nb" ./cmd/nb
go run ./bench/gatewaybench -nb "$PWD/$out/nb" "$@"
