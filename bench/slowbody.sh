#!/usr/bin/env bash
# What 2,000 slow request bodies from one address cost nb serve, run with
# a limit of 1,024 open files: a well-behaved client's latency on ::1 and
# how long the server holds the slow connections (bench/slowbody).
# With a git revision, the nb of that revision is measured instead (the
# "before" figures).
#
#   bench/slowbody.sh [REV] [-for 20s] [-conns 2000]
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out
mkdir -p "$out"
if [[ $# -gt 0 && $1 != -* ]]; then
	rev=$1
	shift
	tree=$(mktemp -d)
	git worktree add -q --detach "$tree" "$rev"
	(cd "$tree" && CGO_ENABLED=0 go build -trimpath -o "$OLDPWD/$out/nb-slowbody" ./cmd/nb)
	git worktree remove --force "$tree"
else
	CGO_ENABLED=0 go build -trimpath -o "$out/nb-slowbody" ./cmd/nb
fi
dir=$(mktemp -d)
printf 'meta: {name: A}\nprovider: {id: openai, credentials: {address: http://127.0.0.1:9, access-token: x}, settings: {model: m}}\n' >"$dir/a.yml"
token=slow-body-bench-token-0123456789
port=$((20000 + RANDOM % 20000))
(ulimit -n 1024 && NB_SERVE_TOKEN=$token exec "$out/nb-slowbody" serve --listen "localhost:$port" --log-level error "$dir") &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do
	curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break
	sleep 0.1
done
go run ./bench/slowbody -port "$port" -token "$token" "$@"
