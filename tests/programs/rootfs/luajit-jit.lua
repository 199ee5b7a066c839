-- LuaJIT 2.1's trace compiler, run as `luajit -jv /parity/luajit-jit.lua` from a root image of
-- scripts/rootfs luajit (tests/linux-parity/cases): a hot loop compiled to machine code, a
-- function inlined into a compiled loop, and the compiler's status. -jv names each trace as it
-- is compiled; those lines are not compared: LuaJIT counts a loop and a function toward
-- compilation in one of 64 slots chosen by their bytecode's address, so where its allocator put
-- the bytecode (a random place: it probes for memory below 2^47 with random hints, on Linux as
-- here) decides, in an occasional run, that `sq` is compiled as a trace of its own before the
-- loop that calls it (when the two share a slot). What is compared: the results, the compiler's status, and that at least
-- three traces were compiled (jit.util.traceinfo). No loop branches both ways (a trace that
-- aborts is retried after a random back-off, so side traces vary from run to run).
print(jit.version, jit.os, jit.arch)
local s = 0
for i = 1, 1e6 do s = s + i end
print("sum", s)
local function sq(x) return x * x end
local t = 0
for i = 1, 1e5 do t = t + sq(i) end
print("squares", t)
print("jit on", (jit.status()))
local traces = 0
while require("jit.util").traceinfo(traces + 1) do traces = traces + 1 end
print("at least three traces compiled", traces >= 3)
