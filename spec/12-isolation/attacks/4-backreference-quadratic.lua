-- attack: a back-reference over a long capture at every position
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-backreference-quadratic", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- stopped after 0.25 s: the loop is back long before /healthz must answer (1 s)
  limits = { seconds = 0.25 },
  reconcile = function(req)
    return (("a"):rep(2e5) .. "b"):find("(a*)%1b")
  end,
}
