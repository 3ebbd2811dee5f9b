-- attack: a kind that is a table whose __tostring loops (the error message must not call it)
-- expect: refused
-- error: invalid kind
local luna = require "luna"
return luna.controller {
  name = "1-kind-tostring-loop",
  watch = { setmetatable({}, { __tostring = function() while true do end end }), namespace = "@NS@" },
  reconcile = function() end,
}
