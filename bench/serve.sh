#!/usr/bin/env bash
# Benchmarks of nb serve (the Nano Bots API): poll latency at the editor
# plugins' rate from one client, and the server's memory with 50
# cartridges loaded. Prints the figures that go in bench/README.md.
#
#   bench/serve.sh [-duration 10s] [-rate 700] [-cartridges 50]
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out
mkdir -p "$out"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/nb" ./cmd/nb
go run ./bench/servebench -nb "$out/nb" "$@"
