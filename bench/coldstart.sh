#!/usr/bin/env bash
# Cold start of the command line against an instant local provider:
# `nb bench/cartridge.yml - eval hi` next to bench/barepost (a Go program
# that makes the same streamed POST and nothing else), runs interleaved so
# that the machine's load falls on every command alike. For each: median
# and minimum wall clock, median CPU (user + system), minor page faults,
# peak RSS (GNU time), and, where perf works, the CPU time (task-clock) of
# a second run of each (GNU time counts CPU in 10 ms steps). Needs GNU time
# (apt-get install time); perf from linux-perf for the CPU figure.
#
#   bench/coldstart.sh [RUNS] [OTHER_NB...]   # e.g. 100 /tmp/nb.old
#
# The wall clock follows the machine's load; CPU time and page faults
# follow it much less, so they are the figures to compare on a busy machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out
mkdir -p "$out"
runs=${1:-50}
shift || true
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/nb" ./cmd/nb
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/barepost" ./bench/barepost
go build -o "$out/fakeprovider" ./bench/fakeprovider
"$out/fakeprovider" -chunks 1 -size 6 >"$out/fake.addr" &
fake=$!
trap 'kill $fake 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$out/fake.addr" ] && break; sleep 0.1; done
OPENAI_API_ADDRESS=$(head -1 "$out/fake.addr")
export OPENAI_API_ADDRESS
cmds=("$out/barepost" "$out/nb" "$@")
log=$out/coldstart.tsv
: >"$log"
for c in "${cmds[@]}"; do "$c" bench/cartridge.yml - eval hi >/dev/null; done # warm the page cache
for _ in $(seq "$runs"); do
	for c in "${cmds[@]}"; do
		/usr/bin/time -o "$out/time.txt" -f '%e %U %S %R %M' "$c" bench/cartridge.yml - eval hi >/dev/null
		cpu=-1
		if command -v perf >/dev/null; then
			perf stat -x, -e task-clock -o "$out/perf.txt" "$c" bench/cartridge.yml - eval hi >/dev/null 2>&1 &&
				cpu=$(awk -F, '/task-clock/ {print $1}' "$out/perf.txt")
		fi
		echo "$c $(cat "$out/time.txt") $cpu" >>"$log"
	done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$log" <<'PY'
import sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    c, e, u, s, r, m, cpu = line.split()
    cpu = float(cpu) / 1000 if float(cpu) >= 0 else float(u) + float(s)
    rows.setdefault(c, []).append((float(e), cpu, int(r), int(m)))
base = None
for c, v in rows.items():
    wall = st.median(x[0] for x in v) * 1000
    cpu = st.median(x[1] for x in v) * 1000
    if base is None:
        base = (wall, cpu)
    print(f"{c}: wall median {wall:.1f} ms (min {min(x[0] for x in v) * 1000:.1f}, {wall / base[0]:.2f}x), "
          f"CPU median {cpu:.1f} ms ({cpu / base[1]:.2f}x), minor faults {st.median(x[2] for x in v):.0f}, "
          f"peak RSS max {max(x[3] for x in v) / 1024:.1f} MiB over {len(v)} runs")
PY
