-- attack: resume the reconcile's own coroutine from inside it
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "2-resume-self", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local co = coroutine.running()
    return coroutine.resume(co, 200, "{}")
  end,
}
