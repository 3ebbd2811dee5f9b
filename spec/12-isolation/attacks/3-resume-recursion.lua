-- attack: recurse through coroutine.resume of fresh coroutines
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "3-resume-recursion", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local function f() return coroutine.resume(coroutine.create(f)) end
    local ok, err = f()
    if not ok then error(err, 0) end
  end,
}
