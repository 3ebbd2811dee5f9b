-- attack: a predicates list that is empty raw but answers every index through __index with a looping function
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "1-predicates-metatable", watch = { "v1/ConfigMap", namespace = "@NS@" },
  predicates = setmetatable({}, { __index = function() return function() while true do end end end }),
  reconcile = function() end,
}
