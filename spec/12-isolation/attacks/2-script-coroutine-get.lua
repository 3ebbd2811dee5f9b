-- attack: call the API from a coroutine the script made
-- expect: runs
local luna = require "luna"
return luna.controller {
  name = "2-script-coroutine-get", watch = { "v1/ConfigMap", namespace = "@NS@" },
  reconcile = function(req)
    local co = coroutine.wrap(function() return luna.get("v1/ConfigMap", req.namespace, req.name) end)
    return co()
  end,
}
