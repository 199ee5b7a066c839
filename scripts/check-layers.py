#!/usr/bin/env python3
"""check-layers.py: the kernel's modules form layers, and no module imports one above it.

A module is a top-level folder or file of kernel/src (`sched/`, `irq.rs`, ...): the files of one
folder may refer to each other freely (they are one module's parts). LAYERS lists the modules from
the bottom up; a module may use any module of its own layer or below. Every reference
(`crate::NAME`, and `super::` paths resolved to the top-level module they reach) from a module to
one of a higher layer must be listed in UPWARD with its file, and that file's opening comment
must say why (the check looks for the target's name in it). The check also fails on a cycle
among the modules of one layer, on a module missing from LAYERS, and on a LAYERS entry that no
longer exists.

    scripts/check-layers.py          check, print the layers; exit 1 on a violation
    scripts/check-layers.py --graph  also print every module's imports
"""
import os, re, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "kernel", "src")

# Bottom up. One line a layer; modules of a layer may use each other (but not in a cycle).
LAYERS = [
    ["arch"],                                   # the CPU: registers, vectors, MMU, user copies
    ["cpu", "symbols", "board"],                # which CPU this is; symbol names; board facts
    ["boot", "devicetree", "firmware"],         # the entry code, what the machine is, the EFI stub
    ["memory"],                                 # layout, frames, heap, kernel map, ASIDs, address spaces
    ["drivers"],                                # UARTs and interrupt controllers
    ["exit"],                                   # ending a run (semihosting, PSCI)
    ["console"],                                # printing
    ["irq", "wallclock", "random", "klog"],     # interrupts and the tick, time of day, randomness, the log
    ["vdso"],                                   # the vDSO's image and data page
    ["sched"],                                  # tasks: run queue, wait list, wake-ups
    ["fs"],                                     # files: the terminal, pipes, memfd, poll
    ["ipc"],                                    # System V IPC: the shared memory segments
    ["process"],                                # processes and threads, families, signals, exec
    ["procfs"],                                 # /proc, which lists processes
    ["syscall"],                                # the system-call table and the calls by family
    ["trap"],                                   # what an exception becomes
    ["smp", "bench", "report", "selftest"],     # bring-up and the boot-time reports
    ["ktest", "tests", "main"],                 # the test image, and the kernel's entry
]

# (from module, file, to module): the upward references that remain, each named with its reason
# at the top of the file that makes it.
UPWARD = [
    ("arch", "arch/aarch64/exception.rs", "trap"),
]


def module_of(rel):
    parts = rel.split("/")
    return parts[0][:-3] if len(parts) == 1 else parts[0]


def expand(src, i):
    """Paths of the use tree starting at src[i] (after `crate::`/`super::`)."""
    m = re.match(r"([A-Za-z_0-9]+(?:::[A-Za-z_0-9]+)*)(::\{)?", src[i:])
    if not m:
        if src[i:i + 1] == "{":
            return [[p] for p in re.findall(r"([A-Za-z_0-9]+)", src[i:src.find("}", i)])]
        return []
    head = m.group(1).split("::")
    if not m.group(2):
        return [head]
    j = i + m.end()
    depth, k = 1, j
    while k < len(src) and depth:
        depth += {"{": 1, "}": -1}.get(src[k], 0)
        k += 1
    out, cur, d = [], "", 0
    for ch in src[j:k - 1] + ",":
        if ch == "{":
            d += 1
        if ch == "}":
            d -= 1
        if ch == "," and d == 0:
            part = cur.strip()
            cur = ""
            if part:
                sub = expand(part, 0) or [[]]
                out += [head + s for s in sub]
        else:
            cur += ch
    return out


def main():
    files = {}
    for d, _, fs in os.walk(SRC):
        for f in fs:
            if f.endswith(".rs"):
                p = os.path.join(d, f)
                files[os.path.relpath(p, SRC)] = open(p).read()
    modules = {module_of(r) for r in files}
    layer_of = {m: i for i, layer in enumerate(LAYERS) for m in layer}
    problems = []
    for m in sorted(modules - set(layer_of)):
        problems.append(f"module {m} is in no layer: add it to LAYERS in scripts/check-layers.py")
    for m in sorted(set(layer_of) - modules):
        problems.append(f"LAYERS names {m}, which is not a module of kernel/src")
    edges = {}  # (from, to) -> set of files
    for rel, text in files.items():
        me = module_of(rel)
        code = re.sub(r"//[^\n]*", "", text)
        # super:: from a file resolves against its own path.
        parts = rel[:-3].split("/")
        if parts[-1] == "mod":
            parts = parts[:-1]
        for mm in re.finditer(r"\b(crate|super(?:::super)*)::", code):
            kind = mm.group(1)
            for path in expand(code, mm.end()):
                if not path:
                    continue
                if kind == "crate":
                    target = path[0]
                else:
                    ups = kind.count("super")
                    base = parts[:-ups] if ups <= len(parts) else []
                    target = (base + path)[0] if base or path else None
                if target in modules and target != me:
                    edges.setdefault((me, target), set()).add(rel)
    for (a, b), where in sorted(edges.items()):
        if a in layer_of and b in layer_of and layer_of[b] > layer_of[a]:
            for f in sorted(where):
                if (a, f, b) not in UPWARD:
                    problems.append(f"{f}: {a} (layer {layer_of[a]}) uses {b} (layer {layer_of[b]}), above it")
    for a, f, b in UPWARD:
        if f not in files:
            problems.append(f"UPWARD names {f}, which does not exist")
            continue
        doc = "\n".join(l for l in files[f].splitlines() if l.startswith("//!") or l.startswith("///"))
        if b not in doc:
            problems.append(f"{f}: its upward use of {b} is not explained in its documentation")
        if (a, b) not in edges:
            problems.append(f"UPWARD lists {f} -> {b}, which no longer exists: remove it")
    # Cycles inside a layer (across layers they are the upward references above).
    graph = {}
    for (a, b) in edges:
        graph.setdefault(a, set()).add(b)
    sys.setrecursionlimit(10000)
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if (v, w) in {(a, b) for a, _, b in UPWARD}:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    for v in sorted(modules):
        if v not in index:
            visit(v)
    for c in sccs:
        problems.append("cycle among " + ", ".join(c) + ": " + "; ".join(
            f"{a} -> {b} ({', '.join(sorted(edges[(a, b)]))})" for a in c for b in c if (a, b) in edges))
    if "--graph" in sys.argv:
        for m in sorted(modules, key=lambda m: (layer_of.get(m, 99), m)):
            print(f"{layer_of.get(m, '?'):>2} {m:<11} -> " + " ".join(sorted({b for (a, b) in edges if a == m})))
    for p in problems:
        print("check-layers: " + p)
    n = len(edges)
    print(f"check-layers: {len(modules)} modules in {len(LAYERS)} layers, {n} module-to-module imports, "
          f"{len(UPWARD)} named upward, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
