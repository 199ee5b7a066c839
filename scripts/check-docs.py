#!/usr/bin/env python3
"""scripts/check-docs.py: what the documentation cites still exists, and what it counts still adds up.

    python3 scripts/check-docs.py              (scripts/test's `doc-links` step; about a second)
    python3 scripts/check-docs.py --self-test  (the checker's own tests, on made-up lines)

Checked in README.md, docs/*.md and each crate's README.md and CHANGELOG.md (every run starts
with the self-test, so a checker that stopped catching a planted mistake fails too):

- Links `[text](target)` to files of the repository: the file exists, and a `#anchor` names a
  heading of it (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens, `-N`
  for repeats). Web links (http, https, mailto) are not fetched.
- Test names. A backquoted snake_case word with at least three underscores (the repository's
  test names are sentences, `a_full_window_places_outside_...`) must be defined in the sources:
  a Rust `fn`, a C test function (`test_NAME` or a case of a C program's table), or a
  `qemu_case`/`record`/`step` name in scripts/test. A word ending in `_` or holding `*` is a
  family, matched as a prefix. A qualified path in backquotes (`paging::guard::tests`,
  `kernel::tests::user::writing_to_its_own_text_is_a_fault`, `arch::aarch64::translation::tcr_el1`)
  must name a module or an item of that module (matched from the right, so the crate may be
  left out); one whose module is a `tests` module must name a test function (`#[test]`, a
  `proptest!` case, a `kernel_test!`).
- Source files. A cited `.rs` path (`kernel/src/boot/early_map.rs`, `boot/early_map.rs`,
  `bbm.rs`) must be a file of the repository (matched from the right); a path of another kind
  (`tests/programs/fork.c`, `scripts/bench`, `kernel/src/sched/`) is checked when its first two
  components exist here (so Linux's `mm/mmap.c` is left alone). A name cited with a file
  (`` `NAME` in `FILE` ``, `` `FILE`'s `NAME` ``, `` (`FILE`, `NAME`) ``, `FILE, NAME:` in a
  diagram) must be defined in that file (a `fn`, `const`, `static`, type, `mod` or macro; a C
  function).
- Counts the sources can give (`CLAIMS`): the rows of a named table test (`NAME` (N cases)),
  the cases of a C test program (its `tests[]` table) or of a Rust test file, mm's unit tests
  and `#[ignore]`d ones, its `cfg_attr` ignores per build, its doctests and course tests, and the
  in-kernel tests each test image runs (the `kernel_test!` registrations under
  kernel/src/tests, in the build's modules, less the `floods_` ones the runner leaves to
  `test=floods`). Counted from the sources with each build's features (the crate's `default`
  ones included, as cargo enables them, and what each feature implies), not by building.
- No history: no branch name that `git branch -a` does not know (`branch NAME`), no commit hash
  that `git cat-file -e` does not find (a hex word of 7 to 40 digits with a letter and a digit;
  outside commits cited as such are in OUTSIDE_COMMITS), and no issue number (`#28`).

Code blocks are skipped but for source paths, commit hashes and crate-rooted qualified paths.
Names in an "Appendix" section (a history, which names what was since removed) are not
checked as test names. Prints each problem as DOC:LINE: problem (naming the missing path,
item or count), and exits with 1 if there is any.
"""
import os
import re
import subprocess
import sys

# Cited names that are not this repository's: Linux and UEFI functions the docs compare with.
OUTSIDE = {
    "can_change_pte_writable",  # Linux mm/mprotect.c
    "do_huge_pmd_anonymous_page",  # Linux mm/huge_memory.c
    "do_huge_pmd_wp_page",  # Linux mm/huge_memory.c
    "efi_exit_boot_services",  # Linux drivers/firmware/efi/libstub
    "ptep_set_access_flags",  # Linux arch/arm64/mm/fault.c
}

# Words that look like source files and are not: the documentation host of Rust crates.
OUTSIDE_FILES = {"docs.rs"}

# Commits of other projects that the docs cite as such.
OUTSIDE_COMMITS = {
    "e2768b798a19",  # Linux: arm64/mm: Modify range-based tlbi to decrement scale
    "e3ba51ab24fd",  # Linux: the range-TLBI NUM mask fix
    "f7edb07ad7c6",  # Linux: the range-TLBI fix the planner's top-of-space test repeats
}

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- the repository -----------------------------------------------------------------------------

class Repo:
    """Tracked files, their directories, and git's branches and objects."""

    def __init__(self, root):
        self.root = root
        out = git(root, "ls-files")
        self.files = [p for p in out.splitlines() if os.path.isfile(os.path.join(root, p))]
        self.file_set = set(self.files)
        self.dirs = {os.path.dirname(p) for p in self.files}
        for d in list(self.dirs):
            while d:
                d = os.path.dirname(d)
                self.dirs.add(d)
        self.by_name = {}
        for p in self.files:
            self.by_name.setdefault(os.path.basename(p), []).append(p)
        self.branches = set()
        for b in git(root, "branch", "-a", "--format=%(refname:short)").split():
            self.branches.add(b)
            self.branches.add(b.split("/", 1)[-1])
        self._objects = {}

    def read(self, path):
        return open(os.path.join(self.root, path), errors="replace").read()

    def exists(self, path):
        p = path.rstrip("/")
        return p in self.file_set or p in self.dirs

    def resolve(self, cited):
        """The tracked files a cited path may mean: itself, or the files it ends."""
        p = cited.strip("/")
        if p in self.file_set:
            return [p]
        return [f for f in self.by_name.get(os.path.basename(p), []) if f.endswith("/" + p)]

    def commits_exist(self, hashes):
        todo = [h for h in hashes if h not in self._objects]
        if todo:
            out = subprocess.run(["git", "-C", self.root, "cat-file", "--batch-check"],
                                 input="".join(h + "^{commit}\n" for h in todo),
                                 capture_output=True, text=True, check=True).stdout.splitlines()
            for h, line in zip(todo, out):
                self._objects[h] = not line.endswith("missing") and " commit " in line + " "
        return {h: self._objects[h] for h in hashes}


def git(root, *args):
    return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, check=True).stdout


# ---- Rust sources -------------------------------------------------------------------------------

# Comments go; a string literal keeps its text only when it is a word or a path (feature names,
# `#[path]`s), so braces and `fn`s inside strings cannot be taken for code. Newlines stay, so
# offsets and line numbers do.
_LEXEME = re.compile(r'(?=/[/*]|b?r#*"|b?["\'])(?://[^\n]*|/\*.*?\*/|b?r(#*)".*?"\1|b?"(?:\\.|[^"\\])*"|b?\'(?:\\.|[^\\\'\n])\')', re.S)


def strip_rust(text):
    def repl(m):
        s = m[0]
        if s.startswith(("//", "/*")) or s.endswith("'"):
            return re.sub(r"[^\n]", " ", s)
        body = s[s.index('"') + 1:s.rindex('"')]
        if re.fullmatch(r"[\w\-./:]*", body):
            return s
        return '""' + re.sub(r"[^\n]", " ", s[2:])
    return _LEXEME.sub(repl, text)


def bracket_pairs(text):
    """{index of an opening bracket: index just past the bracket that closes it}."""
    pairs, stack = {}, []
    for m in re.finditer(r"[(){}\[\]]", text):
        c = m[0]
        if c in "([{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.end()
    return pairs


def cfg_true(expr, features):
    """Evaluates a `cfg` predicate; features None means every predicate holds."""
    if features is None:
        return True
    tokens = re.findall(r'\w+|"[^"]*"|[(),=]', expr)
    pos = [0]

    def peek():
        return tokens[pos[0]] if pos[0] < len(tokens) else None

    def take():
        pos[0] += 1
        return tokens[pos[0] - 1]

    def pred():
        name = take()
        if name in ("any", "all", "not"):
            take()  # (
            vals = []
            while peek() != ")":
                vals.append(pred())
                if peek() == ",":
                    take()
            take()  # )
            return any(vals) if name == "any" else all(vals) if name == "all" else not vals[0]
        if peek() == "=":
            take()
            value = take().strip('"')
            if name == "feature":
                return value in features
            if name == "target_arch":
                return value == "x86_64"
            return False
        return name in ("test", "debug_assertions", "unix")

    return pred()


_ITEM_PREFIX = re.compile(r'\s*(?:(?:pub(?:\s*\([^)]*\))?|async|unsafe|const|default|extern(?:\s*"[^"]*")?)\s+)*$')
_TOKEN = re.compile(r'(?=[#mfpkcsetu{}])(?:#!?\[|\bmod\s+(\w+)\s*([;{])|\bfn\s+(\w+)|\b(proptest|kernel_test)!\s*[({]'
                    r'|\b(?:const|static(?:\s+mut)?|struct|enum|trait|type|union)\s+(?!fn\b|unsafe\b|extern\b)(\w+)'
                    r'|\bmacro_rules!\s*(\w+)'
                    r'|\buse\s+([^;]*);|[{}])')
_CFG = re.compile(r"cfg\s*\((.*)\)", re.S)
_CFG_IGNORE = re.compile(r"cfg_attr\s*\((.*),\s*ignore\b.*\)", re.S)


class ParsedFile:
    """What one Rust file defines, read once for every build: items with their inline-module
    paths, tests and sub-modules, each with the `cfg` predicates it is compiled under (its own
    and its enclosing modules' and macro's), and a test's `#[ignore]`: `True`, or the
    predicates of the `cfg_attr`s that ignore it."""

    def __init__(self, text):
        self.items = []  # (name, inline module path, kind)
        self.tests = []  # (name, inline module path, cfgs, ignore)
        self.mods = []  # (name, inline module path, path attribute or None, cfgs)
        self.bodies = {}  # fn name -> [body text]
        self.file_cfgs = []
        self._parse(strip_rust(text))

    def _parse(self, s):
        pairs = bracket_pairs(s)
        attrs, attrs_end = [], 0
        stack = []  # (inline module name or None, cfgs) per open brace
        macro_end, macro_cfgs = -1, None
        pos = 0
        while True:
            m = _TOKEN.search(s, pos)
            if not m:
                break
            tok, start = m[0], m.start()
            pos = m.end()
            if start >= macro_end:
                macro_cfgs = None
            inline = [n for n, _ in stack if n]
            outer = [c for _, cs in stack for c in cs]
            if tok.startswith("#"):
                close = pairs.get(m.end() - 1, len(s))
                attr = s[m.end():close - 1].strip()
                if tok == "#![":
                    if (c := _CFG.fullmatch(attr)) and not stack:
                        self.file_cfgs.append(c[1])
                else:
                    if attrs and not s[attrs_end:start].strip():
                        attrs.append(attr)
                    else:
                        attrs = [attr]
                    attrs_end = close
                pos = close
                continue
            applies = bool(attrs) and _ITEM_PREFIX.match(s[attrs_end:start]) is not None
            mine = attrs if applies else []
            if tok not in ("{", "}"):
                attrs = []
            cfgs = outer + [c[1] for a in mine if (c := _CFG.fullmatch(a))]
            if tok == "{":
                stack.append((None, []))
            elif tok == "}":
                if stack:
                    stack.pop()
            elif m[1]:  # mod NAME ; or {
                path = next((p[1] for a in mine if (p := re.fullmatch(r'path\s*=\s*"([^"]*)"', a))), None)
                self.items.append((m[1], inline, "mod"))
                if m[2] == "{":
                    stack.append((m[1], cfgs[len(outer):]))
                else:
                    self.mods.append((m[1], inline, path, cfgs))
            elif m[3]:  # fn NAME
                name = m[3]
                self.items.append((name, inline, "fn"))
                body_open = s.find("{", m.end())
                semi = s.find(";", m.end())
                if body_open >= 0 and (semi < 0 or body_open < semi):
                    self.bodies.setdefault(name, []).append(s[body_open:pairs.get(body_open, len(s))])
                if macro_cfgs is not None or any(a == "test" or a.endswith("::test") for a in mine):
                    ignore = True if any(a == "ignore" or re.match(r"ignore\s*=", a) for a in mine) else \
                        [c[1] for a in mine if (c := _CFG_IGNORE.fullmatch(a))]
                    self.tests.append((name, inline, cfgs + (macro_cfgs or []), ignore))
            elif m[4]:  # proptest! { ... } or kernel_test!( ... ): every fn inside is a test
                macro_end, macro_cfgs = pairs.get(m.end() - 1, len(s)), cfgs[len(outer):]
                stack.append((None, []))
            elif m[5]:
                self.items.append((m[5], inline, "item"))
            elif m[6]:
                self.items.append((m[6], inline, "macro"))
            elif m[7] is not None:  # use ...: the names it brings in
                for name in re.findall(r"(?:\bas\s+(\w+)|(\w+)\s*(?:,|\}|$))", m[7]):
                    n = name[0] or name[1]
                    if n and n not in ("self", "super", "crate"):
                        self.items.append((n, inline, "use"))


def module_path(path, crates):
    """The crate and module path of a Rust file, from where it lies (`a/b/mod.rs` is `a::b`)."""
    for crate_dir, crate in crates:
        for sub, kind in (("src/", None), ("tests/", "test"), ("examples/", "example")):
            prefix = crate_dir + "/" + sub
            if path.startswith(prefix):
                rel = path[len(prefix):-3].split("/")
                if kind:  # integration tests and examples are crates of their own
                    return [rel[0]] + rel[1:]
                if rel[-1] in ("lib", "main", "mod"):
                    rel = rel[:-1]
                return [crate] + rel
    return None


class Sources:
    """The index of every Rust item and test of the repository, and test counts per build."""

    def __init__(self, repo):
        self.repo = repo
        self.crates = []
        for p in repo.files:
            if p.endswith("Cargo.toml") and p != "Cargo.toml":
                m = re.search(r'^\[package\][^\[]*?^name\s*=\s*"([^"]+)"', repo.read(p), re.M)
                if m:
                    self.crates.append((os.path.dirname(p), m[1].replace("-", "_")))
        self.crates.sort(key=lambda c: -len(c[0]))
        self._parsed = {}
        self._builds = {}
        self.items = {}  # name -> set of (full path tuple, file)
        self.modules = set()
        self.tests = set()  # full path tuples
        self.file_items = {}  # file -> set of names
        self.bodies = {}  # fn name -> [(file, body)]
        for p in repo.files:
            if not p.endswith(".rs"):
                continue
            base = module_path(p, self.crates) or [os.path.splitext(os.path.basename(p))[0]]
            parsed = self.parse(p)
            names = self.file_items.setdefault(p, set())
            for i in range(1, len(base) + 1):
                self.modules.add(tuple(base[:i]))
            for name, inline, kind in parsed.items:
                full = tuple(base + inline + [name])
                self.items.setdefault(name, set()).add((full, p))
                names.add(name)
                if kind == "mod":
                    self.modules.add(full)
            for name, inline, _, _ in parsed.tests:
                self.tests.add(tuple(base + inline + [name]))
            for name, bodies in parsed.bodies.items():
                self.bodies.setdefault(name, []).extend((p, b) for b in bodies)
            text = repo.read(p)
            if "asm!" in text:  # assembler macros, symbols and labels
                names.update(re.findall(r"\.macro\s+(\w+)|\.globl\s+(\w+)", text) and
                             {n for pair in re.findall(r"\.macro\s+(\w+)|\.globl\s+(\w+)", text) for n in pair if n})
                names.update(re.findall(r'(?m)^\s*"?([A-Za-z_]\w*):', text))
        self.module_names = {m[-1] for m in self.modules}

    def parse(self, path):
        if path not in self._parsed:
            self._parsed[path] = ParsedFile(self.repo.read(path))
        return self._parsed[path]

    def resolves(self, parts):
        """Whether a path (`a::b::c`, matched from the right) names a module or an item."""
        parts = tuple(parts)
        if any(m[-len(parts):] == parts for m in self.modules if len(m) >= len(parts)):
            return True
        return any(full[-len(parts):] == parts for full, _ in self.items.get(parts[-1], ()))

    def is_test(self, parts):
        parts = tuple(parts)
        return any(t[-len(parts):] == parts for t in self.tests if len(t) >= len(parts))

    def defines(self, path, name):
        return name in self.file_items.get(path, ())

    def build_tests(self, root_file, features):
        """[(full name, ignored)] of the tests compiled into a build: the module tree from
        `root_file`, following `mod` declarations whose `cfg` holds for `features`."""
        key = (root_file, frozenset(features))
        if key in self._builds:
            return self._builds[key]
        out = []
        live = lambda cfgs: all(cfg_true(c, features) for c in cfgs)

        def walk(path, modpath):
            parsed = self.parse(path)
            if not live(parsed.file_cfgs):
                return
            for name, inline, cfgs, ignore in parsed.tests:
                if live(cfgs):
                    ignored = ignore is True or any(cfg_true(c, features) for c in ignore)
                    out.append(("::".join(modpath + inline + [name]), ignored))
            here = os.path.dirname(path)
            own = here if os.path.basename(path) in ("lib.rs", "main.rs", "mod.rs") else path[:-3]
            for name, inline, attr_path, cfgs in parsed.mods:
                if not live(cfgs):
                    continue
                if attr_path:
                    cands = [os.path.normpath(os.path.join(here, attr_path))]
                else:
                    d = os.path.join(own, *inline)
                    cands = [os.path.join(d, name + ".rs"), os.path.join(d, name, "mod.rs")]
                for c in cands:
                    if c in self.repo.file_set:
                        walk(c, modpath + inline + [name])
                        break

        walk(root_file, [])
        self._builds[key] = out
        return out


# ---- counts the sources can give ----------------------------------------------------------------

def table_rows(src, name):
    """Rows of the table test `name`: the elements of the largest array literal in its body whose
    elements are tuples that open with a string (`("label", ...)`)."""
    counts = set()
    for _, body in src.bodies.get(name, []):
        pairs = bracket_pairs(body)
        best = 0
        for m in re.finditer(r"\[", body):
            i, end, rows = m.end(), pairs.get(m.start(), len(body)) - 1, 0
            while True:
                while i < end and body[i] in " \t\n,":
                    i += 1
                if i >= end:
                    best = max(best, rows)
                    break
                if body[i] != "(" or not body[i + 1:i + 200].lstrip().startswith('"'):
                    break
                rows += 1
                i = pairs.get(i, end)
        if best:
            counts.add(best)
    return counts.pop() if len(counts) == 1 else None


def c_cases(repo, path):
    """The cases of a C test program: the entries of its largest `struct test_case` table."""
    text = repo.read(path)
    pairs = bracket_pairs(text)
    counts = [len(re.findall(r'\{"', text[m.end() - 1:pairs.get(m.end() - 1, len(text))][1:]))
              for m in re.finditer(r"\bstruct\s+test_case\s+\w+\[\]\s*=\s*\{", text)]
    return max(counts) if counts else None


def rust_file_tests(src, path):
    return len(src.parse(path).tests)


def cargo_features(repo, manifest, asked):
    """The features a build of the crate of `manifest` has when `asked` are enabled: its
    `default` ones too (as `cargo test -p CRATE` builds it), and every feature those imply."""
    import tomllib
    table = tomllib.loads(repo.read(manifest)).get("features", {})
    todo, have = ["default", *asked], set()
    while todo:
        f = todo.pop()
        if f in have or "/" in f or f.startswith("dep:"):
            continue  # another crate's feature, or an optional dependency
        have.add(f)
        todo += table.get(f, [])
    return have - {"default"}


def mm_tests(src, features):
    tests = src.build_tests("mm/src/lib.rs", cargo_features(src.repo, "mm/Cargo.toml", features))
    return sum(1 for _, ig in tests if not ig), sum(1 for _, ig in tests if ig)


def mm_cfg_ignored(src, features):
    """mm's unit tests `#[ignore]`d in a build by a `cfg_attr` (their reason in place)."""
    plain = {n for n, ig in src.build_tests("mm/src/lib.rs", cargo_features(src.repo, "mm/Cargo.toml", ())) if ig}
    return sum(1 for n, ig in src.build_tests("mm/src/lib.rs", cargo_features(src.repo, "mm/Cargo.toml", features))
               if ig and n not in plain)


def mm_doctests(repo):
    """Rust code blocks in mm's doc comments and its README (a doctest through `include_str!`)."""
    def rust_fence(info):
        words = [w for w in re.split(r"[,\s]+", info.strip()) if w]
        return not words or all(w in ("rust", "no_run", "should_panic", "compile_fail") or w.startswith("edition")
                                for w in words)
    n = 0
    for p in repo.files:
        if p.startswith("mm/src/") and p.endswith(".rs"):
            fence = False
            for line in repo.read(p).splitlines():
                m = re.match(r"\s*//[/!]\s?```(.*)$", line)
                if m:
                    if not fence and rust_fence(m[1]):
                        n += 1
                    fence = not fence
    if 'include_str!("../README.md")' in repo.read("mm/src/lib.rs"):
        fence = False
        for line in repo.read("mm/README.md").splitlines():
            if line.startswith("```"):
                if not fence and rust_fence(line[3:]):
                    n += 1
                fence = not fence
    return n


def kernel_tests_run(src, features):
    """In-kernel tests a test image runs: registered in its build, less `floods_` (test=floods)."""
    tests = src.build_tests("kernel/src/tests/mod.rs", cargo_features(src.repo, "kernel/Cargo.toml",
                                                                      ("test-image", *features)))
    return sum(1 for name, _ in tests if not name.split("::")[-1].startswith("floods_"))


def claims(repo, src):
    """(pattern over a paragraph, what the number should be: fn(match) -> (value, what) or None)."""
    def rows(m):
        v = table_rows(src, m[1])
        return (v, f"rows in the table of `{m[1]}`") if v is not None else (None, f"no table found in `{m[1]}`")

    def cases(m):
        files = repo.resolve(m[1])
        if len(files) != 1:
            return None  # another project's file, or reported as missing
        f = files[0]
        v = c_cases(repo, f) if f.endswith(".c") else rust_file_tests(src, f)
        return v, f"cases in {f}"

    def const(value, what):
        return lambda m: (value(), what)

    return [
        (r"`(\w+)` \((?:[^()`]*?, )?(\d[\d,]*) (?:cases|rows)\b", rows, 2),
        (r"`?((?:[\w-]+/)*[\w-]+\.(?:c|rs))`?(?:(?![\w-]+\.(?:c|rs)\b)(?:[^`.]|`(?![^`]*\.(?:c|rs)`)[^`]*`|\.(?!\s)))*?"
         r"\b(\d+) cases\b",
         cases, 2),
        (r"\b(\d+) unit tests \((\d+) more `#\[ignore\]`d",
         lambda m: ((mm_tests(src, ())[0], "mm unit tests run by `cargo test -p mm`"),
                    (mm_tests(src, ())[1], "mm unit tests `#[ignore]`d")), (1, 2)),
        (r"\b(\d+) course tests", const(lambda: rust_file_tests(src, "mm/tests/course.rs"), "course tests"), 1),
        (r"\b(\d+) doctests\b", const(lambda: mm_doctests(repo), "mm doctests"), 1),
        (r"\b(\d+) in-kernel tests in each, in every granule's build",
         const(lambda: kernel_tests_run(src, ()), "in-kernel tests a test image runs"), 1),
        (r"\b(\d+) in-kernel tests\s+passing",
         const(lambda: kernel_tests_run(src, ()), "in-kernel tests a test image runs"), 1),
        (r"\b(\d+) in the LPA2 builds",
         const(lambda: kernel_tests_run(src, ("lpa2",)), "in-kernel tests an LPA2 test image runs"), 1),
        (r"\b(\d+) in the 16 KiB and 64 KiB builds",
         lambda m: ((mm_cfg_ignored(src, ("granule-16k",)), "mm tests ignored by a cfg_attr with granule-16k"),
                    (mm_cfg_ignored(src, ("granule-64k",)), "mm tests ignored by a cfg_attr with granule-64k")),
         (1, 1)),
        (r"\b(\d+) in the 4 KiB LPA2 build",
         const(lambda: mm_cfg_ignored(src, ("lpa2",)), "mm tests ignored by a cfg_attr with lpa2"), 1),
        (r"\b(\d+) in the 16 KiB LPA2 build",
         const(lambda: mm_cfg_ignored(src, ("granule-16k", "lpa2")),
               "mm tests ignored by a cfg_attr with granule-16k and lpa2"), 1),
    ]


# ---- the documents ------------------------------------------------------------------------------

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


def other_names(repo):
    """Test names outside Rust: C test functions and table cases, and scripts' step names."""
    names = set()
    c_test = re.compile(r"\b(?:static\s+)?void\s+(?:test_)?([a-z0-9_]+)\s*\(")
    c_case = re.compile(r'\{"([a-z0-9_]+)",')
    shell = re.compile(r"\b(?:qemu_case|record|step|bb)\s+\"?([a-z0-9_\-$]+)")
    for p in repo.files:
        if p.endswith((".c", ".h")):
            text = repo.read(p)
            names.update(c_test.findall(text))
            names.update(c_case.findall(text))
        elif p.startswith("scripts/"):
            names.update(shell.findall(repo.read(p)))
    return names


def c_defines(repo, path, name):
    """A C function or macro of that name, or a case of the file's test table."""
    text, n = repo.read(path), re.escape(name)
    return re.search(r"\b" + n + r"\s*\(|#define\s+" + n + r"\b|\{\"" + n + r"\",", text) is not None


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CITED = re.compile(r"`([a-z][a-z0-9]*(?:_[a-z0-9*]+){3,}_?)`")
QUALIFIED = re.compile(r"`((?:[a-z_][a-z0-9_]*::)+(?:[a-z_][a-z0-9_]*|…|\*))(?:\(\))?`")
PATHLIKE = r"[A-Za-z0-9_][\w.\-]*(?:/[\w.\-]+)*/?"
FILE_RS = re.compile(r"(?<![\w/.\-])((?:[\w\-]+/)*[\w\-]+\.rs)\b")
FILE_OTHER = re.compile(r"(?<![\w/.\-:])((?:[\w\-.]+/)+(?:[\w\-.]+)?)")
IDENT = r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*!?(?:\(\))?"
BESIDE = [  # (regex, group of the name, group of the file)
    (re.compile(r"`(" + IDENT + r")`,? (?:in|of) `([\w\-./]+\.(?:rs|c))`"), 1, 2),
    (re.compile(r"`([\w\-./]+\.(?:rs|c))`'s `(" + IDENT + r")`"), 2, 1),
    (re.compile(r"\(`([\w\-./]+\.(?:rs|c))`, `(" + IDENT + r")`\)"), 2, 1),
    (re.compile(r"(?<![\w/.\-])((?:[\w\-]+/)*[\w\-]+\.(?:rs|c)),? `?(" + IDENT + r")`?:"), 2, 1),
    (re.compile(r"`([\w\-./]+\.(?:rs|c))(?:::|:\s*|\s+)(" + IDENT + r")`"), 2, 1),
]
HASH = re.compile(r"(?<![\w\-@/.#:])(?<!0x)([0-9a-f]{7,40})(?![\w\-])")
BRANCH = re.compile(r"\bbranch(?:es)?\s+(`?)([\w./\-]+)\1")
PLACEHOLDER = re.compile(r"(?:^|/)(?:[A-Z][A-Z_]*|[^/]*[<>…*{}$][^/]*)(?:/|\.|$)")  # NAME.out, <set>/
MAPS_LINE = re.compile(r"[0-9a-f]+-[0-9a-f]+ [r-][w-][x-][ps] ")  # a /proc/PID/maps listing
ISSUE = re.compile(r"(?<![\w&/`#])#(\d+)\b")


class Checker:
    def __init__(self, repo, src, names):
        self.repo, self.src, self.names = repo, src, names
        self.problems = []
        self.hash_refs = []  # (doc, line, hash), looked up together in finish()
        self.in_span = False  # inside a code span that a line break interrupted
        self.claims = claims(repo, src) if src else []

    def problem(self, doc, n, text):
        self.problems.append((doc, n, text))

    def finish(self):
        """The commit lookups, in one `git cat-file`; the problems, by document and line."""
        found = self.repo.commits_exist(sorted({h for _, _, h in self.hash_refs}))
        for doc, n, h in self.hash_refs:
            if not found[h]:
                self.problem(doc, n, f"commit {h} does not exist in this repository")
        self.hash_refs = []
        return [f"{doc}:{n}: {text}" for doc, n, text in sorted(self.problems, key=lambda p: (p[0], p[1]))]

    def check_doc(self, doc, lines):
        fence, history = False, False
        paragraph = []  # (line number, text) of the current paragraph, outside code blocks
        for n, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if re.match(r"#+ ", line) and not fence:
                history = line.startswith("## Appendix") or (history and line.startswith("###"))
            if not line.strip():
                self.in_span = False
            if line.startswith("```"):
                fence = not fence
                self.check_counts(doc, paragraph)
                paragraph = []
                continue
            self.check_history(doc, n, line, fence)
            self.check_files(doc, n, line, fence)
            self.check_qualified(doc, n, line, fence)
            if fence:
                continue
            if line.startswith("|"):  # a table row is a paragraph of its own
                self.check_counts(doc, paragraph)
                self.check_counts(doc, [(n, line)])
                paragraph = []
            elif line.strip():
                paragraph.append((n, line))
            else:
                self.check_counts(doc, paragraph)
                paragraph = []
            self.check_links(doc, n, line)
            if not history:
                self.check_names(doc, n, line)
        self.check_counts(doc, paragraph)

    # Links to files of the repository, and their anchors.
    def check_links(self, doc, n, line):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(self.repo.root, os.path.dirname(doc), path)) if path \
                else os.path.join(self.repo.root, doc)
            if not os.path.exists(full):
                self.problem(doc, n, f"link to a missing file: {target}")
            elif anchor and full.endswith(".md") and anchor not in anchors(full):
                self.problem(doc, n, f"no heading for #{anchor} in {os.path.relpath(full, self.repo.root)}")

    # Test names: defined somewhere (short names), or resolving to a test function (qualified).
    def check_names(self, doc, n, line):
        defined = self.names
        for name in CITED.findall(line):
            if name in OUTSIDE:
                continue
            if "*" in name or name.endswith("_"):
                prefix = name.split("*")[0]
                if not any(d.startswith(prefix) for d in defined):
                    self.problem(doc, n, f"no test starts with {prefix}")
            elif name not in defined:
                self.problem(doc, n, f"cited test `{name}` is not defined anywhere")

    def check_qualified(self, doc, n, line, fence):
        crates = {c for _, c in self.src.crates} if self.src else set()
        candidates = QUALIFIED.findall(line) if not fence else \
            re.findall(r"\b((?:" + "|".join(sorted(crates)) + r")(?:::[a-z_][a-z0-9_]*)+)\b", line) if crates else []
        for cited in candidates:
            parts = [p for p in cited.split("::") if p not in ("crate", "self", "super")]
            if parts[0] in ("core", "std", "alloc"):
                continue
            if parts and parts[-1] in ("…", "*"):
                parts = parts[:-1]
            if len(parts) < 2:
                continue
            if not self.src.resolves(parts):
                self.problem(doc, n, f"`{cited}` names no module or item of the sources")
            elif (parts[-2] == "tests" or parts[-2].endswith("_tests")) and parts[-1] not in \
                    self.src.module_names and not self.src.is_test(parts):
                self.problem(doc, n, f"`{cited}` is not a test function")

    # Source files, and the names cited beside them.
    def check_files(self, doc, n, line, fence):
        spans = [m.span() for m in LINK.finditer(line)]
        in_link = lambda pos: any(a <= pos < b for a, b in spans)
        seen = set()
        placeholder = PLACEHOLDER
        for m in FILE_RS.finditer(line):
            cited = m[1]
            seen.add(m.start())
            if in_link(m.start()) or cited.startswith(("target/", "http")) or cited in OUTSIDE_FILES \
                    or placeholder.search(cited):
                continue
            if not self.repo.resolve(cited):
                self.problem(doc, n, f"cited source file {cited} does not exist")
        for m in FILE_OTHER.finditer(line):
            cited = m[1]
            if m.start() in seen or in_link(m.start()) or cited.endswith(".rs") or placeholder.search(cited):
                continue
            parts = cited.strip("/").split("/")
            if len(parts) < 2 or parts[0] in ("target", "tools") and parts[1] not in ("image-check", "mm-bench",
                                                                                     "uart-check", "gdb"):
                continue
            if self.repo.exists(parts[0]) and parts[0] not in (".", "..") and self.repo.exists("/".join(parts[:2])) \
                    and not self.repo.exists(cited.rstrip(".,:;")) and not self.repo.resolve(cited.rstrip(".,:;")):
                self.problem(doc, n, f"cited path {cited} does not exist")
        for pattern, gname, gfile in BESIDE:
            for m in pattern.finditer(line):
                name, cited = m[gname], m[gfile]
                files = self.repo.resolve(cited)
                if not files:
                    continue  # reported above
                item = re.sub(r"(\(\)|!)$", "", name).split("::")[-1]
                if item in ("mod", "test") or re.fullmatch(r"[A-Z]+", item) \
                        or (pattern is BESIDE[3] and not re.match(r"[a-z_]\w*$", item)):  # NAME, GROUP: placeholders
                    continue
                if not any(self.defines(f, item) for f in files):
                    self.problem(doc, n, f"`{item}` is not defined in {' or '.join(files)}")

    def defines(self, path, name):
        if path.endswith(".rs"):
            return self.src.defines(path, name)
        return c_defines(self.repo, path, name)

    # No branches git does not know, no commits it does not have, no issue numbers.
    def check_history(self, doc, n, line, fence):
        for quote, name in BRANCH.findall(line):
            if (quote or re.search(r"\d", name)) and name not in self.repo.branches:
                self.problem(doc, n, f"branch {name} is not a branch of this repository")
        for m in re.finditer(r"\b([\w\-]*\d[\w\-]*) branch\b", line):
            if m[1] not in self.repo.branches:
                self.problem(doc, n, f"branch {m[1]} is not a branch of this repository")
        hashes = [m[1] for m in HASH.finditer(line)
                  if re.search(r"[a-f]", m[1]) and re.search(r"\d", m[1]) and m[1] not in OUTSIDE_COMMITS
                  and not re.match(r" \d{4}-\d\d-\d\d\)", line[m.end():])  # rustc's version
                  and not (fence and MAPS_LINE.match(line))]
        self.hash_refs += [(doc, n, h) for h in hashes]
        if not fence:
            text = ("`" if self.in_span else "") + line
            self.in_span = text.count("`") % 2 == 1
            plain = re.sub(r"`[^`]*(?:`|$)|<[^>]*>|\]\([^)]*\)", "", text)
            for num in ISSUE.findall(plain):
                self.problem(doc, n, f"issue number #{num}: the docs stand alone")

    # Counts.
    def check_counts(self, doc, paragraph):
        if not paragraph or not self.claims:
            return
        text = " ".join(t for _, t in paragraph)
        starts, at = [], 0
        for n, t in paragraph:
            starts.append((at, n))
            at += len(t) + 1

        def line_of(pos):
            return max((s for s in starts if s[0] <= pos), default=starts[0])[1]

        for pattern, expected, groups in self.claims:
            if not re.search(r"\d (?:cases|rows|unit|course|doctests|in-kernel|in the)", text):
                break
            for m in re.finditer(pattern, text):
                got = expected(m)
                if got is None:
                    continue
                wants = got if isinstance(got[0], tuple) else (got,)
                gs = groups if isinstance(groups, tuple) else (groups,)
                for g, (value, what) in zip(gs, wants):
                    stated = int(m[g].replace(",", ""))
                    if value is None:
                        self.problem(doc, line_of(m.start(g)), f"cannot count: {what}")
                    elif value != stated:
                        self.problem(doc, line_of(m.start(g)), f"says {stated}, the sources give {value} ({what})")


def documents(repo):
    return [p for p in repo.files if p.endswith(".md") and (p == "README.md" or p.startswith("docs/")
            or re.fullmatch(r"[^/]+/(README|CHANGELOG)\.md", p))]


def main():
    if not self_test(quiet=True):
        return 1
    if sys.argv[1:] == ["--self-test"]:
        return 0 if self_test(quiet=False) else 1
    repo = Repo(ROOT)
    src = Sources(repo)
    checker = Checker(repo, src, src.items.keys() | other_names(repo))
    docs = documents(repo)
    for doc in docs:
        checker.check_doc(doc, repo.read(doc).splitlines())
    problems = checker.finish()
    for p in problems:
        print(p)
    print(f"check-docs: {len(docs)} files, {len(problems)} problems")
    return 1 if problems else 0


# ---- the checker's own tests --------------------------------------------------------------------

def self_test(quiet):
    """Runs the checks on made-up lines against a made-up repository: each planted mistake must
    be reported with its line, and each correct line must pass."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        files = {
            "Cargo.toml": "[workspace]\n",
            "kernel/Cargo.toml": '[package]\nname = "kernel"\n',
            "kernel/src/main.rs": "mod boot;\n#[cfg(feature = \"test-image\")]\nmod tests;\n",
            "kernel/src/boot/mod.rs": "pub mod translation;\n",
            "kernel/src/boot/translation.rs": "const TCR_EL1_BASE: u64 = 0;\npub fn tcr_el1() {}\n",
            "kernel/src/tests/mod.rs": "mod user;\n#[cfg(feature = \"lpa2\")]\nmod lpa2;\n",
            "kernel/src/tests/user.rs": "kernel_test!(\n    fn a_program_exits_with_its_status() { Ok(()) }\n);\n"
                                        "kernel_test!(fn floods_of_threads_end_in_eagain() { Ok(()) });\n",
            "kernel/src/tests/lpa2.rs": "kernel_test!(fn tcr_has_ds() { Ok(()) });\n",
            "mm/Cargo.toml": '[package]\nname = "mm"\n[features]\ndefault = ["alloc"]\nalloc = []\n',
            "mm/README.md": "```rust\nfn main() {}\n```\n",
            "mm/src/lib.rs": 'mod vm;\n#[cfg(feature = "alloc")]\nmod user;\n#[cfg(doctest)]\n#[doc = include_str!("../README.md")]\npub struct R;\n',
            "mm/src/vm/mod.rs": "/// ```\n/// x();\n/// ```\n/// ```text\n/// no\n/// ```\npub fn x() {}\n"
                                "#[cfg(test)]\nmod tests;\n",
            "mm/src/vm/tests.rs": '#[test]\nfn errno_table_from_the_man_pages() {\n    let t = &[\n'
                                  '        ("a", 1),\n        ("b", 2),\n        // c\n        ("d", 3),\n    ];\n}\n'
                                  '#[test]\n#[cfg_attr(any(feature = "granule-16k", feature = "granule-64k"), ignore = "level-1")]\n'
                                  'fn one_gib_block_splits_and_demotes() {}\n#[test]\n#[ignore]\nfn slow_bench_of_it_all() {}\n'
                                  'fn helper_that_is_not_a_test() {}\n'
                                  'proptest! {\n    fn random_operations_match_the_model(x in 0..1) {}\n}\n',
            "mm/src/user.rs": "#[cfg(test)]\nmod tests {\n    #[test]\n    fn a_default_feature_test() {}\n}\n",
            "mm/tests/course.rs": "#[test]\nfn one() {}\n",
            "tests/programs/fork.c": 'static const struct test_case tests[] = {\n    {"a", test_a},\n'
                                     '    {"b", test_b},\n};\nstatic void test_a(void) {}\n',
        }
        for path, text in files.items():
            full = os.path.join(tmp, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            open(full, "w").write(text)
        subprocess.run(["git", "-C", tmp, "init", "-q", "-b", "main"], check=True)
        subprocess.run(["git", "-C", tmp, "add", "."], check=True)
        subprocess.run(["git", "-C", tmp, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "t"],
                       check=True)
        head = git(tmp, "rev-parse", "--short=7", "HEAD").strip()
        repo = Repo(tmp)
        src = Sources(repo)
        # (line, whether it must be reported, what it exercises)
        cases = [
            ("`TCR_EL1_BASE` in `kernel/src/boot/translation.rs`", False, "a const beside its file"),
            ("`TCR_EL1_BASE` in `boot/early_map.rs`", True, "a file that does not exist"),
            ("(`kernel/src/boot/translation.rs`, `TCR_EL1_MISSING`)", True, "a const not in its file"),
            ("`boot/translation.rs`'s `tcr_el1`", False, "a fn beside its file"),
            ("`translation.rs`'s `handle`", True, "a fn not in its file"),
            ("kernel/src/boot/translation.rs, tcr_el1:", False, "a diagram's file and fn"),
            ("kernel/src/process/mod.rs, handle:", True, "a diagram's missing file"),
            ("`kernel/src/boot/translation.rs::tcr_el1`", False, "a file and its fn in one code span"),
            ("`boot/translation.rs: TCR_EL1_GONE`", True, "a file and a missing const in one code span"),
            ("`tests/programs/fork.c`", False, "a C file"),
            ("`tests/programs/gone.c`", True, "a missing C file"),
            ("Linux's `mm/mmap.c`", False, "an outside path"),
            ("`kernel/src/boot/`", False, "a directory"),
            ("`kernel/src/process/`", True, "a missing directory"),
            ("`errno_table_from_the_man_pages` (3 cases)", False, "a table's rows"),
            ("`errno_table_from_the_man_pages` (78 cases)", True, "a table's rows, miscounted"),
            ("`kernel::tests::user::a_program_exits_with_its_status`", False, "a qualified in-kernel test"),
            ("`kernel::tests::user::no_such_test_at_all`", True, "a qualified test that does not exist"),
            ("`vm::tests::helper_that_is_not_a_test`", True, "a qualified fn that is not a test"),
            ("`vm::tests::random_operations_match_the_model`", False, "a proptest case"),
            ("`boot::translation::tcr_el1`", False, "a qualified fn"),
            ("`kernel::tests::lpa2`", False, "a module"),
            ("`a_test_that_was_never_written`", True, "an undefined short name"),
            ("runs 1 in-kernel tests in each, in every granule's build, and 2 in the LPA2 builds", False,
             "in-kernel tests per build"),
            ("runs 2 in-kernel tests in each, in every granule's build, and 3 in the LPA2 builds", True,
             "in-kernel tests per build, miscounted"),
            ("runs 4 unit tests (1 more `#[ignore]`d: benchmarks), 1 course tests and 2 doctests", False,
             "mm's unit, course and doctest counts"),
            ("runs 3 unit tests (1 more `#[ignore]`d: benchmarks), 1 course tests and 2 doctests", True,
             "mm's unit tests counted without its default features"),
            ("runs 5 unit tests (1 more `#[ignore]`d: benchmarks), 1 course tests and 3 doctests", True,
             "mm's unit and doctest counts, miscounted"),
            ("1 in the 16 KiB and 64 KiB builds", False, "cfg_attr ignores"),
            ("`tests/programs/fork.c` (pipes; 2 cases, the same on Linux)", False, "a C program's cases"),
            ("`tests/programs/fork.c` (pipes; 14 cases, the same on Linux)", True, "a C program's cases, miscounted"),
            (f"measured at commit {head}", False, "a commit that exists"),
            ("measured at commit 4deecd9", True, "a commit that does not exist"),
            ("commit e2768b798a19 (Linux)", False, "an outside commit"),
            ("(2026-12-01, branch perf10)", True, "a branch that does not exist"),
            ("on branch `main`", False, "a branch that exists"),
            ("the branch predictor", False, "the English word"),
            ("fixed in #28", True, "an issue number"),
            ("`mov x0, #1`", False, "an immediate in code"),
            ("[a link](https://example.org/#3)", False, "a link's anchor"),
        ]
        failures = []
        for text, bad, what in cases:
            checker = Checker(repo, src, src.items.keys() | other_names(repo))
            checker.check_doc("doc.md", ["intro", "", text])
            problems = checker.finish()
            reported = [p for p in problems if p.startswith("doc.md:3: ")]
            if bool(reported) != bad or len(reported) != len(problems):
                failures.append(f"check-docs self-test: {what}: {text!r} gave {problems or 'nothing'}")
        if not quiet or failures:
            for f in failures:
                print(f)
            print(f"check-docs self-test: {len(cases)} cases, {len(failures)} failed")
        return not failures


if __name__ == "__main__":
    sys.exit(main())
