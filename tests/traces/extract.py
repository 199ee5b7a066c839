#!/usr/bin/env python3
"""extract.py [--root DIR]... RAW.strace... : the memory calls of each raw trace, for mm's replay.

Reads `strace -f -v` logs (record.sh writes them) and writes, beside this script, one NAME.trace
per log (NAME.linux.strace gives NAME.trace): every mmap, munmap, mprotect, mremap, brk and
madvise in the order strace saw them complete, with the thread that made it and Linux's result;
the execve, clone and exit of every thread (which threads share an address space, when one is
replaced); and the openat and close of each descriptor that is mapped (so a mapping names its
file). An `<unfinished ...>` call and its `<... resumed>` end are one line, at the end's place.

With --root (the unpacked root file systems the programs ran in, searched in order, symbolic
links followed inside each), each execve is followed by the program headers of the executable
and of its interpreter (PT_LOAD, PT_GNU_RELRO, PT_INTERP) and the load address Linux gave each,
found from the RELRO mprotect the loader makes (`?` where none is seen). The line format is in
README.md.
"""
import argparse
import os
import re
import struct
import sys

MEMORY = {"mmap", "munmap", "mprotect", "mremap", "brk", "madvise"}
KEPT = MEMORY | {"execve", "clone", "clone3", "vfork", "fork", "openat", "close"}
LINE = re.compile(r"^(\d+) +(.*)$")
CALL = re.compile(r"^(\w+)\((.*)\) += (.*)$")
PAGE = 4096


def split_args(s):
    """strace's argument list, split at the commas outside quotes and brackets."""
    out, depth, cur, quoted, i = [], 0, "", False, 0
    while i < len(s):
        c = s[i]
        if quoted:
            cur += c
            if c == "\\" and i + 1 < len(s):
                cur += s[i + 1]
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
            cur += c
        elif c in "([{":
            depth += 1
            cur += c
        elif c in ")]}":
            depth -= 1
            cur += c
        elif c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    if cur.strip():
        out.append(cur.strip())
    return out


def calls(path):
    """(tid, name, args, result) in completion order; exits as ("exit", [], status)."""
    pending = {}
    for raw in open(path, errors="replace"):
        m = LINE.match(raw.rstrip("\n"))
        if not m:
            continue
        tid, rest = int(m.group(1)), m.group(2)
        if rest.startswith("+++"):
            yield tid, "exit", [], rest.strip("+ ")
            continue
        if rest.startswith("---"):
            continue
        if rest.endswith("<unfinished ...>"):
            pending[tid] = rest[: -len("<unfinished ...>")].rstrip()
            continue
        resumed = re.match(r"<\.\.\. (\w+) resumed>(.*)$", rest)
        if resumed:
            start = pending.pop(tid, None)
            if start is None:
                continue
            rest = start + resumed.group(2)
        c = CALL.match(rest)
        if c and c.group(1) in KEPT:
            yield tid, c.group(1), split_args(c.group(2)), c.group(3).strip()


def result(r):
    """Linux's result: a hex address, a number, or `-1 ERRNO`."""
    m = re.match(r"^(-1) (E\w+)", r)
    if m:
        return f"-1 {m.group(2)}"
    m = re.match(r"^(0x[0-9a-f]+|-?\d+)", r)
    return m.group(1) if m else r.split()[0]


def addr(a):
    return "0" if a == "NULL" else a


def prot(p):
    if p == "PROT_NONE":
        return "---"
    bits = set(p.split("|"))
    s = "".join(c if f"PROT_{n}" in bits else "-" for c, n in (("r", "READ"), ("w", "WRITE"), ("x", "EXEC")))
    rest = sorted(b[5:].lower() for b in bits if b not in ("PROT_READ", "PROT_WRITE", "PROT_EXEC"))
    return s + "".join("+" + r for r in rest)


def words(flags, prefix):
    """`MAP_PRIVATE|MAP_FIXED` as `PRIVATE|FIXED`."""
    return "|".join(f[len(prefix):] if f.startswith(prefix) else f for f in flags.split("|"))


def fd_of(a):
    m = re.match(r"^(-?\d+)", a)
    return int(m.group(1)) if m else None


def path_of(a):
    m = re.match(r'^"((?:[^"\\]|\\.)*)"', a)
    return m.group(1) if m else None


# ---- ELF program headers ------------------------------------------------------------------------


def resolve(root, path, depth=0):
    """`path` inside the tree `root`, symbolic links followed inside it; None if absent."""
    if depth > 32:
        return None
    cur = root
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts):
        nxt = os.path.join(cur, part)
        if os.path.islink(nxt):
            target = os.readlink(nxt)
            rest = "/".join(parts[i + 1:])
            if target.startswith("/"):
                return resolve(root, target + "/" + rest, depth + 1)
            rel = os.path.relpath(os.path.join(cur, target), root)
            return resolve(root, "/" + rel + "/" + rest, depth + 1)
        if not os.path.lexists(nxt):
            return None
        cur = nxt
    return cur


def elf_info(file):
    """(type, interp, loads [(vaddr, memsz, prot, align)], relro (vaddr, memsz) or None)."""
    data = open(file, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    e_type = struct.unpack_from("<H", data, 16)[0]
    phoff = struct.unpack_from("<Q", data, 32)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    loads, relro, interp = [], None, None
    for i in range(phnum):
        p_type, p_flags, p_off, p_vaddr, _, p_filesz, p_memsz, p_align = struct.unpack_from(
            "<IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == 1:
            rights = "".join(c if p_flags & b else "-" for c, b in (("r", 4), ("w", 2), ("x", 1)))
            loads.append((p_vaddr, p_memsz, rights, p_align))
        elif p_type == 0x6474E552:
            relro = (p_vaddr, p_memsz)
        elif p_type == 3:
            interp = data[p_off:p_off + p_filesz].rstrip(b"\0").decode()
    return ("dyn" if e_type == 3 else "exec"), interp, loads, relro


def find_elf(roots, path):
    for root in roots:
        f = resolve(root, path)
        if f and os.path.isfile(f):
            info = elf_info(f)
            if info:
                return info
    return None


def relro_call(relro):
    """(offset, length) of the loaders' RELRO mprotect in the image: page-aligned start, end
    rounded down (glibc's `_dl_protect_relro`, musl's `reloc_all`)."""
    start = relro[0] & ~(PAGE - 1)
    end = (relro[0] + relro[1]) & ~(PAGE - 1)
    return start, end - start


def image_line(tid, role, path, info, base):
    kind, _, loads, relro = info
    segs = ",".join(f"{v:#x}+{m:#x}:{r}" for v, m, r, _ in loads)
    align = max((a for *_, a in loads), default=PAGE)
    rel = f" relro={relro[0]:#x}+{relro[1]:#x}" if relro else ""
    at = "?" if base is None else f"{base:#x}"
    return f"{tid} image {role} {path} {kind} align={align:#x} load={segs}{rel} linux={at}"


def infer_bases(epoch, images):
    """Linux's load address of each ET_DYN image: the unexplained RELRO mprotect that fits it."""
    mapped = []
    for _, name, a, r in epoch:
        if name == "mmap" and not r.startswith("-"):
            mapped.append((int(r, 16), int(a[1])))
    def inside(x):
        return any(s <= x < s + n for s, n in mapped)
    cands = [(int(a[0], 16), int(a[1])) for _, name, a, r in epoch
             if name == "mprotect" and a[2] == "PROT_READ" and r == "0" and not inside(int(a[0], 16))]
    bases, used = {}, set()
    for role, (kind, _, loads, relro) in images:
        if kind == "exec":
            bases[role] = 0
            continue
        bases[role] = None
        if not relro:
            continue
        off, length = relro_call(relro)
        align = max((al for *_, al in loads), default=PAGE) if role == "exe" else PAGE
        for i, (a, n) in enumerate(cands):
            base = a - off
            if i not in used and n == length and base % max(align, PAGE) == 0:
                bases[role] = base
                used.add(i)
                break
    return bases


# ---- the extract ------------------------------------------------------------------------------


def extract(path, roots):
    raw = list(calls(path))
    # The process (thread-group leader) of every thread, to pair descriptors with their opens.
    proc = {}
    for tid, name, a, r in raw:
        proc.setdefault(tid, tid)
        if name == "clone" and not r.startswith("-") and "CLONE_THREAD" in (a[1] if len(a) > 1 else ""):
            proc[int(result(r))] = proc[tid]
    # Descriptors that are mapped while open: their openat and close are kept.
    mapped_opens, open_at = set(), {}
    for i, (tid, name, a, r) in enumerate(raw):
        key = (proc.get(tid, tid), fd_of(a[4]) if name == "mmap" else fd_of(a[0]) if a else None)
        if name == "openat" and not r.startswith("-"):
            open_at[(proc.get(tid, tid), int(result(r)))] = i
        elif name == "close":
            open_at.pop(key, None)
        elif name == "mmap" and key in open_at:
            mapped_opens.add(open_at[key])
    kept = set()  # (process, fd) whose open was kept
    out = []
    epochs = {}  # index in out of an exec line -> (tid, path, index in raw)
    for i, (tid, name, a, r) in enumerate(raw):
        res = result(r)
        if name == "openat":
            if i in mapped_opens:
                kept.add((proc.get(tid, tid), int(res)))
                out.append(f"{tid} openat {path_of(a[1])} = {res}")
            continue
        if name == "close":
            key = (proc.get(tid, tid), fd_of(a[0]))
            if key in kept and res == "0":
                kept.discard(key)
                out.append(f"{tid} close {key[1]}")
            continue
        if name == "execve":
            if res == "0":
                out.append(f"{tid} exec {path_of(a[0])}")
                epochs[len(out) - 1] = (tid, path_of(a[0]), i)
            continue
        if name in ("clone", "clone3", "vfork", "fork"):
            if res.startswith("-"):
                continue
            flags = a[1] if len(a) > 1 else ""
            kind = ("thread" if "CLONE_THREAD" in flags else "vfork" if "CLONE_VFORK" in flags
                    else "vm" if "CLONE_VM" in flags else "fork")
            if name == "vfork":
                kind = "vfork"
            out.append(f"{tid} clone {kind} = {res}")
            continue
        if name in ("exit", "exit_group"):
            if not a:  # strace's "+++ exited" line: the thread is gone
                out.append(f"{tid} exit")
            continue
        if name == "mmap":
            out.append(f"{tid} mmap {addr(a[0])} {a[1]} {prot(a[2])} {words(a[3], 'MAP_')} {fd_of(a[4])} {a[5]} = {res}")
        elif name == "munmap":
            out.append(f"{tid} munmap {a[0]} {a[1]} = {res}")
        elif name == "mprotect":
            out.append(f"{tid} mprotect {a[0]} {a[1]} {prot(a[2])} = {res}")
        elif name == "mremap":
            extra = f" {a[4]}" if len(a) > 4 else ""
            out.append(f"{tid} mremap {a[0]} {a[1]} {a[2]} {words(a[3], 'MREMAP_')}{extra} = {res}")
        elif name == "brk":
            out.append(f"{tid} brk {addr(a[0])} = {res}")
        elif name == "madvise":
            out.append(f"{tid} madvise {a[0]} {a[1]} {words(a[2], 'MADV_')} = {res}")
    if not roots:
        return out
    # The images of each exec, after its line.
    result_lines = []
    for j, line in enumerate(out):
        result_lines.append(line)
        if j not in epochs:
            continue
        tid, exe, i = epochs[j]
        epoch = []
        for t, name, a, r in raw[i + 1:]:
            if t == tid and name == "execve" and result(r) == "0":
                break
            if t == tid:
                epoch.append((t, name, a, r))
        images = []
        info = find_elf(roots, exe)
        if info:
            images.append(("exe", info))
            if info[1]:
                interp = find_elf(roots, info[1])
                if interp:
                    images.append(("interp", interp))
        bases = infer_bases(epoch, images)
        for role, inf in images:
            p = exe if role == "exe" else info[1]
            result_lines.append(image_line(tid, role, p, inf, bases[role]))
        if not info:
            result_lines.append(f"{tid} image exe {exe} ?")
    return result_lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", action="append", default=[], help="a root file system the programs ran in")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)), help="where NAME.trace go")
    ap.add_argument("logs", nargs="+")
    args = ap.parse_args()
    for log in args.logs:
        name = os.path.basename(log).split(".")[0]
        lines = extract(log, args.root)
        target = os.path.join(args.out, name + ".trace")
        with open(target, "w") as f:
            f.write(f"# {name}: the memory calls of {os.path.basename(log)} (tests/traces/README.md)\n")
            for line in lines:
                f.write(line + "\n")
        print(f"{target}: {len(lines)} lines", file=sys.stderr)


if __name__ == "__main__":
    main()
