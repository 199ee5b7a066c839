# Exercises os, pathlib, tempfile, subprocess, threading, mmap, json and sqlite3.
import json, mmap, os, pathlib, sqlite3, subprocess, tempfile, threading

with tempfile.TemporaryDirectory() as d:
    p = pathlib.Path(d) / "data.json"
    p.write_text(json.dumps({"n": [1, 2, 3]}))
    print("json:", json.loads(p.read_text())["n"], "listdir:", os.listdir(d))
    with open(p, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        print("mmap:", m[:6])
    db = sqlite3.connect(str(pathlib.Path(d) / "t.db"))
    db.execute("create table t(x)")
    db.executemany("insert into t values (?)", [(i,) for i in range(100)])
    db.commit()
    print("sqlite:", db.execute("select sum(x) from t").fetchone()[0])
    db.close()

out = subprocess.run(["/bin/echo", "from", "child"], capture_output=True, text=True).stdout
print("subprocess:", out.strip())
print("shell:", subprocess.check_output("echo $((6*7))", shell=True, text=True).strip())

total = []
lock = threading.Lock()
def work(k):
    s = sum(range(k * 10000))
    with lock:
        total.append(s)
threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print("threads:", len(total), "pid", os.getpid() > 0, "cwd", os.getcwd())
