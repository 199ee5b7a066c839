-- LuaJIT 2.1's trace compiler, run as `luajit -jv /parity/luajit-jit.lua` from a root image of
-- scripts/rootfs luajit (tests/linux-parity/cases): a hot loop compiled to machine code, a
-- function inlined into a compiled loop, and the compiler's status. -jv names each trace as it
-- is compiled. Nothing printed depends on addresses or times, and no loop branches both ways (a
-- trace that aborts is retried after a random back-off, so side traces vary from run to run).
print(jit.version, jit.os, jit.arch)
local s = 0
for i = 1, 1e6 do s = s + i end
print("sum", s)
local function sq(x) return x * x end
local t = 0
for i = 1, 1e5 do t = t + sq(i) end
print("squares", t)
print("jit on", (jit.status()))
