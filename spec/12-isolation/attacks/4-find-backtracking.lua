-- attack: backtrack for hours in one string.find call: ("a"):rep(2e4):find(".-.-.-b")
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-find-backtracking", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- stopped after 0.25 s: the loop is back long before /healthz must answer (1 s)
  limits = { seconds = 0.25 },
  reconcile = function(req)
    return ("a"):rep(2e4):find(".-.-.-b")
  end,
}
