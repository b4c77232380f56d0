#!/usr/bin/env bash
# The conversation store's cost seen from the command line (issue: the
# runtime's store interface): a cold stateless eval, and a stateful eval on
# a stored conversation of 100 exchanges, for this tree's nb and for
# another commit's (default main), side by side in one hyperfine run each;
# then the same two evals inside the process (cmd/nb's BenchmarkEval and
# BenchmarkEvalStateful, this tree's benchmark file run in both trees),
# alternating the trees. Needs hyperfine (Debian package hyperfine).
#
#   bench/store.sh [REV]
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-main}
out=bench/out
mkdir -p "$out"
command -v hyperfine >/dev/null || { echo "bench: install hyperfine (apt-get install hyperfine)" >&2; exit 1; }

CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/nb" ./cmd/nb
src=$(mktemp -d)
git archive "$rev" | tar -x -C "$src"
(cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o nb ./cmd/nb)
mv "$src/nb" "$out/nb-base"
cp cmd/nb/bench_test.go "$src/cmd/nb/bench_test.go"
trap 'rm -rf "$src"' EXIT
go build -o "$out/fakeprovider" ./bench/fakeprovider

"$out/fakeprovider" -chunks 1 -size 6 >"$out/fake.addr" &
fake_pid=$!
trap 'kill $fake_pid 2>/dev/null || true; rm -rf "$src"' EXIT
for _ in $(seq 50); do [ -s "$out/fake.addr" ] && break; sleep 0.1; done
OPENAI_API_ADDRESS=$(head -1 "$out/fake.addr")
export OPENAI_API_ADDRESS

echo "== cold stateless eval: $rev vs this tree"
hyperfine -N --warmup 10 --runs 200 --export-json "$out/store-cold.json" \
	-n "$rev" "$out/nb-base bench/cartridge.yml - eval hi" \
	-n "this tree" "$out/nb bench/cartridge.yml - eval hi"

echo "== stateful eval on a stored conversation of 100 exchanges (written by $rev; each run starts from a copy)"
seed="$out/store-seed"
rm -rf "$seed"
for i in $(seq 100); do
	NANO_BOTS_STATE_PATH="$seed" "$out/nb-base" bench/cartridge.yml K eval "question $i" >/dev/null
done
hyperfine -N --warmup 5 --runs 100 --export-json "$out/store-stateful.json" \
	--prepare "rm -rf $out/state-run && cp -r $seed $out/state-run" \
	-n "$rev" "env NANO_BOTS_STATE_PATH=$out/state-run $out/nb-base bench/cartridge.yml K eval hi" \
	-n "this tree" "env NANO_BOTS_STATE_PATH=$out/state-run $out/nb bench/cartridge.yml K eval hi"
for f in "$out/store-cold.json" "$out/store-stateful.json"; do
	python3 - "$f" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print(f"{sys.argv[1].split('/')[-1]} {r['command'][:9]:9}: median {r['median'] * 1000:.1f} ms, min {r['min'] * 1000:.1f} ms, user+system {(r['user'] + r['system']) * 1000:.1f} ms")
PY
done

echo "== in process: go test ./cmd/nb -run '^\$' -bench 'Eval' -benchtime 30x, $rev and this tree alternating"
for round in 1 2 3; do
	(cd "$src" && go test ./cmd/nb -run '^$' -bench 'Eval' -benchtime 30x) | grep ^Benchmark | sed "s/^/$rev      /"
	go test ./cmd/nb -run '^$' -bench 'Eval' -benchtime 30x | grep ^Benchmark | sed "s/^/this tree /"
done
