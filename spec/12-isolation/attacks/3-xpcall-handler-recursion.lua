-- attack: recurse through xpcall message handlers
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "3-xpcall-handler-recursion", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local function f() return xpcall(error, f) end
    return f()
  end,
}
