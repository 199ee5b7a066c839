#!/usr/bin/env python3
"""The two halves of scripts/rootfs that are easier in Python than in the shell.

    rootfs.py resolve PACKAGE...   print "NAME ARCH VERSION" for each Debian arm64 package of the
                                   closure of PACKAGEs under Depends and Pre-Depends
    rootfs.py pack STAGING OUT     write the tree STAGING as a cpio "newc" archive OUT

resolve reads apt's own arm64 package indexes (`apt-get indextargets`, decompressed by
`apt-helper cat-file`), so it sees what `apt-get download` will fetch without installing anything
and without the host's installed packages getting in the way (`apt-get install --simulate` for a
foreign architecture counts the host's Multi-Arch: foreign packages as already there). For each
package the highest version in the indexes wins, as apt's default policy picks it. Of a
dependency's alternatives (`a | b`) the first one already chosen is kept, else the first that
exists (a real package, or a virtual one through its first provider), as apt does.
Recommends and Suggests are not followed: a root file system for running programs needs only
what the programs cannot start without.

pack writes the same member format as lib.sh's make_initramfs (magic 070701, no checksums), for
every directory, regular file and symbolic link of STAGING, sorted by path so that the same tree
gives the same bytes. Owners are root (the tree was unpacked by dpkg-deb as whoever ran it), the
modification times are the packages' own, and hard links are stored as separate copies (each
member has nlink 1; the archive is smaller with links, but a reader then has to keep inodes).
"""
import os
import re
import stat
import subprocess
import sys

# Packages a dependency names but only maintainer scripts use, left out of every image. They come
# in through Depends/Pre-Depends that exist so that `dpkg --configure` can run the package's
# postinst (which nothing here runs: the image is unpacked, never configured):
# - dpkg, debconf, init-system-helpers, ucf: the package manager and configuration machinery
#   (python3-minimal depends on dpkg for its py3compile trigger; debconf for questions);
# - perl-base: only debconf's dependency (no program of the profiles runs Perl);
# - tar: only dpkg's dependency;
# - install-info, lsb-base, sensible-utils: hooks of documentation and init scripts.
# Leaving one out that a program does need shows at once: the dynamic loader names the missing
# library, or the program the missing file.
SKIP = {
    "dpkg", "debconf", "init-system-helpers", "ucf", "perl-base", "tar",
    "install-info", "lsb-base", "sensible-utils",
}


def version_key_part(s):
    """dpkg's ordering of one upstream or revision string: alternating non-digit and digit runs,
    with '~' before everything (even the end), letters before non-letters."""
    def order(c):
        if c == "~":
            return -1
        if c.isalpha():
            return ord(c)
        return ord(c) + 256
    key = []
    while s:
        m = re.match(r"[^0-9]*", s)
        text, s = m.group(0), s[m.end():]
        key.append(tuple(order(c) for c in text) + (0,))
        m = re.match(r"[0-9]*", s)
        digits, s = m.group(0), s[m.end():]
        key.append(int(digits or 0))
    return key


def compare_versions(a, b):
    def split(v):
        epoch, _, rest = v.rpartition(":") if ":" in v else ("0", "", v)
        upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "0")
        return int(epoch or 0), upstream, revision
    ea, ua, ra = split(a)
    eb, ub, rb = split(b)
    if ea != eb:
        return -1 if ea < eb else 1
    for x, y in ((ua, ub), (ra, rb)):
        kx, ky = version_key_part(x), version_key_part(y)
        # Pad the shorter key with an empty text part, which '~' sorts before.
        n = max(len(kx), len(ky))
        kx += [(0,) if i % 2 == 0 else 0 for i in range(len(kx), n)]
        ky += [(0,) if i % 2 == 0 else 0 for i in range(len(ky), n)]
        if kx != ky:
            return -1 if kx < ky else 1
    return 0


def read_indexes(arch="arm64"):
    files = subprocess.run(
        ["apt-get", "indextargets", "--format", "$(FILENAME)", "Identifier: Packages",
         f"Architecture: {arch}"], check=True, capture_output=True, text=True).stdout.split()
    if not files:
        sys.exit(f"rootfs: apt has no {arch} package index (dpkg --add-architecture {arch}; apt-get update)")
    packages, provides = {}, {}
    for f in files:
        text = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", f], check=True,
                              capture_output=True, text=True).stdout
        for stanza in text.split("\n\n"):
            fields, last = {}, None
            for line in stanza.splitlines():
                if line[:1] in (" ", "\t") and last:
                    fields[last] += " " + line.strip()
                elif ":" in line:
                    last, _, value = line.partition(":")
                    fields[last] = value.strip()
            name = fields.get("Package")
            if not name or fields.get("Architecture") not in (arch, "all"):
                continue
            old = packages.get(name)
            if old and compare_versions(old["Version"], fields["Version"]) >= 0:
                continue
            packages[name] = fields
    for name, fields in packages.items():
        for p in split_list(fields.get("Provides", "")):
            provides.setdefault(p[0], []).append(name)
    # Of a virtual package's providers the most important comes first, as apt prefers it (awk:
    # mawk, Priority: required, before gawk, optional).
    rank = {"required": 0, "important": 1, "standard": 2, "optional": 3, "extra": 4}
    for names in provides.values():
        names.sort(key=lambda n: (rank.get(packages[n].get("Priority"), 5), n))
    return packages, provides


def split_list(field):
    """A Provides field: [(name, None)], version relations dropped."""
    return [(re.sub(r"\s*\(.*\)", "", p).strip().split(":")[0], None)
            for p in field.split(",") if p.strip()]


def dependency_groups(fields):
    """Depends and Pre-Depends as lists of alternative names (architecture qualifiers such as
    :any dropped: every package of the image is arm64 or architecture-independent)."""
    groups = []
    for key in ("Pre-Depends", "Depends"):
        for group in fields.get(key, "").split(","):
            names = [re.sub(r"\s*[\(\[].*", "", alt).strip().split(":")[0]
                     for alt in group.split("|")]
            names = [n for n in names if n]
            if names:
                groups.append(names)
    return groups


def resolve(roots):
    packages, provides = read_indexes()
    chosen, queue = {}, []

    def pick(names):
        for n in names:
            if n in chosen or n in SKIP:
                return n
            for p in provides.get(n, []):
                if p in chosen:
                    return p
        for n in names:
            if n in packages:
                return n
            if provides.get(n):
                return provides[n][0]
        return None

    for root in roots:
        if root not in packages:
            sys.exit(f"rootfs: no arm64 package named {root} in apt's indexes")
        queue.append(root)
    while queue:
        name = queue.pop(0)
        if name in chosen or name in SKIP:
            continue
        chosen[name] = packages[name]
        for group in dependency_groups(packages[name]):
            target = pick(group)
            if target is None:
                sys.exit(f"rootfs: {name} depends on {' | '.join(group)}, which no arm64 package provides")
            if target not in chosen and target not in SKIP:
                queue.append(target)
    for name in sorted(chosen):
        f = chosen[name]
        print(name, f["Architecture"], f["Version"])


def pack(staging, out):
    data = bytearray()
    ino = 0

    def member(name, st_mode, mtime, body):
        nonlocal ino
        ino += 1
        fields = [ino, st_mode, 0, 0, 1, mtime, len(body), 0, 0, 0, 0, len(name) + 1, 0]
        data.extend(b"070701" + b"".join(b"%08x" % f for f in fields) + name.encode() + b"\0")
        data.extend(b"\0" * (-len(data) % 4))
        data.extend(body)
        data.extend(b"\0" * (-len(data) % 4))

    paths = []
    for dirpath, dirnames, filenames in os.walk(staging):
        dirnames.sort()
        for n in dirnames + filenames:
            paths.append(os.path.join(dirpath, n))
    for path in sorted(paths):
        name = os.path.relpath(path, staging)
        st = os.lstat(path)
        mtime = int(st.st_mtime)
        if stat.S_ISLNK(st.st_mode):
            member(name, st.st_mode, mtime, os.readlink(path).encode())
        elif stat.S_ISDIR(st.st_mode):
            member(name, st.st_mode, mtime, b"")
        elif stat.S_ISREG(st.st_mode):
            with open(path, "rb") as f:
                member(name, st.st_mode, mtime, f.read())
        # Sockets, fifos and device nodes: no package of a profile ships one.
    member("TRAILER!!!", 0, 0, b"")
    with open(out, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "resolve":
        resolve(sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "pack":
        pack(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
