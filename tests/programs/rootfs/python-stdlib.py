# Python 3.11's standard library over the kernel's files, processes, threads and memory: each
# section prints what it computed, so the output is the same on every kernel that behaves as
# Linux (no pids, times or addresses). Run from a root image of scripts/rootfs python3, as
# `python3 /parity/python-stdlib.py` (tests/linux-parity/cases).
import json
import mmap
import os
import pathlib
import queue
import sqlite3
import subprocess
import sys
import tempfile
import threading

print("python", sys.version_info[:2], sys.platform)

# os and pathlib: a tree made, listed, renamed, read back and removed.
base = pathlib.Path(tempfile.mkdtemp(prefix="py-", dir="/tmp"))
print("mkdtemp mode", oct(base.stat().st_mode & 0o777), "parent", base.parent)
(base / "a" / "b").mkdir(parents=True)
(base / "a" / "one.txt").write_text("one\n")
(base / "a" / "b" / "two.txt").write_bytes(b"two\n" * 3)
os.symlink("a/one.txt", base / "link")
print("tree", sorted(str(p.relative_to(base)) for p in base.rglob("*")))
print("link", os.readlink(base / "link"), (base / "link").read_text().strip())
os.rename(base / "a" / "one.txt", base / "a" / "uno.txt")
print("renamed", sorted(os.listdir(base / "a")), "dangling", (base / "link").exists())
st = os.stat(base / "a" / "b" / "two.txt")
print("size", st.st_size, "nlink", st.st_nlink, "regular", pathlib.Path(base / "a" / "b" / "two.txt").is_file())
fd = os.open(base / "fd.bin", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o640)
os.write(fd, b"0123456789")
os.lseek(fd, 3, os.SEEK_SET)
print("pread", os.read(fd, 4), os.pread(fd, 3, 7), "mode", oct(os.fstat(fd).st_mode & 0o777))
try:
    os.open(base / "fd.bin", os.O_CREAT | os.O_EXCL)
except FileExistsError as e:
    print("O_EXCL", e.errno == 17)
os.close(fd)
with tempfile.NamedTemporaryFile("w+", dir=base, suffix=".tmp") as t:
    t.write("temporary\n")
    t.flush()
    t.seek(0)
    print("tempfile", t.read().strip(), os.path.dirname(t.name) == str(base))
for root, dirs, files in os.walk(base, topdown=False):
    for f in files:
        os.unlink(os.path.join(root, f))
    for d in dirs:
        p = os.path.join(root, d)
        (os.unlink if os.path.islink(p) else os.rmdir)(p)
os.rmdir(base)
print("removed", base.exists())

# subprocess: a child python, /bin/echo, sh with a pipe, an exit status, and stdin.
r = subprocess.run([sys.executable, "-c", "import sys; print('child', sys.argv[1:]); sys.exit(3)", "x", "y z"],
                   capture_output=True, text=True)
print("python child", r.stdout.strip(), "status", r.returncode)
print("echo", subprocess.check_output(["/bin/echo", "hello", "world"], text=True).strip())
print("sh", subprocess.check_output("printf 'c\\nb\\na\\n' | sort | tr '\\n' ' '", shell=True, text=True).strip())
r = subprocess.run(["sh", "-c", "read x; echo got $x; echo err >&2; exit 5"], input="line\n",
                   capture_output=True, text=True)
print("sh stdin", r.stdout.strip(), r.stderr.strip(), r.returncode)
p = subprocess.Popen(["/bin/cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
out, _ = p.communicate(b"through cat\n")
print("popen", out.decode().strip(), p.returncode)

# threading: workers sum their share under a lock and report through a queue.
total = 0
lock = threading.Lock()
results = queue.Queue()


def worker(n):
    global total
    s = 0
    for i in range(n * 1000, (n + 1) * 1000):
        s += i
        with lock:
            total += 1
    results.put((n, s))


threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("threads", total, sorted(results.get() for _ in range(4)))
ev = threading.Event()
cond_out = []
t = threading.Thread(target=lambda: (ev.wait(), cond_out.append("woken")))
t.start()
ev.set()
t.join()
print("event", cond_out)

# mmap: a shared file mapping written through memory and read back through read(2), and a
# private one whose writes stay in memory.
path = "/tmp/py-mmap.bin"
with open(path, "wb") as f:
    f.write(b"\0" * 8192)
with open(path, "r+b") as f:
    m = mmap.mmap(f.fileno(), 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    m[0:5] = b"hello"
    m[4096:4101] = b"world"
    m.flush()
    with open(path, "rb") as g:
        data = g.read()
    print("mmap shared", data[0:5], data[4096:4101], len(data))
    f.seek(100)
    f.write(b"via write")
    f.flush()
    print("write seen in mapping", m[100:109])
    m.close()
with open(path, "r+b") as f:
    p = mmap.mmap(f.fileno(), 4096, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE)
    p[0:5] = b"HELLO"
    print("mmap private", p[0:5], open(path, "rb").read(5))
    p.close()
a = mmap.mmap(-1, 4096)
a.write(b"anonymous")
print("anonymous", a[:9], a.find(b"nym", 0))
a.close()
os.unlink(path)

# json: a round trip with nesting, unicode and numbers.
doc = {"name": "parity", "list": [1, 2.5, None, True], "nested": {"k": "v\u00e9"}, "n": 2**40}
text = json.dumps(doc, sort_keys=True)
print("json", text, json.loads(text) == doc)

# sqlite3: an in-memory database and one on disk in /tmp (journal and all), reopened.
mem = sqlite3.connect(":memory:")
mem.execute("create table t (k integer primary key, v text)")
mem.executemany("insert into t (v) values (?)", [(c,) for c in "sqlite"])
print("sqlite memory", mem.execute("select count(*), group_concat(v, '') from t").fetchone(),
      mem.execute("select v from t where k > 3 order by v").fetchall())
mem.close()
db = "/tmp/py-parity.db"
con = sqlite3.connect(db)
con.execute("create table kv (k text primary key, v integer)")
with con:
    con.executemany("insert into kv values (?, ?)", [("a", 1), ("b", 2), ("c", 3)])
try:
    with con:
        con.execute("insert into kv values ('d', 4)")
        con.execute("insert into kv values ('a', 5)")
except sqlite3.IntegrityError as e:
    print("rolled back:", e)
con.close()
con = sqlite3.connect(db)
print("sqlite disk", con.execute("select group_concat(k || '=' || v) from kv").fetchone()[0],
      con.execute("pragma integrity_check").fetchone()[0])
con.close()
os.unlink(db)
print("done")
