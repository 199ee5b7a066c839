#!/usr/bin/env python3
"""scripts/pictures.py: the SVG pictures of docs/BENCHMARKS.md, drawn from real runs' output.

    pictures.py maps OUT.svg TITLE=LOG...     address-space maps, one column per LOG
    pictures.py tlbi OUT.svg MM_BENCH_OUTPUT  TLBI instructions against range size
    pictures.py growth OUT.svg OPS_TABLE      instructions per operation against mappings held

Python's standard library only (a fresh Debian has python3, not matplotlib). scripts/bench
--docs calls it; each input is what a program printed, unchanged:

- maps: the console log of tests/programs/maps.c (this kernel's or Linux's): its "maps: ..."
  lines and the /proc/self/maps listing between "--- /proc/self/maps" and "--- end". Address
  space is drawn bottom (0) to top (2^48); each mapping is a box whose height grows with the log
  of its size, each gap a band whose height grows with the log of its size, split at the 1 GiB
  and 4 GiB boundaries above the text and at the code window's ends, which are drawn as lines.
  So the picture is not to scale, but the order of everything and which side of a boundary it
  lies on are exact.
- tlbi: mm-bench's table "a)" (pages, mm +range, partition, mm, Linux +range, Linux, one per
  leaf; a trailing * is a whole-ASID flush, drawn as a hollow marker).
- growth: lines "growth: KERNEL OP HELD INSTRUCTIONS" (scripts/bench section 4 prints them).
"""
import math
import re
import sys
from html import escape

FONT = 'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace"'
GIB = 1 << 30


def svg(width, height, body):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" {FONT} font-size="11">\n'
            f'<rect width="{width}" height="{height}" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n")


def text(x, y, s, anchor="start", size=11, weight="normal", fill="#222"):
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" '
            f'font-weight="{weight}" fill="{fill}">{escape(s)}</text>')


# ---- address-space maps ------------------------------------------------------------------------

def parse_maps_log(path):
    """(facts, areas) from a maps-test console log: facts["text"] = (lo, hi), facts["window"] =
    (lo, hi) or None, facts["code"] = address, facts["fill"] = the fill line or None; areas =
    [(start, end, perms, name)]."""
    facts = {"window": None, "code": None, "fill": None, "text": None}
    areas, inside = [], False
    for raw in open(path, errors="replace"):
        line = raw.rstrip("\r\n")
        if line.startswith("--- /proc/self/maps"):
            inside = True
            continue
        if line.startswith("--- end"):
            inside = False
            continue
        if inside:
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+ ?(.*)$", line)
            if m:
                areas.append((int(m[1], 16), int(m[2], 16), m[3], m[4].strip()))
            continue
        if m := re.match(r"maps: text (0x[0-9a-f]+) (0x[0-9a-f]+)", line):
            facts["text"] = (int(m[1], 16), int(m[2], 16))
        elif m := re.match(r"maps: code window (0x[0-9a-f]+) (0x[0-9a-f]+)", line):
            facts["window"] = (int(m[1], 16), int(m[2], 16))
        elif m := re.match(r"maps: code page (0x[0-9a-f]+)", line):
            facts["code"] = int(m[1], 16)
        elif line.startswith("maps: fill "):
            facts["fill"] = line[len("maps: fill "):]
    if not areas:
        raise SystemExit(f"pictures.py: no /proc/self/maps listing in {path}")
    return facts, areas


def size_label(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:.0f} {unit}" if v >= 10 or v == int(v) else f"{v:.1f} {unit}"
    return f"{n} B"


def area_colour(perms, name):
    if "x" in perms:
        return "#e4572e"  # code
    if name == "[stack]":
        return "#8e6bbf"
    if name == "[heap]":
        return "#29a19c"
    if perms.startswith("rw"):
        return "#4a90d9"
    if perms.startswith("r"):
        return "#9bc53d"
    return "#d0d0d0"  # PROT_NONE


def maps_column(facts, areas, x0, title):
    """The SVG elements of one column and its height; the column is 430 px wide."""
    marks = {}  # address -> label of a boundary line
    ts = facts["text"][0] if facts["text"] else areas[0][0]
    for unit, label in ((GIB, "1 GiB"), (4 * GIB, "4 GiB")):
        marks[(ts // unit + 1) * unit] = f"{label} boundary"
    if facts["window"]:
        marks[facts["window"][0]] = "code window start"
        marks[facts["window"][1]] = "code window end"
    top = 1 << 48
    # Segments bottom-up: ("map", start, end, area) and ("gap", start, end), gaps split at marks.
    segs, at = [], 0
    for a in areas:
        if a[0] > at:
            segs.append(("gap", at, a[0]))
        segs.append(("map", a[0], a[1], a))
        at = a[1]
    if at < top:
        segs.append(("gap", at, top))
    split = []
    for s in segs:
        if s[0] == "gap":
            cuts = sorted(m for m in marks if s[1] < m < s[2])
            edges = [s[1]] + cuts + [s[2]]
            split += [("gap", lo, hi) for lo, hi in zip(edges, edges[1:])]
        else:
            split.append(s)
    heights = []
    for s in split:
        n = s[2] - s[1]
        if s[0] == "map":
            heights.append(14 + 1.6 * max(0.0, math.log2(n / 4096)))
        else:
            heights.append(4 + 1.1 * max(0.0, math.log2(max(n, 1) / 4096)))
    total = sum(heights)
    y_top = 58
    # y of an address: bottom of the drawing is address 0; linear inside each segment.
    ys, y = [], y_top + total
    for s, h in zip(split, heights):
        ys.append((s, y, y - h))
        y -= h

    def y_of(addr):
        for s, lo_y, hi_y in ys:
            if s[1] <= addr <= s[2]:
                return lo_y + (hi_y - lo_y) * (addr - s[1]) / max(1, s[2] - s[1])
        return y_top

    body = [text(x0, 18, title, size=13, weight="bold")]
    notes = []
    if facts["code"] is not None and facts["text"]:
        a, b = facts["text"][0], facts["code"]
        cross = lambda unit: "yes" if a // unit != b // unit else "no"
        notes.append(f"code page {b:#x}; text to code crosses 1 GiB: {cross(GIB)}, 4 GiB: {cross(4 * GIB)}")
    if facts["fill"]:
        notes.append("fill: " + facts["fill"])
    for i, note in enumerate(notes):
        body.append(text(x0, 32 + 11 * i, note, size=9, fill="#555"))
    bar_x, bar_w = x0 + 118, 46
    if facts["window"]:
        lo, hi = y_of(facts["window"][0]), y_of(facts["window"][1])
        body.append(f'<rect x="{bar_x - 8}" y="{hi:.1f}" width="{bar_w + 16}" height="{lo - hi:.1f}" '
                    f'fill="#fff3c4" stroke="#e0b000" stroke-dasharray="3,2"/>')
    last_label_y = 1e9
    for s, lo_y, hi_y in ys:
        if s[0] == "gap":
            body.append(f'<line x1="{bar_x + bar_w / 2}" y1="{lo_y:.1f}" x2="{bar_x + bar_w / 2}" y2="{hi_y:.1f}" '
                        f'stroke="#bbb" stroke-dasharray="1,3"/>')
            if lo_y - hi_y > 16:
                body.append(text(bar_x + bar_w + 6, (lo_y + hi_y) / 2 + 3, f"gap {size_label(s[2] - s[1])}",
                                 size=9, fill="#999"))
            continue
        start, end, perms, name = s[3]
        body.append(f'<rect x="{bar_x}" y="{hi_y:.1f}" width="{bar_w}" height="{lo_y - hi_y - 1:.1f}" '
                    f'fill="{area_colour(perms, name)}" stroke="#333" stroke-width="0.5"/>')
        label = f"{perms} {size_label(end - start)}" + (f" {name}" if name else "")
        if facts["code"] is not None and start <= facts["code"] < end:
            label += "  ← the code page"
        mid = (lo_y + hi_y) / 2 + 3
        mid = min(mid, last_label_y - 10)
        last_label_y = mid
        body.append(text(bar_x + bar_w + 6, mid, label, size=10))
        body.append(text(bar_x - 4, lo_y - 1, f"{start:#x}", anchor="end", size=8, fill="#555"))
    for addr, label in sorted(marks.items()):
        if addr >= top:
            continue
        y = y_of(addr)
        colour = "#e0b000" if "window" in label else "#c00"
        body.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + 420}" y2="{y:.1f}" stroke="{colour}" '
                    f'stroke-width="1" stroke-dasharray="6,3"/>')
        body.append(text(x0 + 420, y - 2, f"{label} {addr:#x}", anchor="end", size=9, fill=colour))
    body.append(text(bar_x - 4, y_top + total + 12, "0x0", anchor="end", size=8, fill="#555"))
    return body, y_top + total + 24


def maps(out, columns):
    body, height, x = [], 0, 10
    for col in columns:
        title, _, path = col.partition("=")
        facts, areas = parse_maps_log(path)
        elems, h = maps_column(facts, areas, x, title)
        body += elems
        height = max(height, h)
        x += 440
    legend = [("code (x)", "#e4572e"), ("rw data", "#4a90d9"), ("read-only", "#9bc53d"), ("PROT_NONE", "#d0d0d0"),
              ("[heap]", "#29a19c"), ("[stack]", "#8e6bbf")]
    lx = 10
    for name, colour in legend:
        body.append(f'<rect x="{lx}" y="{height}" width="10" height="10" fill="{colour}" stroke="#333" stroke-width="0.5"/>')
        body.append(text(lx + 14, height + 9, name, size=10))
        lx += 100
    body.append(text(lx + 10, height + 9, "not to scale: heights grow with log2(size)", size=9, fill="#777"))
    open(out, "w").write(svg(x, height + 20, body))


# ---- line plots --------------------------------------------------------------------------------

COLOURS = ["#e4572e", "#4a90d9", "#29a19c", "#8e6bbf", "#9bc53d", "#555555"]


def line_plot(out, title, xlabel, ylabel, series, xlog=True, ylog=True, width=600, legend=190):
    """One plot in its own file (see `plot`)."""
    w, h, body = plot(0, title, xlabel, ylabel, series, xlog, ylog, width, legend)
    open(out, "w").write(svg(w, h, body))


def plot(x0, title, xlabel, ylabel, series, xlog=True, ylog=True, width=600, legend=190):
    """(width, height, elements) of a plot placed at x offset `x0`. series: [(name, [(x, y,
    hollow)])]; log axes in powers of two (x; xlog=10: powers of ten) and ten (y). Later series
    are drawn with smaller markers, so points where designs agree show as rings."""
    w, h, left, right, top, bottom = width, 430, 70, legend, 34, 50
    pts = [p for _, s in series for p in s]
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    fx = (lambda v: math.log(v, 10 if xlog == 10 else 2)) if xlog else (lambda v: v)
    fy = (lambda v: math.log10(v)) if ylog else (lambda v: v)
    x_lo, x_hi = fx(min(xs)), fx(max(xs))
    y_lo, y_hi = (0.0, math.ceil(fy(max(ys)))) if ylog else (0.0, max(ys) * 1.1)
    if x_hi == x_lo:
        x_hi = x_lo + 1

    def px(v):
        return x0 + left + (fx(v) - x_lo) / (x_hi - x_lo) * (w - left - right)

    def py(v):
        return h - bottom - (fy(v) - y_lo) / ((y_hi - y_lo) or 1) * (h - top - bottom)

    L, R = x0 + left, x0 + w - right
    body = [text(L, 20, title, size=12, weight="bold"),
            f'<rect x="{L}" y="{top}" width="{w - left - right}" height="{h - top - bottom}" fill="none" stroke="#999"/>']
    # Grid and ticks.
    if ylog:
        yticks = [10 ** k for k in range(int(y_lo), int(y_hi) + 1)]
    else:
        step = 10 ** math.floor(math.log10(max(ys) or 1))
        yticks = [k * step for k in range(0, int(max(ys) * 1.1 / step) + 1)]
    for t in yticks:
        y = py(t)
        body.append(f'<line x1="{L}" y1="{y:.1f}" x2="{R}" y2="{y:.1f}" stroke="#eee"/>')
        body.append(text(L - 6, y + 4, f"{t:,.0f}", anchor="end", size=10))
    xticks = sorted(set(xs))
    if xlog == 10:
        xticks = [10 ** k for k in range(math.ceil(x_lo), int(x_hi) + 1)]
    elif xlog:
        xticks = [1 << k for k in range(int(x_lo), int(x_hi) + 1, 2 if x_hi - x_lo > 12 else 1)]
    for t in xticks:
        x = px(t)
        body.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{h - bottom}" stroke="#f2f2f2"/>')
        label = f"2^{int(math.log2(t))}" if xlog and xlog != 10 else f"{t:,}"
        body.append(text(x, h - bottom + 14, label, anchor="middle", size=10))
    body.append(text((L + R) / 2, h - 12, xlabel, anchor="middle", size=11))
    yl = x0 + 16
    body.append(f'<text x="{yl}" y="{(top + h - bottom) / 2:.1f}" transform="rotate(-90 {yl} {(top + h - bottom) / 2:.1f})" '
                f'text-anchor="middle" font-size="11">{escape(ylabel)}</text>')
    for i, (name, s) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        dash = ' stroke-dasharray="5,3"' if i % 2 else ""
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y, _ in s)
        body.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.6"{dash}/>')
        r = max(1.8, 5 - 1.2 * i)
        for x, y, hollow in s:
            fill = "white" if hollow else colour
            body.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="{r:.1f}" fill="{fill}" stroke="{colour}"/>')
        ly = top + 14 + i * 18
        body.append(f'<line x1="{R + 12}" y1="{ly - 4}" x2="{R + 36}" y2="{ly - 4}" stroke="{colour}" stroke-width="2"{dash}/>')
        body.append(text(R + 40, ly, name, size=10))
    if any(p[2] for _, s in series for p in s):
        body.append(text(R + 12, top + 14 + len(series) * 18 + 8, "hollow: whole-ASID flush", size=9, fill="#777"))
    return w, h, body


def tlbi(out, path):
    names = ["mm, FEAT_TLBIRANGE", "partition, range", "mm, no range ops", "Linux, range", "Linux, no range",
             "one per leaf"]
    series = [(n, []) for n in names]
    for line in open(path):
        w = line.split()
        if len(w) == 7 and w[0].isdigit():
            pages = int(w[0])
            for i, cell in enumerate(w[1:]):
                series[i][1].append((pages, int(cell.rstrip("*")), cell.endswith("*")))
    if not series[0][1]:
        raise SystemExit(f"pictures.py: no TLBI table in {path}")
    # Two panels: the designs with range operations (a few instructions: a linear axis), and
    # those without, against one per leaf (up to 2^21: a log axis).
    ranged = [series[0], series[1], series[3]]
    unranged = [series[2], series[4], series[5]]
    w1, h1, left = plot(0, "With FEAT_TLBIRANGE (planned TLBIs, user ASID)", "pages in the range (N, 4 KiB)",
                        "TLBI instructions", ranged, ylog=False)
    w2, h2, right = plot(w1, "Without range operations", "pages in the range (N, 4 KiB)", "TLBI instructions", unranged)
    open(out, "w").write(svg(w1 + w2, max(h1, h2), left + right))


def growth(out, path):
    data = {}
    for line in open(path):
        m = re.match(r"growth: (\S+) (\S+) (\d+) ([0-9.]+)", line)
        if m:
            data.setdefault((m[1], m[2]), []).append((int(m[3]), float(m[4]), False))
    if not data:
        raise SystemExit(f"pictures.py: no growth lines in {path}")
    labels = {"mmap1": "mmap + munmap, 1 page", "mprotect16": "mprotect R + RW, 16 pages"}
    series = [(f"{'this kernel' if k == 'ours' else 'Linux'}: {labels.get(op, op)}", sorted(v))
              for (k, op), v in sorted(data.items(), key=lambda kv: (kv[0][1], kv[0][0] != "ours"))]
    line_plot(out, "Guest instructions per operation against mappings held", "mappings held",
              "instructions per operation (kernel + user)", series, xlog=10, ylog=False, width=820, legend=290)


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] not in ("maps", "tlbi", "growth"):
        raise SystemExit(__doc__)
    cmd, out = sys.argv[1], sys.argv[2]
    if cmd == "maps":
        maps(out, sys.argv[3:])
    elif cmd == "tlbi":
        tlbi(out, sys.argv[3])
    else:
        growth(out, sys.argv[3])
