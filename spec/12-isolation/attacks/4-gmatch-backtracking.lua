-- attack: backtrack in a gmatch iterator
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-gmatch-backtracking", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- stopped after 0.25 s: the loop is back long before /healthz must answer (1 s)
  limits = { seconds = 0.25 },
  reconcile = function(req)
    for w in (("x"):rep(3e4)):gmatch(".-.-y") do return w end
  end,
}
