#!/usr/bin/env python3
"""scripts/check-docs.py: every link and every cited test in the documentation still resolves.

    python3 scripts/check-docs.py      (scripts/test runs it; under a second)

Checked in README.md, docs/*.md and each crate's README.md and CHANGELOG.md:

- links `[text](target)` to files of the repository: the file exists, and a `#anchor` names a
  heading of it (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens, `-N`
  for repeats). Web links (http, https, mailto) are not fetched.
- test names cited in backquotes: a backquoted snake_case word with at least three underscores
  (the repository's test names are sentences, `a_full_window_places_outside_...`) must be
  defined somewhere in the sources as a Rust `fn`, a C test function (`test_NAME` or a case of
  a C test program's table), or a `qemu_case`/`record`/`step` name in scripts/test. A word
  ending in `_` or containing `*` is a family, matched as a prefix. Names in an "Appendix"
  section (a history, which names what was since removed) and the outside names listed in
  OUTSIDE are not checked.

Prints each broken reference as FILE:LINE: problem, and exits with 1 if there is any.
"""
import os
import re
import subprocess
import sys

# Cited names that are not this repository's: Linux and UEFI functions the docs compare with.
OUTSIDE = {
    "can_change_pte_writable",  # Linux mm/mprotect.c
    "efi_exit_boot_services",  # Linux drivers/firmware/efi/libstub
    "ptep_set_access_flags",  # Linux arch/arm64/mm/fault.c
}

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tracked():
    out = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if os.path.exists(os.path.join(ROOT, p))]


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[`*_]|<[^>]+>", lambda m: "_" if m[0] == "_" else "", s)
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, result, fence = {}, set(), False
        for line in open(path, errors="replace"):
            if line.startswith("```"):
                fence = not fence
            if fence or not line.startswith("#"):
                continue
            base = slug(line.lstrip("#"))
            n = seen.get(base, 0)
            seen[base] = n + 1
            result.add(base if n == 0 else f"{base}-{n}")
        cache[path] = result
    return cache[path]


def defined_names(files):
    names = set()
    fn = re.compile(r"\bfn\s+([a-z0-9_]+)")
    c_test = re.compile(r"\b(?:static\s+)?void\s+(?:test_)?([a-z0-9_]+)\s*\(")
    c_case = re.compile(r'\{"([a-z0-9_]+)",')
    shell = re.compile(r"\b(?:qemu_case|record|step|bb)\s+\"?([a-z0-9_\-$]+)")
    for p in files:
        if not p.endswith((".rs", ".c", ".h")) and not p.startswith("scripts/"):
            continue
        try:
            text = open(os.path.join(ROOT, p), errors="replace").read()
        except (IsADirectoryError, FileNotFoundError):
            continue
        if p.endswith(".rs"):
            names.update(fn.findall(text))
        elif p.endswith((".c", ".h")):
            names.update(c_test.findall(text))
            names.update(c_case.findall(text))
        else:
            names.update(shell.findall(text))
    return names


def main():
    files = tracked()
    docs = [p for p in files if p.endswith(".md") and (p == "README.md" or p.startswith("docs/")
            or re.fullmatch(r"[^/]+/(README|CHANGELOG)\.md", p))]
    names = defined_names(files)
    problems = []
    link = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
    cited = re.compile(r"`([a-z][a-z0-9]*(?:_[a-z0-9*]+){3,}_?)`")
    for doc in docs:
        fence, history = False, False
        for n, line in enumerate(open(os.path.join(ROOT, doc), errors="replace"), 1):
            if re.match(r"#+ ", line):
                history = line.startswith("## Appendix") or (history and line.startswith("###"))
            if line.startswith("```"):
                fence = not fence
                continue
            if fence:
                continue
            for target in link.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                full = os.path.normpath(os.path.join(ROOT, os.path.dirname(doc), path)) if path else os.path.join(ROOT, doc)
                if not os.path.exists(full):
                    problems.append(f"{doc}:{n}: link to a missing file: {target}")
                elif anchor and full.endswith(".md") and anchor not in anchors(full):
                    problems.append(f"{doc}:{n}: no heading for #{anchor} in {os.path.relpath(full, ROOT)}")
            for name in [] if history else cited.findall(line):
                if name in OUTSIDE:
                    continue
                if "*" in name or name.endswith("_"):
                    prefix = name.split("*")[0]
                    if not any(d.startswith(prefix) for d in names):
                        problems.append(f"{doc}:{n}: no test starts with {prefix}")
                elif name not in names:
                    problems.append(f"{doc}:{n}: cited test `{name}` is not defined anywhere")
    for p in problems:
        print(p)
    print(f"check-docs: {len(docs)} files, {len(problems)} broken references")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
