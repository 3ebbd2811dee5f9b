-- attack: replace the luna table's metatable to hook every API call
-- expect: refused
-- error: cannot change a protected metatable
local luna = require "luna"
setmetatable(luna, { __index = function() return os.exit end })
