#!/usr/bin/env python3
"""scripts/pictures.py: the SVG pictures of docs/BENCHMARKS.md, drawn from real runs' output.

    pictures.py redraw    docs/images/*.svg from the data docs/images/data/*.json records
    pictures.py check     the same into a scratch directory: fails when a picture cannot be
                          drawn, has no data, or differs from the one in docs/images
                          (scripts/test's `doc-pictures` step; no benchmark runs)

Python's standard library only (a fresh Debian has python3, not matplotlib). `scripts/bench
--docs` (scripts/bench-page.py) writes each picture's data file, the lines the run printed for
it with the run's command, commit and date, and draws the picture from it; every SVG names that
run in its title, description and a caption, so a picture says which commit it shows. The kinds
of picture, each drawn from what a program printed, unchanged:

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

In a plot every series has its own marker shape and dash pattern, and where series meet their
points are drawn a few pixels apart, so one that equals another (as the planners do at most
range sizes) still shows; `plot` refuses to draw a series that would hide under another.
"""
import json
import math
import os
import re
import sys
import tempfile
from html import escape

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGES = os.path.join(ROOT, "docs", "images")
DATA = os.path.join(IMAGES, "data")


class PictureError(Exception):
    """A picture that cannot be drawn from its data."""

FONT = 'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace"'
GIB = 1 << 30


def svg(width, height, body, title, source):
    """The SVG document, its title and a description and caption naming the run it shows (the
    caption broken into lines that fit the width, at about 5.5 px a character)."""
    words, lines = source.split(" "), [""]
    for word in words:
        if lines[-1] and len(lines[-1]) + 1 + len(word) > (width - 20) / 5.5:
            lines.append("")
        lines[-1] = f"{lines[-1]} {word}".strip()
    total = height + 8 + 12 * len(lines)
    caption = [text(10, height + 12 * (k + 1), line, size=9, fill="#777") for k, line in enumerate(lines)]
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total}" '
            f'viewBox="0 0 {width} {total}" {FONT} font-size="11">\n'
            f'<title>{escape(title)}</title>\n<desc>{escape(source)}</desc>\n'
            f'<rect width="{width}" height="{total}" fill="white"/>\n' + "\n".join(body + caption) + "\n</svg>\n")


def text(x, y, s, anchor="start", size=11, weight="normal", fill="#222"):
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" '
            f'font-weight="{weight}" fill="{fill}">{escape(s)}</text>')


# ---- address-space maps ------------------------------------------------------------------------

def parse_maps_log(lines, name):
    """(facts, areas) from the lines of a maps-test console log: facts["text"] = (lo, hi),
    facts["window"] = (lo, hi) or None, facts["code"] = address, facts["fill"] = the fill line or
    None; areas = [(start, end, perms, name)]."""
    facts = {"window": None, "code": None, "fill": None, "text": None}
    areas, inside = [], False
    for raw in lines:
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
        raise PictureError(f"no /proc/self/maps listing in {name}")
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


def maps(columns):
    """(width, height, elements): one column per (title, log lines)."""
    body, height, x = [], 0, 10
    if not columns:
        raise PictureError("no maps-test log")
    for title, lines in columns:
        facts, areas = parse_maps_log(lines, title)
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
    return x, height + 20, body


# ---- line plots --------------------------------------------------------------------------------

COLOURS = ["#e4572e", "#4a90d9", "#29a19c", "#8e6bbf", "#9bc53d", "#555555"]
MARKERS = ["circle", "square", "triangle", "diamond", "triangle-down", "cross"]
DASHES = ["", "7,3", "2,2", "9,3,2,3", "1,3", "4,4"]
SPREAD = 4.0  # pixels between series at one value, so that equal series stay visible


def marker(shape, x, y, r, fill, stroke):
    """One point of a series: each series its own shape, so coinciding points show both."""
    common = f'fill="{fill}" stroke="{stroke}" stroke-width="1.2"'
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" {common}/>'
    if shape == "square":
        return f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}" {common}/>'
    if shape == "cross":
        return (f'<path d="M{x - r:.1f},{y - r:.1f}L{x + r:.1f},{y + r:.1f}M{x - r:.1f},{y + r:.1f}'
                f'L{x + r:.1f},{y - r:.1f}" fill="none" stroke="{stroke}" stroke-width="1.6"/>')
    pts = {"triangle": [(0, -1.2), (1.1, 0.8), (-1.1, 0.8)],
           "triangle-down": [(0, 1.2), (1.1, -0.8), (-1.1, -0.8)],
           "diamond": [(0, -1.3), (1.3, 0), (0, 1.3), (-1.3, 0)]}[shape]
    return f'<polygon points="{" ".join(f"{x + r * a:.1f},{y + r * b:.1f}" for a, b in pts)}" {common}/>'


def plot(x0, title, xlabel, ylabel, series, xlog=True, ylog=True, width=600, legend=190):
    """(width, height, elements) of a plot placed at x offset `x0`. series: [(name, [(x, y,
    hollow)])]; log axes in powers of two (x; xlog=10: powers of ten) and ten (y). Each series
    has its own marker and dash pattern; points of several series at one value are drawn SPREAD
    pixels apart (the legend says so); a series whose drawn points all fall on another's is
    refused."""
    w, h, left, right, top, bottom = width, 430, 70, legend, 34, 50
    pts = [p for _, s in series for p in s]
    if not pts:
        raise PictureError(f"{title}: no points")
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
    # Where series meet (points within a pixel of each other), they are spread SPREAD pixels
    # apart around the value, in series order; elsewhere each point is drawn where it is.
    true = [[(px(x), py(y), hollow) for x, y, hollow in s] for _, s in series]

    def spread(i, x, y):
        meet = [k for k, other in enumerate(true) if any(abs(x - a) < 1 and abs(y - b) < 1 for a, b, _ in other)]
        return SPREAD * (meet.index(i) - (len(meet) - 1) / 2)

    drawn, spread_any = [], False
    for i, (name, s) in enumerate(series):
        colour, shape = COLOURS[i % len(COLOURS)], MARKERS[i % len(MARKERS)]
        dash = f' stroke-dasharray="{DASHES[i % len(DASHES)]}"' if DASHES[i % len(DASHES)] else ""
        points = [(x, y + spread(i, x, y), hollow) for x, y, hollow in true[i]]
        spread_any = spread_any or any(p[1] != q[1] for p, q in zip(points, true[i]))
        for j, other in drawn:
            if len(points) <= len(other) and all(any(abs(a - c) < 1 and abs(b - d) < 1 for c, d, _ in other)
                                                 for a, b, _ in points):
                raise PictureError(f"{title}: series {name!r} would hide under {series[j][0]!r}")
        drawn.append((i, points))
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in points)
        body.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.6"{dash}/>')
        r = max(2.6, 5.2 - 0.9 * i)  # later series smaller, so stacked markers nest
        for x, y, hollow in points:
            body.append(marker(shape, x, y, r, "white" if hollow else colour, colour))
        ly = top + 14 + i * 18
        body.append(f'<line x1="{R + 10}" y1="{ly - 4}" x2="{R + 38}" y2="{ly - 4}" stroke="{colour}" stroke-width="2"{dash}/>')
        body.append(marker(shape, R + 24, ly - 4, 4.2, colour, colour))
        body.append(text(R + 44, ly, name, size=10))
    notes = [f"equal values drawn {SPREAD:.0f} px apart"] if spread_any else []
    if any(p[2] for _, s in series for p in s):
        notes.insert(0, "hollow: whole-ASID flush")
    for k, note in enumerate(notes):
        body.append(text(R + 10, top + 14 + len(series) * 18 + 8 + 12 * k, note, size=9, fill="#777"))
    return w, h, body


def tlbi(lines):
    names = ["mm, FEAT_TLBIRANGE", "partition, range", "mm, no range ops", "Linux, range", "Linux, no range",
             "one per leaf"]
    series = [(n, []) for n in names]
    for line in lines:
        w = line.split()
        if len(w) == 7 and w[0].isdigit():
            pages = int(w[0])
            for i, cell in enumerate(w[1:]):
                series[i][1].append((pages, int(cell.rstrip("*")), cell.endswith("*")))
    if not series[0][1]:
        raise PictureError("no TLBI table")
    # Two panels: the designs with range operations (a few instructions: a linear axis), and
    # those without, against one per leaf (up to 2^21: a log axis).
    ranged = [series[0], series[1], series[3]]
    unranged = [series[2], series[4], series[5]]
    w1, h1, left = plot(0, "With FEAT_TLBIRANGE (planned TLBIs, user ASID)", "pages in the range (N, 4 KiB)",
                        "TLBI instructions", ranged, ylog=False)
    w2, h2, right = plot(w1, "Without range operations", "pages in the range (N, 4 KiB)", "TLBI instructions", unranged)
    return w1 + w2, max(h1, h2), left + right


def growth(lines):
    data = {}
    for line in lines:
        m = re.match(r"growth: (\S+) (\S+) (\d+) ([0-9.]+)", line)
        if m:
            data.setdefault((m[1], m[2]), []).append((int(m[3]), float(m[4]), False))
    if not data:
        raise PictureError("no growth lines")
    labels = {"mmap1": "mmap + munmap, 1 page", "mprotect16": "mprotect R + RW, 16 pages"}
    series = [(f"{'this kernel' if k == 'ours' else 'Linux'}: {labels.get(op, op)}", sorted(v))
              for (k, op), v in sorted(data.items(), key=lambda kv: (kv[0][1], kv[0][0] != "ours"))]
    return plot(0, "Guest instructions per operation against mappings held", "mappings held",
                "instructions per operation (kernel + user)", series, xlog=10, ylog=False, width=820, legend=290)


# ---- drawing from the recorded data ------------------------------------------------------------

KINDS = {"tlbi": lambda d: tlbi(d["input"]), "growth": lambda d: growth(d["input"]),
         "maps": lambda d: maps([(c["title"], c["lines"]) for c in d["columns"]])}


def draw(data):
    """The SVG text of one picture from its data (see scripts/bench-page.py); PictureError if it
    cannot be drawn."""
    try:
        kind, run, picture = data["kind"], data["run"], data["picture"]
        w, h, body = KINDS[kind](data)
    except (KeyError, TypeError, ValueError) as e:
        raise PictureError(f"malformed data: {e!r}") from e
    source = (f"drawn by scripts/pictures.py from docs/images/data/{os.path.splitext(picture)[0]}.json: "
              f"the output of `{run['command']}` at commit {run['commit']}, {run['date']}")
    return svg(w, h, body, data.get("title", picture), source)


def redraw(out_dir, check):
    """Draws every picture whose data is recorded into `out_dir`; with `check`, compares each with
    the one in docs/images and requires every picture there to have data. The problems, one per
    line (none: all drawn, and the same)."""
    problems = []
    names = sorted(f for f in os.listdir(DATA) if f.endswith(".json")) if os.path.isdir(DATA) else []
    drawn = set()
    for name in names:
        try:
            data = json.load(open(os.path.join(DATA, name)))
            picture = data["picture"]
            text_ = draw(data)
        except (OSError, ValueError, KeyError, PictureError) as e:
            problems.append(f"docs/images/data/{name}: cannot be drawn: {e}")
            continue
        drawn.add(picture)
        open(os.path.join(out_dir, picture), "w").write(text_)
        if check:
            current = os.path.join(IMAGES, picture)
            if not os.path.exists(current):
                problems.append(f"docs/images/{picture}: missing (its data is docs/images/data/{name})")
            elif open(current).read() != text_:
                problems.append(f"docs/images/{picture}: not what its data draws "
                                f"(python3 scripts/pictures.py redraw)")
    if check:
        for f in sorted(os.listdir(IMAGES)):
            if f.endswith(".svg") and f not in drawn and not any(p.startswith(f"docs/images/data/{os.path.splitext(f)[0]}")
                                                                 for p in problems):
                problems.append(f"docs/images/{f}: no recorded data (docs/images/data/*.json) to draw it from")
    return problems


if __name__ == "__main__":
    if sys.argv[1:] not in (["redraw"], ["check"]):
        raise SystemExit(__doc__)
    check = sys.argv[1] == "check"
    with tempfile.TemporaryDirectory() as tmp:
        problems = redraw(tmp if check else IMAGES, check)
    for p in problems:
        print(f"pictures: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"pictures: {'checked' if check else 'drew'} every picture of docs/images from its data", file=sys.stderr)
