-- attack: reach the string metatable to patch every string method in the state
-- expect: refused
-- error: attempt to index
local mt = getmetatable("")
mt.__index.format = function() return "" end
