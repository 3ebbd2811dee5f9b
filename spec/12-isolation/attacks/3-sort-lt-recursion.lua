-- attack: recurse through __lt metamethods that table.sort runs without a comparator
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "3-sort-lt-recursion", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local mt = {}
    mt.__lt = function(a, b) table.sort({ setmetatable({}, mt), setmetatable({}, mt) }) return false end
    table.sort({ setmetatable({}, mt), setmetatable({}, mt), setmetatable({}, mt) })
  end,
}
