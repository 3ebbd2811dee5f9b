-- attack: yield the reconcile from inside a table.sort comparator
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "2-yield-in-comparator", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    table.sort({ 2, 1 }, function(x, y) coroutine.yield() return x < y end)
  end,
}
