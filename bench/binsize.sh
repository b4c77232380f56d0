#!/usr/bin/env bash
# What each dependency costs in nb's release binary: builds nb as a release
# is built (CGO_ENABLED=0, -trimpath, -s -w) for its size, and again with
# its symbol table (same layout) for bench/binsize, which sums the symbols
# by module (or by package: bench/binsize.sh -by package -top 80).
#
#   bench/binsize.sh [binsize flags]
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out
mkdir -p "$out"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/nb" ./cmd/nb
CGO_ENABLED=0 go build -trimpath -o "$out/nb.sym" ./cmd/nb
echo "stripped release binary: $(stat -c %s "$out/nb") bytes"
go run ./bench/binsize -bin "$out/nb.sym" -pkg ./cmd/nb "$@"
