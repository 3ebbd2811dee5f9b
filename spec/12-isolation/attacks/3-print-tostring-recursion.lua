-- attack: recurse through print calling a __tostring that prints
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "3-print-tostring-recursion", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local mt = {}
    mt.__tostring = function(v) print(v) return "x" end
    print(setmetatable({}, mt))
  end,
}
