-- scripts/bench's section 14: luajit-jit.lua's loops (their traces compiled to machine code),
-- then every executable mapping of /proc/self/maps (the program, the libraries, the machine-code
-- areas) and the process's CPU time, for the table and the picture of where the code goes.
dofile("/parity/luajit-jit.lua")
for l in io.lines("/proc/self/maps") do
    local perms = l:match("^%x+%-%x+ (%S+)")
    if perms and perms:sub(3, 3) == "x" then print(l) end
end
print(string.format("time: %d ms of CPU", math.floor(os.clock() * 1000 + 0.5)))
