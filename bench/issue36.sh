#!/usr/bin/env bash
# Every figure of issue 36 (speed and memory) and the tracing cost of
# issue 34, for this tree beside an older build, in one run: what
# bench/README.md's "Issue 36 … on a quiet machine" tables are made of.
# Run it on a machine with nothing else running (the load average is
# printed with each part); it takes about 15 minutes.
#
#   bench/issue36.sh OLD_NB          # e.g. a release build of the last measured commit
#
# OLD_NB is built the same way as this tree's:
#   git worktree add /tmp/old COMMIT && (cd /tmp/old && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o /tmp/nb.old ./cmd/nb)
# Needs hyperfine, GNU time and perf (bench/coldstart.sh), wrk is not used.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
	echo "usage: bench/issue36.sh OLD_NB (an nb binary to compare with)" >&2
	exit 2
fi
old=$(realpath "$1")
out=bench/out
mkdir -p "$out/issue36"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/issue36/nb" ./cmd/nb
new=$PWD/$out/issue36/nb
load() { echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"; }

echo "== stripped binary"
stat -c '%n %s bytes' "$old" "$new"

echo "== gateway: starts, idle RSS, two closed-loop phases, paced, sessions touched once"
load
go build -o "$out/gatewaybench" ./bench/gatewaybench
"$out/gatewaybench" -nb "$old,$new"
load

echo "== cold eval: faults, peak RSS, CPU (bench/coldstart.sh builds this tree as bench/out/nb)"
bench/coldstart.sh 40 "$old"

echo "== cold eval: hyperfine against the bare POST"
"$out/fakeprovider" -chunks 1 -size 6 >"$out/issue36/fake.addr" &
fakepid=$!
trap 'kill $fakepid 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$out/issue36/fake.addr" ] && break; sleep 0.1; done
OPENAI_API_ADDRESS=$(head -1 "$out/issue36/fake.addr") hyperfine -N -w 10 -r 100 \
	"$out/barepost bench/cartridge.yml - eval hi" "$old bench/cartridge.yml - eval hi" "$new bench/cartridge.yml - eval hi"
kill $fakepid
load

echo "== nb serve: added latency beside the bare relay, whole and streamed"
bench/openai.sh latency
load

echo "== tracing at 100% sampling"
N=3000 bench/tracing.sh
load
