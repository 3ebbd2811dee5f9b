-- attack: backtrack for hours in one string.find call: ("a"):rep(2e4):find(".-.-.-b")
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-find-backtracking", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    return ("a"):rep(2e4):find(".-.-.-b")
  end,
}
