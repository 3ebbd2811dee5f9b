-- attack: %b over a long unbalanced subject at every position
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-balanced-long", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- stopped after 0.25 s: the loop is back long before /healthz must answer (1 s)
  limits = { seconds = 0.25 },
  reconcile = function(req)
    return (("("):rep(2e4)):find("%b()")
  end,
}
