-- attack: a frontier pattern that fails at every position of a long subject
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-frontier-long", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- stopped after 0.25 s: the loop is back long before /healthz must answer (1 s)
  limits = { seconds = 0.25 },
  reconcile = function(req)
    return (("ab"):rep(1e5)):find("%f[%w]%w+%f[%W]x")
  end,
}
