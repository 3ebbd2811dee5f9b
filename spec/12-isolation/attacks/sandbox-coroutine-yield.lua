-- attack: yield the reconcile's own coroutine outside an API call
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "sandbox-coroutine-yield", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function() coroutine.yield("forged answer") end,
}
