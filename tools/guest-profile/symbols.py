#!/usr/bin/env python3
"""Per-function guest instructions of one operation, for scripts/guest-profile.

symbols.py ELF BASE.txt RUN.txt N [TOP]: BASE and RUN are count.c's outputs for the same program
doing the operation 0 and N times; prints (RUN - BASE) / N per kernel function (the ELF's
symbols), largest first, and their sum. Booting and starting the program cancel out; what is
left is the operation (and any noise both runs do not share, such as a timer tick: the
functions it touches show as small fractions, or negative)."""
import bisect
import collections
import subprocess
import sys


def functions(elf):
    out = subprocess.run(["aarch64-linux-gnu-nm", "-n", "-C", elf], capture_output=True, text=True, check=True)
    syms = []
    for line in out.stdout.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            syms.append((int(parts[0], 16), parts[2]))
    return syms


def per_function(path, addrs, names):
    counts = collections.Counter()
    for line in open(path):
        pc, n = line.split()
        i = bisect.bisect_right(addrs, int(pc, 16)) - 1
        counts[names[i] if i >= 0 else "?"] += int(n)
    return counts


def main():
    elf, base, run, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    top = int(sys.argv[5]) if len(sys.argv) > 5 else 25
    syms = functions(elf)
    addrs, names = [a for a, _ in syms], [s for _, s in syms]
    a, b = per_function(base, addrs, names), per_function(run, addrs, names)
    diff = {k: (b[k] - a[k]) / n for k in set(a) | set(b)}
    print(f"{sum(diff.values()):10.0f}  kernel instructions per operation (all functions)")
    for name, v in sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:top]:
        if abs(v) >= 0.5:
            print(f"{v:10.1f}  {name[:140]}")


main()
