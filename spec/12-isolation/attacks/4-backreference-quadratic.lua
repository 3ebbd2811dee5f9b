-- attack: a back-reference over a long capture at every position
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-backreference-quadratic", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    return (("a"):rep(2e5) .. "b"):find("(a*)%1b")
  end,
}
