#!/usr/bin/env bash
# Benchmarks of the nb binary (issue: the nb command). Needs hyperfine and
# GNU time (Debian packages hyperfine, time). Prints the figures that go in
# bench/README.md.
#
#   bench/run.sh            # cold eval and streaming throughput
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out
mkdir -p "$out"
command -v hyperfine >/dev/null || { echo "bench: install hyperfine (apt-get install hyperfine)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench: install GNU time (apt-get install time)" >&2; exit 1; }

CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/nb" ./cmd/nb
go build -o "$out/fakeprovider" ./bench/fakeprovider

start_fake() {
	"$out/fakeprovider" "$@" >"$out/fake.addr" &
	fake_pid=$!
	for _ in $(seq 50); do [ -s "$out/fake.addr" ] && break; sleep 0.1; done
	OPENAI_API_ADDRESS=$(head -1 "$out/fake.addr")
	export OPENAI_API_ADDRESS
}
trap '[ -n "${fake_pid:-}" ] && kill $fake_pid 2>/dev/null || true' EXIT

echo "== cold eval against an instant local provider (goal: median <= 10 ms, peak RSS <= 25 MB)"
start_fake -chunks 1 -size 6
hyperfine -N --warmup 10 --runs 200 --export-json "$out/cold.json" \
	"$out/nb bench/cartridge.yml - eval hi"
python3 - "$out/cold.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print(f"median {r['median'] * 1000:.1f} ms (min {r['min'] * 1000:.1f} ms)")
PY
rss=0
for _ in $(seq 20); do
	r=$(/usr/bin/time -f %M "$out/nb" bench/cartridge.yml - eval hi 2>&1 >/dev/null | tail -1)
	[ "$r" -gt "$rss" ] && rss=$r
done
echo "peak RSS over 20 runs: $((rss / 1024)) MB ($rss KB)"
kill $fake_pid; wait $fake_pid 2>/dev/null || true

echo "== 100,000 streamed chunks of 1 KiB to /dev/null (goal: >= 100 MB/s)"
start_fake -chunks 100000 -size 1024
# hyperfine sends the command's output to /dev/null.
hyperfine -N --warmup 1 --runs 5 --export-json "$out/stream.json" \
	"$out/nb bench/cartridge.yml - eval hi"
python3 - "$out/stream.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
mb = 100000 * 1024 / 1e6
print(f"median {r['median']:.3f} s -> {mb / r['median']:.0f} MB/s of answer text ({mb:.1f} MB in 100,000 chunks)")
PY

echo "== baseline: a Go hello world on this machine (process start alone)"
hello=$(mktemp -d)
cat >"$hello/hello.go" <<'GO'
package main

import "fmt"

func main() { fmt.Println("hello") }
GO
(cd "$hello" && CGO_ENABLED=0 GOFLAGS= go build -o hello hello.go)
mv "$hello/hello" "$out/hello" && rm -rf "$hello"
hyperfine -N --warmup 10 --runs 200 "$out/hello" "$out/nb version"
