-- attack: a pattern of a thousand optional items (deep recursion in the matcher)
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "4-pattern-too-complex", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    return ("a"):rep(1000):match(("a?"):rep(1000) .. ("a"):rep(1000))
  end,
}
