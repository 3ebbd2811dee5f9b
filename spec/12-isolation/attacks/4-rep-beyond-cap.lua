-- attack: ask string.rep for more than the memory cap
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-rep-beyond-cap", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- stopped after 0.25 s: the loop is back long before /healthz must answer (1 s)
  limits = { seconds = 0.25 },
  reconcile = function(req)
    return #("x"):rep(1e9)
  end,
}
