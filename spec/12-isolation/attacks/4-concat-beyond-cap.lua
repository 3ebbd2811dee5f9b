-- attack: table.concat of a string repeated past the memory cap
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-concat-beyond-cap", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- stopped after 0.25 s: the loop is back long before /healthz must answer (1 s)
  limits = { seconds = 0.25 },
  reconcile = function(req)
    local s = ("x"):rep(1e6)
    local t = {}
    for i = 1, 200 do t[i] = s end
    return #table.concat(t)
  end,
}
