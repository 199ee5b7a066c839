# Compiles a WebAssembly loop with wasmtime (Cranelift) and runs it: a JIT inside python3.
from wasmtime import Store, Module, Instance
store = Store()
module = Module(store.engine, """
(module (func (export "sum") (param i32) (result i32) (local i32)
  (block (loop
    (br_if 1 (i32.eqz (local.get 0)))
    (local.set 1 (i32.add (local.get 1) (local.get 0)))
    (local.set 0 (i32.sub (local.get 0) (i32.const 1)))
    (br 0)))
  (local.get 1)))""")
instance = Instance(store, module, [])
print("wasm sum(1..1000) =", instance.exports(store)["sum"](store, 1000))
