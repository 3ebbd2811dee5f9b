-- attack: sort a long list of strings with the default order
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-sort-strings", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local t = {}
    for i = 1, 4e5 do t[i] = tostring((i * 7919) % 1000003) end
    table.sort(t)
  end,
}
