-- attack: backtrack in string.gsub at every position of a long subject
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-gsub-backtracking", watch = { "v1/ConfigMap", namespace = "@NS@" },
  -- stopped after 0.25 s: the loop is back long before /healthz must answer (1 s)
  limits = { seconds = 0.25 },
  reconcile = function(req)
    return (("ab"):rep(3e4):gsub("a.-a.-a.-c", "x"))
  end,
}
