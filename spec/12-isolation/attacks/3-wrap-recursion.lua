-- attack: recurse through coroutine.wrap (each level nests the C stack)
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "3-wrap-recursion", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local function f() return coroutine.wrap(f)() end
    return f()
  end,
}
