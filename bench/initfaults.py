#!/usr/bin/env python3
"""Page faults of one nb command, by the package whose initialiser was
running when each happened ("runtime start" before the first, "after
main" once main.main runs), and by kind: bin (the executable's own
pages, mapped 64 KiB around each fault), heap (the Go heap and stacks),
high (the runtime's other mappings). Needs perf and an unstripped build
with the release build's layout:

  CGO_ENABLED=0 go build -trimpath -o /tmp/nb.sym ./cmd/nb
  bench/initfaults.py 30 /tmp/nb.sym bench/cartridge.yml - eval hi

A fault's package is the initialiser on its call stack, or the last
one seen before it (the runtime's stack growth runs on another stack).
"""
import collections
import subprocess
import sys

top, cmd = int(sys.argv[1]), sys.argv[2:]
data = "/tmp/initfaults.data"
subprocess.run(["perf", "record", "-q", "-e", "page-faults", "-c", "1", "-d", "-g", "-o", data] + cmd,
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
out = subprocess.run(["perf", "script", "-i", data, "-F", "addr,ip,sym"], capture_output=True, text=True).stdout
count, kinds, current = collections.Counter(), collections.defaultdict(collections.Counter), "runtime start"
for ev in out.split("\n\n"):
    lines = [l.strip() for l in ev.strip().split("\n") if l.strip()]
    if not lines:
        continue
    addr = int(lines[0].split()[0], 16)
    kind = "bin" if addr < 0x10000000 else ("high" if addr > 0x7F0000000000 else "heap")
    syms = [l.split(None, 1)[1] for l in lines[1:] if len(l.split(None, 1)) > 1]
    if "main.main" in syms:
        current = "after main"
    elif "runtime.doInit1" in syms:
        i = syms.index("runtime.doInit1")
        f = syms[i - 1] if i > 0 else "?"
        current = f.rsplit(".init", 1)[0] if ".init" in f else f
    count[current] += 1
    kinds[current][kind] += 1
print("page faults:", sum(count.values()))
for k, v in count.most_common(top):
    print(v, k, " ".join(f"{n}={c}" for n, c in sorted(kinds[k].items())))
