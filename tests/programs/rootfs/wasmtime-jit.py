# wasmtime (Cranelift), from PyPI's wheel in Debian's python3, run as
# `python3 /parity/wasmtime-jit.py` from a root image of scripts/rootfs wasmtime
# (tests/linux-parity/cases): a WebAssembly module compiled to machine code and called, a host
# function called from it, each printed on a line starting "wasm:" (what the parity check
# compares); then every executable mapping of /proc/self/maps (scripts/test checks where they lie).
from wasmtime import Store, Module, Instance, Func, FuncType, ValType

store = Store()
module = Module(store.engine, """
(module
  (import "host" "report" (func $report (param i32)))
  (func (export "sum") (param i32) (result i32) (local i32)
    (block (loop
      (br_if 1 (i32.eqz (local.get 0)))
      (local.set 1 (i32.add (local.get 1) (local.get 0)))
      (local.set 0 (i32.sub (local.get 0) (i32.const 1)))
      (br 0)))
    (local.get 1))
  (func (export "fact") (param i64) (result i64)
    (if (result i64) (i64.le_u (local.get 0) (i64.const 1))
      (then (i64.const 1))
      (else (i64.mul (local.get 0) (call 2 (i64.sub (local.get 0) (i64.const 1)))))))
  (func (export "tell") (param i32) (call $report (i32.mul (local.get 0) (i32.const 2)))))
""")
reported = []
report = Func(store, FuncType([ValType.i32()], []), lambda v: reported.append(v))
instance = Instance(store, module, [report])
ex = instance.exports(store)
print("wasm: sum(1..1000) =", ex["sum"](store, 1000))
print("wasm: fact(20) =", ex["fact"](store, 20))
ex["tell"](store, 21)
print("wasm: host function called with", reported)
for line in open("/proc/self/maps"):
    if "x" in line.split()[1]:
        print(line, end="")
# The process's CPU time (not compared: a figure for the benchmark page).
import time
print(f"time: {round(time.process_time() * 1000)} ms of CPU")
print("wasm: done")
