-- attack: sort millions of numbers in one C call
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-sort-numbers", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local t = {}
    for i = 1, 3e6 do t[i] = (i * 7919) % 1000003 end
    table.sort(t)
  end,
}
