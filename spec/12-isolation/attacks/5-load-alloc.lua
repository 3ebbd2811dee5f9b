-- attack: allocate without bound while the file loads
-- expect: refused
-- error: controller file exceeded the Lua memory limit
local t = {}
-- 1 MiB a step: the cap is reached in ~128 steps, well inside the time
-- budget even on a loaded machine (4 KiB steps took 32,000 and could hit
-- the 0.5 s budget first)
local block = string.rep("z", 1048576)
while true do t[#t + 1] = block .. #t end
