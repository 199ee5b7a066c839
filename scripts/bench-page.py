#!/usr/bin/env python3
"""scripts/bench-page.py OUTPUT MAPS_DIR DOCS COMMAND SECONDS: docs/BENCHMARKS.md and
docs/images/*.svg from one run of scripts/bench (its standard output, OUTPUT, and the maps-test
logs section 6 left in MAPS_DIR). `scripts/bench --docs` calls it; nothing else writes the page.

Each picture's data, the lines of the run it is drawn from with the run's command, commit and
date, is kept next to it in docs/images/data/NAME.json, so `scripts/pictures.py redraw` draws
it again without a benchmark run and `scripts/pictures.py check` (scripts/test) proves that it
still can. Every picture is drawn before anything is written: if one cannot be drawn, this
script says which and why and exits with 1, leaving docs/ as it was.

The page is the run's output, section by section, with what each section measures and how to
read it. Prose here states no figure: every number on the page is one the run printed, so the
page cannot drift from the run (analysis of particular figures, and earlier runs, live in
docs/benchmark-notes.md). Python's standard library only.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pictures  # noqa: E402

out_path, maps_dir, docs, command, seconds = sys.argv[1:6]
lines = [l.rstrip("\n") for l in open(out_path, errors="replace")]

# The header lines (machine, qemu, commit, rust, load), then "== N. title" sections.
header = {}
sections = {}
current = None
for line in lines:
    if m := re.match(r"== (\d+)b?\. ", line):
        current = m[1] + ("b" if re.match(r"== \d+b\.", line) else "")
        sections[current] = [line]
        continue
    if current is None:
        if ":" in line:
            for part in line.split("; "):
                k, _, v = part.partition(": ")
                header[k.strip()] = v.strip()
        continue
    sections[current].append(line)


def block(key, keep=lambda l: True):
    """The lines of section `key` (without its title), fenced."""
    body = [l for l in sections.get(key, [])[1:] if l.strip() and keep(l)]
    if not body:
        return "*(this section printed nothing in this run)*\n"
    return "```\n" + "\n".join(body) + "\n```\n"


def title(key):
    s = sections.get(key, [""])[0]
    return s[3:] if s else "(not run)"


# Section 2 holds mm-bench's parts a) (TLBIs) and b) (throughput).
def mm_bench_part(letter):
    body, inside = [], False
    for l in sections.get("2", [])[1:]:
        if re.match(r"[a-z]\) ", l):
            inside = l.startswith(letter + ")")
        if inside and l.strip():
            body.append(l)
    return body


# Section 5 (the demo) is split by the demo's own "== MODE" lines: near placement, code placement,
# and the rest (TLBI locality, shootdowns, the demo's TLBI totals).
demo = {"near": [], "code": [], "smp": []}
mode, heading = None, None
for l in sections.get("5", [])[1:]:
    if l.startswith("-- "):
        heading, mode = l, None
        for part in demo.values():
            part.append(None)  # a heading goes to a part only if a line follows it there
        continue
    if m := re.match(r"== (\S+):", l):
        mode = m[1]
    part = demo["near" if mode == "near" else "code" if mode == "code-region" else "smp"]
    if part and part[-1] is None:
        part[-1] = heading
    part.append(l)


def demo_block(name):
    body = [l for l in demo[name] if l]
    return "```\n" + "\n".join(body) + "\n```\n" if body else "*(this section printed nothing in this run)*\n"


# ---- pictures ----------------------------------------------------------------------------------
# The data of each picture (what the run printed for it), every picture drawn from its data in
# memory first: a picture that cannot be drawn stops the page here, with docs/ untouched.
run = {"command": command, "commit": header.get("commit", "?"), "date": header.get("date", "?")}


def maps_log(path):
    """The lines of a maps-test console log that its picture reads (scripts/pictures.py)."""
    try:
        return [l.rstrip("\r\n") for l in open(path, errors="replace")
                if re.match(r"(maps:|--- |[0-9a-f]{8,}-[0-9a-f]{8,} )", l)]
    except OSError as e:
        return [f"(unreadable: {e})"]


pictures_data = [
    {"picture": "tlbi-per-range.svg", "title": "TLBI instructions against the number of pages, per design",
     "kind": "tlbi", "run": run, "input": mm_bench_part("a")},
    {"picture": "growth.svg", "title": "Instructions per operation against the number of mappings held",
     "kind": "growth", "run": run, "input": [l for l in sections.get("4", []) if l.startswith("growth: ")]},
]
def maps_picture(picture, title, ours, linux, ours_log, linux_log):
    """A picture of two maps columns, this kernel's and Linux's, from two maps logs in maps_dir."""
    return {"picture": picture, "title": title, "kind": "maps", "run": run,
            "columns": [{"title": ours, "lines": maps_log(os.path.join(maps_dir, ours_log))},
                        {"title": linux, "lines": maps_log(os.path.join(maps_dir, linux_log))}]}


for mode in ("plain", "fill"):
    suffix = ", fill scenario" if mode == "fill" else ""
    pictures_data.append(maps_picture(
        f"address-space-{mode}.svg", f"Address spaces of maps-test on this kernel and on Linux{suffix}",
        f"this kernel{suffix}", f"Linux 6.1{suffix}", f"ours-{mode}.log", f"linux-{mode}.log"))
# Section 14: where each JIT runtime's code goes, this kernel beside Linux (scripts/bench wrote
# the executable mappings of each run as a maps log).
RUNTIMES = (("luajit", "LuaJIT"), ("node", "node (V8)"), ("racket", "Racket CS (Chez Scheme)"),
            ("wasmtime", "wasmtime (Cranelift) in python3"))
for rt, label in RUNTIMES:
    pictures_data.append(maps_picture(
        f"runtime-{rt}.svg", f"Executable mappings of {label} on this kernel and on Linux",
        f"{label}, this kernel", f"{label}, Linux 6.1", f"runtime-{rt}-ours.log", f"runtime-{rt}-linux.log"))
drawn, failed = {}, []
for data in pictures_data:
    try:
        drawn[data["picture"]] = pictures.draw(data)
    except pictures.PictureError as e:
        failed.append(f"bench-page: {data['picture']} cannot be drawn from this run: {e}")
if failed:
    print("\n".join(failed) + "\nbench-page: docs/ left as it was", file=sys.stderr)
    sys.exit(1)
images = os.path.join(docs, "images")
os.makedirs(os.path.join(images, "data"), exist_ok=True)
for data in pictures_data:
    name = data["picture"]
    with open(os.path.join(images, "data", os.path.splitext(name)[0] + ".json"), "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    open(os.path.join(images, name), "w").write(drawn[name])
made = list(drawn)


def image(name, alt):
    return f"![{alt}](images/{name})\n"


minutes, secs = divmod(int(seconds), 60)
page = f"""# Benchmarks

<!-- Generated by `{command}` (scripts/bench-page.py): edit the generator, not this page. -->

Every figure on this page comes from **one run** of `{command}`, which ran every section of
`scripts/bench` and wrote this page and the pictures in `docs/images/` from what it printed
(scripts/bench-page.py, scripts/pictures.py). Nothing here is edited by hand; analysis of
particular figures and the measurements of earlier commits are in
[benchmark-notes.md](benchmark-notes.md).

**Run:** `{command}`, {header.get('date', '?')}, commit `{header.get('commit', '?')}`, {minutes} min {secs} s.
**Machine:** {header.get('machine', '?')}, {header.get('os', '?')}; {header.get('qemu', '?')};
{header.get('rust', '?')}, release builds; load average at the start {header.get('load average at the start', '?')}.

Guest times are measured by the kernel or the program itself with the generic counter
(CNTVCT_EL0) under QEMU's TCG emulation: they depend on the host and its load and say nothing
about real CPUs (TCG has no TLB cost model and no branch predictor), so compare figures from one
run only; no test asserts a time. Instruction and TLBI counts do not depend on the host.

## 1. Boot time and Image size

Guest time from the first instruction to the boot report (the kernel prints it), median of the
boots; the sizes of the raw Images and the `image_size` of the Image header (with .bss, stacks,
boot-time tables and the heap bootstrap).

{block("1")}
## 2. TLB invalidation: instructions per range

`cargo run --release -p mm-bench` part a): the TLBI instructions each design plans to invalidate
N pages of 4 KiB (user ASID, non-leaf forms, broadcast): this kernel with and without
FEAT_TLBIRANGE, the best partition into disjoint range operations (what Linux issues), Linux's
own algorithm (`__flush_tlb_range_op`, both with and without range operations), and one
instruction per leaf (what a crate without a planner, such as aarch64-paging, leaves to its
caller). `*` is one whole-ASID flush instead of a per-range plan. Counts of planned
instructions: the same on every machine. The planner's minimality and "never more than Linux"
are proved by tests (docs/invalidation.md).

```
{chr(10).join(mm_bench_part("a"))}
```

{image("tlbi-per-range.svg", "TLBI instructions against the number of pages, per design")}
## 3. Page-table throughput on the host, against aarch64-paging

`cargo run --release -p mm-bench` part b): map then unmap 2^20 pages of 4 KiB, one call per
page (sequential VAs, then the same 4 GiB of VAs shuffled, then one call for the whole range),
with the same frame allocator and the same descriptor bits for both crates (checked each run),
best of 5, ns per page on the host. The shuffled workload is bound by cache and TLB misses on
the last-level tables, so its ratio moves with the machine's load; instruction counts
(callgrind) are the load-independent comparison (docs/benchmark-notes.md §3).

```
{chr(10).join(mm_bench_part("b"))}
```

## 4. The same operations in the guest, with and without range TLBI

The kernel's `bench` command line (`-m 2G`), the same Image on `-cpu max` (FEAT_TLBIRANGE) and
`-cpu cortex-a72` (none): protecting and unmapping 1 GiB of touched pages in one call, a 2 MiB
promotion, and per-call times of small operations, with the TLBI instructions each issued. TCG
models no TLBI cost, so time ratios between the CPU models measure emulation; the instruction
counts carry over to hardware.

{block("3")}
## 5. Near placement against probing

**On the host** (`mm::vm::bench::bench_near`, ns per call): one `SYS_MMAP_NEAR`-style search
against probing loops, for 100 and 10,000 mappings and radii from 64 KiB to 2 GiB.

{block("2b")}
**In the guest** (the userland demo's `near` mode: a target with its neighbourhood taken except
one hole): probing with `MAP_FIXED_NOREPLACE` against one `SYS_MMAP_NEAR`, on this kernel and,
for contrast, the same binary on Linux semantics through qemu-user (which has no
`SYS_MMAP_NEAR`).

{demo_block("near")}
## 6. Code placement under the fill scenario

The userland demo's `code-region` mode (the Chez Scheme scenario: many small code objects in
256 KiB `MAP_CODE` chunks), without and with `fill` (all free address space below the next 4 GiB
boundary above the text reserved first); then the address space itself, as each kernel lists it
in `/proc/self/maps` for tests/programs/maps.c (a static glibc program: a few data mappings, a
shared page, brk heap, and one page of generated code that it calls), drawn by
scripts/pictures.py from the listings. qemu-user places `mmap(NULL)` upward from
0x55_0000_0000, not as Linux does, so its column shows what a kernel without a code window does,
not Linux's addresses; the maps pictures show Linux's own placement.

{demo_block("code")}
{image("address-space-plain.svg", "Address spaces of maps-test on this kernel and on Linux")}
{image("address-space-fill.svg", "The same under the fill scenario")}
The listings the pictures are drawn from (section 6 of the run):

{block("6")}
## 7. SMP: local against broadcast TLBIs, shootdown cost

`-smp 4`, `-cpu max`: the demo's `tlbi-locality` mode (a single-threaded process's operations,
before and after it moves to another CPU) and `shootdown` mode (the main thread changes a
region while the other threads read it), with the demo's own TLBI totals on one CPU.

{demo_block("smp")}
## 8. Boards

Not measured by `scripts/bench`: the boot times on QEMU's `raspi3b` come from the boards section
of `scripts/test` (its logs in `target/test-logs/`; docs/boards.md).

## 9. This kernel against real Linux: single system calls

Debian's arm64 Linux kernel (the package `scripts/test` already downloads; unpacked, not
installed) boots in the same QEMU (`-M virt -cpu max,pauth-impdef=on -m 2G`, 1 CPU) with an
initramfs holding only the userland program as `/init`; this kernel runs the same binary. The
program (userland mode `ops`) times each operation with CNTVCT_EL0 and reads guest instructions
retired (on Linux through `perf_event_open`, kernel counted; here from `PMEVCNTR0_EL0`, which
the kernel programs to INST_RETIRED and opens to EL0); an empty loop is measured and subtracted.
QEMU 7.2's TCG counts instructions only under `-icount`, which also derives the generic counter
from the instruction count: instructions come from one `-icount shift=0` run per kernel, times
from interleaved rounds without it. Linux has no TLBI counter (`n/a`). The growth lines are the
instructions per operation at each number of mappings held, drawn below.

{block("4", keep=lambda l: not l.startswith("growth: "))}
{image("growth.svg", "Instructions per operation against the number of mappings held")}
## 10. fork + exit + wait of a process with 64 MiB touched

`fork-test measure` (tests/programs/fork.c, static glibc): a 64 MiB private mapping, every page
written, then five rounds of `fork`, the child `_exit(0)`, `waitpid`, then one write per page in
the parent; with 2 MiB blocks (this kernel's default large faults), with `MADV_NOHUGEPAGE`
(4 KiB pages), and with 4 KiB pages that the child writes before it exits. TLBIs and faults come
from this kernel's `SYS_MM_STATS` (Linux has no such call: its columns are 0).

{block("7")}
## 11. TLBIs per range for every granule and 52-bit format

The planner's host test `tlbi_counts_per_format`: instructions to invalidate N pages with
FEAT_TLBIRANGE, this kernel's plan against Linux's formula (`__flush_tlb_range_op` with its LPA2
rule), from an aligned start and from one page past it, and without range operations; `*` is one
whole-ASID flush. The test `never_more_than_linux_in_any_format` asserts ours ≤ Linux's for all
formats and ranges.

{block("8")}
## 12. fork, copy-on-write, mremap and the JIT cycle against Linux

`memcost-test measure` (tests/programs/memcost.c) and `memfd-test measure` (tests/programs/memfd.c),
static glibc programs run unchanged on this kernel and on Debian's Linux in the same QEMU
(`-cpu max,pauth-impdef=on -m 512M`, 1 CPU; on Linux under parity-init), reading the same
counters (tests/programs/measure.h): per operation, guest time (runs without `-icount`), guest
instructions retired (runs under `-icount shift=0`; Linux's through `perf_event_open` with
`inherit`, so a child's instructions join the parent's count when it exits; this kernel's from
the CPU's `PMEVCNTR0_EL0`), and this kernel's TLBIs and faults from `SYS_MM_STATS` (Linux has no
such counter). The fork rows count every instruction the CPU retires instead, on both kernels
(Linux: `perf_event_open` on CPU 0 for every task; one CPU, so the whole guest): a task's count
misses Linux's teardown of the child's memory, which happens after the child's count has joined
the parent's. The operations: `fork` + `_exit` + `waitpid` of a process with 64 MiB touched
(4 KiB pages, then the default: this kernel's 2 MiB blocks, Linux's THP policy), the whole cycle
and two parts of it, the fork call (the parent's entry to the first return from it, the
parent's or the child's where it runs first) and the exit side (the child's `_exit` to the
parent's `waitpid` return, the child's teardown included); a copy-on-write
fault (the parent writes a page it shares with a live child: a copy; then with the child gone:
a reuse); `mremap(MREMAP_MAYMOVE | MREMAP_FIXED)` of 1 MiB and 64 MiB of touched memory to a
reserved range and back (the contents checked after the moves: the entries move, no byte is
copied); a load from each page of 64 MiB of private anonymous memory never written (4 KiB
pages), and then what those 64 MiB hold: their Rss in `/proc/self/smaps` and how far `MemFree`
fell (both kernels map a shared zero page, which Rss does not count); the W^X JIT cycle through
two views of one memfd (write two instructions, `DC CVAU` + `IC IVAU`, call) against the same
cycle with one mapping switched by `mprotect`; and `clock_gettime(CLOCK_MONOTONIC)` through
glibc (the vDSO's `__kernel_clock_gettime`) against the same call as a system call (goal: the
vDSO's at least 10x fewer instructions).

{block("10")}
## 13. Per granule: promotion TLBIs, page-table memory, host throughput

The host test `figures_per_granule` in each build of `mm` (4 KiB by default, `--features
granule-16k`, `--features granule-64k`): `cargo test -q -p mm --release --lib [--features
granule-16k|granule-64k] figures_per_granule -- --ignored --nocapture`. Three parts, for the
build's granule:
1. TLBIs of one promotion: a level-2 block's run of last-level pages (2 MiB with 4 KiB pages,
   32 MiB with 16 KiB, 512 MiB with 64 KiB), mapped as pages in a user address space, replaced
   by the block under break-before-make; counted on the model CPU of the address-space tests,
   with and without FEAT_TLBIRANGE. Linux's column is its formula for the same flush: khugepaged
   collapses a PMD with `pmdp_collapse_flush()`, which calls `flush_tlb_range(vma, addr, addr +
   HPAGE_PMD_SIZE)`, on arm64 `__flush_tlb_range(vma, start, end, PAGE_SIZE, false, ..)`: a
   stride of one page, non-leaf forms, with the limit check and `__flush_tlb_range_op` loop of
   v6.10–v6.16 (the model of section 11); KPTI, which doubles Linux's user flushes, is left out.
   The test asserts ours ≤ Linux's.
2. Page-table memory for 1 GiB mapped with pages only (`Constraints::NO_BLOCKS |
   NO_CONTIGUOUS`, from a 1 GiB-aligned VA): table frames in use
   (`PageTable::stats().tables_in_use()`, the root included) and their bytes, against the
   worked-out count (one last-level table per table's worth of pages, then one table a level up
   to the root: 4K 512 + 1 + 1 + 1, 16K 32 + 1 + 1 + 1, 64K 2 + 1 + 1); asserted.
3. Host time to map then unmap that 1 GiB, one call per page (sequential VAs) and one call for
   the whole range, the best of 9 runs for each phase, per page and per MiB, table frames from
   the heap (the table not live: no TLB). This is mm alone: aarch64-paging, the comparison of
   section 3, has only the 4 KiB granule.

Host times are informational (the machine is shared and loaded); the counts are exact.

{block("9")}
## 14. Dynamic programs against Linux

`dyncost` (tests/programs/dyncost.c, static glibc) runs unchanged on this kernel and on Debian's
Linux in the same QEMU (`-cpu max,pauth-impdef=on -m 1G`, 1 CPU; on Linux under parity-init),
with a dynamically linked glibc hello (tests/programs/hello.c, built without `-static`) and the
python3 root image's `ld-linux-aarch64.so.1` and `libc.so.6` (`scripts/rootfs python3`). Rows:
fork + `execve` of the hello + its exit + `waitpid`, per cycle; a read of one byte per page of a
`MAP_PRIVATE` read-only mapping of a file in `/tmp` whose pages are already in the page cache,
per page touched, with the pages one such fault maps (the mapping's `Rss` in `/proc/self/smaps`
after one page is read: Linux's fault-around maps the cached neighbours as well) and the faults
`getrusage` counts; and eight `python3 -c` processes that import a few modules and then block on
a pipe, in the python3 root image: each one's `Pss` and `Rss` from its own
`/proc/PID/smaps_rollup`, summed, and the used memory `/proc/meminfo` shows before the first
starts and when all are ready. Guest instructions count the whole CPU, kernel and user, over the
whole cycle (Linux: a CPU-wide `perf_event_open` counter, which also sees what Linux does after
a child's exit; this kernel: `PMEVCNTR0_EL0`), from one run under `-icount shift=0`; times and
memory from one run without it. Both kernels boot with `norandmaps`. With randomised layouts
QEMU translates the loader and libc again at every exec, because it keys its translations by
virtual address: that host time is the same work on both kernels and dwarfs theirs (Linux's
exec cycle takes 27–32 ms with them and 8–11 ms without; docs/benchmark-notes.md §10e). And each
python3's `Pss` then moves by a few pages from run to run with its stack and heap offsets, on
both kernels. The goals: instructions at most Linux's, time at most 0.5x Linux's, `Pss` at most
Linux's.

{block("11")}

## 15. Layout randomisation: entropy per base

`scripts/bench --only 12`: tests/programs/aslr.c forks and execs a static PIE 1,000 times, and
the same program linked dynamically 1,000 times, on this kernel and on Linux in the same QEMU;
each static child reports the address of its `main` (the PIE base plus a constant), of its
first anonymous `mmap` (the mmap base), of a local (the stack) and `sbrk(0)` (the heap), each
dynamic one its interpreter's base (`AT_BASE`) and the address of libc's `fopen` (libc's base
plus a constant). Per base: "bits" is the sum over the 64 bit positions of each
position's entropy (close to the number of random bits when each is uniform; a borrow or carry
across a power of two adds a little), "distinct" the different values among the 1,000 (a sample
that size cannot show more than log2(1000) ≈ 10 bits by counting), "varying" the bit positions
that took both values. The goal is ours ≥ Linux's for every base (docs/hardening.md).

{block("12")}
## 16. What the hardware protections cost

`scripts/bench --only 13`. Pointer authentication: section 14's exec row (fork + `execve` of the
dynamically linked hello + its exit + `waitpid`, mean of 20, on the small image) measured twice
on each kernel, with the CPU's pointer-authentication keys, as every process runs by default
(five random 128-bit keys drawn at each `exec`, loaded at each switch to the thread) and with
`arm64.nopauth` on the command line, which both kernels understand as "treat the CPU as one
without FEAT_PAuth". Both with `norandmaps`: with randomised layouts an exec's instruction count
moves by a few per cent from run to run, more than the keys cost; without them it repeats
exactly. MTE: a write to each page of 16 MiB of fresh private anonymous memory, per page, without
and with `PROT_MTE`, on `-M virt` (no MTE: both kernels ignore `PROT_MTE`) and on
`-M virt,mte=on`, where a tagged page's frame is zeroed with its allocation tags (this kernel
zeroes every fresh user frame's tags on a CPU with MTE, Linux only a `PROT_MTE` page's).
Instructions from runs under `-icount shift=0`, times from runs without it. docs/hardening.md
says where each feature lives.

{block("13")}
## 17. The JIT runtimes: where their code goes, beside Linux

`scripts/bench --only 14`. The JIT runtimes the code window was made for, unmodified from
Debian 12's packages (`luajit`, `nodejs`, `racket`) and PyPI's wasmtime wheel in Debian's
python3, each in its root image (`scripts/rootfs`), booted on this kernel and on Linux 6.1 in
the same QEMU (`-m 1G`, 1 CPU), running the parity cases' programs (tests/programs/rootfs/:
LuaJIT's two hot loops, node's TurboFan-compiled function with promises, timers, a worker thread
and a child process, Racket's eval and compile at run time, a module Cranelift compiles); node and
racket under `setarch -X`, the W^X way out they need (docs/address-space.md). Each program lists
its own executable mappings from `/proc/self/maps` and its CPU time. Counted per run: the code
mappings; the 512 MiB-aligned windows they occupy; how many lie outside the window of the
program's text (this kernel's code window at its default size); the anonymous ones (the JIT's
code: LuaJIT's machine-code areas, V8's code range, Chez Scheme's code segments, Cranelift's code
memory) and how many of those lie outside; and how many 1 GiB and 4 GiB boundaries lie between
the text and the farthest JIT code (the distance a direct branch cannot cover: ±128 MiB); and
the memory calls each runtime's process makes through the C library, counted by a preloaded
library (tests/programs/codecalls.c, `LD_PRELOAD` on both kernels): `mmap`s, those with a hint,
hints not honoured (LuaJIT then probes again with a new hint), `mprotect`s to `PROT_EXEC`
(wasmtime's own calls are raw system calls, which the library does not see). Linux
places libraries and JIT code top-down from its mmap base, far above a PIE's text; the
wasmtime rows count python3's window from 0 (python3 is linked at 0x400000), where this kernel
puts the vDSO beside the interpreter and Cranelift's code, a JIT's buffer, with the libraries.
The pictures show the code mappings alone, not to
scale (the dashed lines: this kernel's code window, and the first 1 GiB and 4 GiB boundaries above
the text).

The second table is the fill scenario with Racket (tests/programs/rootfs/racket-fill.rktl, under
`setarch -X` here): Racket's FFI calls `mmap` to take, as `PROT_NONE` reservations, the free
address space between the mmap area's next placement and the 4 GiB boundary below it, then
compiles 3,000 procedures, more than Chez Scheme's code segments hold, so that it maps new ones.
On Linux the new segments land past that boundary, 4 GiB boundaries and more away from the text;
this kernel puts them in the text's window (which lies below the boundary too: "in the text
window" is the column that tells them apart).

{block("14")}
{image("runtime-luajit.svg", "LuaJIT's code mappings on this kernel and on Linux")}
{image("runtime-node.svg", "node's code mappings on this kernel and on Linux")}
{image("runtime-racket.svg", "Racket CS's code mappings on this kernel and on Linux")}
{image("runtime-wasmtime.svg", "wasmtime's code mappings on this kernel and on Linux")}
## Not measured here

- TLBIs on Linux (no counter; a QEMU TCG plugin could count executed TLBI encodings, but Debian
  12 ships no `qemu-plugin.h` to build one against).
- The memory calls wasmtime spends placing its code: Cranelift makes raw system calls, which the
  preloaded counter of section 17 does not see, and Linux has no counter for them (one image
  mapped, its text made executable: `tests/traces/wasmtime.trace`).
- Real hardware (branch prediction across 4 GiB boundaries on Apple M1, DVM cost of broadcast
  TLBIs on a big machine): TCG cannot show either. The demo's `bench` mode prints the boids step
  time inside one window and across a 4 GiB boundary so the same binary can be run on an M1.
"""
open(os.path.join(docs, "BENCHMARKS.md"), "w").write(page)
print(f"bench-page: wrote {os.path.join(docs, 'BENCHMARKS.md')} and {len(made)} pictures: {', '.join(made)}",
      file=sys.stderr)
