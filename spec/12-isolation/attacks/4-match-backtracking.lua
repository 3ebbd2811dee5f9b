-- attack: backtrack in string.match with nested greedy items
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-match-backtracking", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- stopped after 0.25 s: the loop is back long before /healthz must answer (1 s)
  limits = { seconds = 0.25 },
  reconcile = function(req)
    return string.match(("a"):rep(5e4), "^(a*)*a*a*a*b")
  end,
}
