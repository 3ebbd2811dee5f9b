-- attack: recurse through table.sort comparators
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "3-sort-recursion", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local cmp
    cmp = function(a, b) table.sort({ 3, 2, 1 }, cmp) return a < b end
    table.sort({ 3, 2, 1 }, cmp)
  end,
}
