-- attack: sort millions of numbers in one C call
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-sort-numbers", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- stopped after 0.25 s: the loop is back long before /healthz must answer (1 s)
  limits = { seconds = 0.25 },
  reconcile = function(req)
    local t = {}
    for i = 1, 3e6 do t[i] = (i * 7919) % 1000003 end
    table.sort(t)
  end,
}
