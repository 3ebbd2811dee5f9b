-- attack: catch a refused spec with pcall, then fail with an error object whose __tostring loops
-- expect: refused
-- error: 1-spec-caught-then-error.lua
local luna = require "luna"
pcall(luna.controller, { name = "Bad" })
error(setmetatable({}, { __tostring = function() while true do end end }))
