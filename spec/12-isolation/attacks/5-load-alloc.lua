-- attack: allocate without bound while the file loads
-- expect: refused
-- error: controller file exceeded the Lua memory limit
local t = {}
while true do t[#t + 1] = string.rep("z", 4096) .. #t end
