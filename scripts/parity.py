#!/usr/bin/env python3
"""Linux parity: the output of one program run, cut out of a boot log and normalised, compared
with what the same program printed on Debian's Linux kernel in the same QEMU.

    parity.py ours LOG STATUS FILTER    print the normalised output of a run on this kernel
    parity.py linux LOG FILTER          the same for a reference run on Linux (parity-init)
    parity.py compare WANT GOT          exit 1 and print a diff when they differ

A run on this kernel is booted at the default log level, at which the kernel prints nothing on
a successful run: every console line is the program's, and any line of the kernel's is a
difference; the exit status is QEMU's (the kernel ends the run with init's status). A Linux run is every
console line that is not a kernel log line ("[   1.234567] ..."), up to "parity: exit N" from
parity-init. FILTER keeps what is comparable: `all` (every line), `tests` (the "ok - NAME" /
"FAIL - NAME" lines and the "N passed, N failed" summary of the repository's test programs), or
`grep:REGEX` (the lines matching REGEX). `mask:REGEX` keeps every line but replaces the text of
each capturing group of each match of REGEX by "#": it hides what a kernel may choose
differently and still be Linux-compatible (times, dates, pids, free memory, a directory's size
or link count), never what a program computed. Steps chain with "&&", applied left to right
(`grep:^PID|ps$&&mask:^( *[0-9]+)`). The last line of the normalised output is "exit N".
"""
import difflib
import re
import sys

KLOG = re.compile(r"^\[ *[0-9]+\.[0-9]+\] ")


def keep(lines, flt):
    for step in flt.split("&&"):
        lines = keep_step(lines, step)
    return lines


def mask(line, rx):
    spans = [m.span(g) for m in rx.finditer(line) for g in range(1, rx.groups + 1) if m.group(g) is not None]
    for start, end in sorted(spans, reverse=True):
        line = line[:start] + "#" + line[end:]
    return line


def keep_step(lines, flt):
    if flt == "all":
        return lines
    if flt.startswith("mask:"):
        rx = re.compile(flt[5:])
        return [mask(l, rx) for l in lines]
    if flt == "tests":
        rx = re.compile(r"^(ok|FAIL)\b|^[0-9]+ passed, [0-9]+ failed$")
    elif flt.startswith("grep:"):
        rx = re.compile(flt[5:])
    else:
        sys.exit(f"parity.py: unknown filter {flt!r}")
    return [l for l in lines if rx.search(l)]


def read(path):
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    return [l.rstrip("\r") for l in text.split("\n")]


def ours(log, status, flt):
    lines = read(log)
    if lines and lines[-1] == "":
        lines = lines[:-1]
    return keep(lines, flt) + [f"exit {status}"]


def linux(log, flt):
    out, status = [], None
    for l in read(log):
        m = re.match(r"parity: exit ([0-9]+)$", l)
        if m:
            status = m.group(1)
            break
        if not KLOG.match(l):
            out.append(l)
    return keep(out, flt) + [f"exit {status if status is not None else 'none (no exit line)'}"]


def main(argv):
    if argv[1] == "ours":
        print("\n".join(ours(argv[2], argv[3], argv[4])))
    elif argv[1] == "linux":
        print("\n".join(linux(argv[2], argv[3])))
    elif argv[1] == "compare":
        want, got = read(argv[2]), read(argv[3])
        if want != got:
            sys.stdout.writelines(l + "\n" for l in difflib.unified_diff(want, got, "Linux", "this kernel", lineterm=""))
            return 1
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
